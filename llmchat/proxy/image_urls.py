"""Base64 image data as ``data:`` URLs, for the proxy's request translators.

Ollama clients send bare base64 strings with no media type; an OpenAI
``image_url`` part wants a ``data:`` URL that names one. The type is read from
the image's first bytes (its magic number), never guessed from anything else.
"""

from __future__ import annotations

import base64
import binascii
import re
from typing import Final

from ..errors import InvalidArgumentError, InvalidTypeError

__all__ = ["UNKNOWN_MEDIA_TYPE", "data_url", "sniff_media_type"]

UNKNOWN_MEDIA_TYPE: Final = "application/octet-stream"
"""The media type written when the bytes match no known image format.

Honest rather than hopeful: labelling unknown bytes ``image/png`` would only
move the failure upstream and make it harder to read.
"""

# A data URL a client already built is passed on as is (after checking it).
_DATA_URL: Final = re.compile(r"^data:([\w.+-]+/[\w.+-]+);base64,", re.ASCII)


def sniff_media_type(data: bytes) -> str | None:
    """Return the image media type `data` starts with, or None when it is none we know.

    Recognised: PNG, JPEG, GIF (87a and 89a) and WebP.
    """
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if data.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if data.startswith((b"GIF87a", b"GIF89a")):
        return "image/gif"
    if len(data) >= 12 and data.startswith(b"RIFF") and data[8:12] == b"WEBP":
        return "image/webp"
    return None


def data_url(value: object, *, field: str, media_type: str | None = None) -> str:
    """Return ``data:<type>;base64,<value>`` for base64 image data `value`.

    `field` is the client's path to the value (``messages[0].images[1]``); every
    error message starts with it. `media_type`, when given (Anthropic states
    it), is used as is; otherwise it is sniffed from the decoded bytes, and
    `UNKNOWN_MEDIA_TYPE` when they match no known format. A `value` that is
    already a base64 ``data:`` URL is returned unchanged once its payload
    checks out. Whitespace inside the base64 text (line-wrapped encoders) is
    removed. Raises `InvalidTypeError` for a non-string and
    `InvalidArgumentError` for empty or invalid base64.
    """
    if not isinstance(value, str):
        raise InvalidTypeError(f"{field}: must be a base64 string, not {type(value).__name__}")
    match = _DATA_URL.match(value)
    if match is not None:
        _decode(value[match.end() :], field)
        return value
    payload = "".join(value.split())
    data = _decode(payload, field)
    if media_type is None:
        media_type = sniff_media_type(data[:12]) or UNKNOWN_MEDIA_TYPE
    return f"data:{media_type};base64,{payload}"


def _decode(payload: str, field: str) -> bytes:
    if not payload:
        raise InvalidArgumentError(f"{field}: image data is empty")
    try:
        # Decoding all of it is the only way to know the upstream will accept it;
        # the C decoder makes that cheap next to the request it saves.
        return base64.b64decode(payload, validate=True)
    except (binascii.Error, ValueError):
        raise InvalidArgumentError(f"{field}: image data is not valid base64") from None
