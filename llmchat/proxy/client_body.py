"""Reading a client's JSON request body inside the app: its framing, its size limit, its parse.

Every failure is a `ClientError` carrying the status and the words the app
answers with (in the face's shape, through `ClientExchange.error`); nothing
here writes an answer itself. `ClientExchange.read_json` is the caller.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from .. import fastjson

__all__ = ["TOO_DEEP", "ClientError", "json_object", "read_body"]

TOO_DEEP: Final = "The request body is nested too deeply"


class ClientError(Exception):
    """A request the app refuses: `status`, the message (str), and the usage `error_type`."""

    def __init__(self, status: int, message: str, error_type: str) -> None:
        super().__init__(message)
        self.status = status
        self.error_type = error_type


def read_body(environ: Mapping[str, Any], max_body_bytes: int) -> bytes:
    """The request's body bytes, framed by Content-Length or chunked, within `max_body_bytes`."""
    length_text = environ.get("CONTENT_LENGTH") or ""
    stream = environ["wsgi.input"]
    if length_text:
        try:
            length = int(length_text)
        except ValueError:
            raise ClientError(400, "Content-Length is not a number", "invalid_request") from None
        if length > max_body_bytes:
            raise ClientError(413, _too_large(max_body_bytes), "too_large")
        data = _read(stream, length) if length > 0 else b""
    elif environ.get("HTTP_TRANSFER_ENCODING", "").lower() == "chunked":
        if not environ.get("wsgi.input_terminated"):
            # This server hands over the raw socket (wsgiref does): reading
            # would wait for an end that only the client's hang-up brings.
            raise ClientError(411, "Send the body with a Content-Length", "invalid_request")
        data = _read(stream, max_body_bytes + 1)
        if len(data) > max_body_bytes:
            raise ClientError(413, _too_large(max_body_bytes), "too_large")
    else:
        data = b""
    return data


def json_object(data: bytes) -> dict[str, Any]:
    """`data` parsed as the JSON object a request body must be."""
    if not data.strip():
        raise ClientError(400, "The request needs a JSON object body", "invalid_request")
    try:
        # The same reader as every upstream answer: nesting past MAX_DEPTH is
        # refused here, so no later walk of the body can recurse too deep.
        body = fastjson.loads(data.decode("utf-8"))
    except fastjson.TooDeepError:
        raise ClientError(400, TOO_DEEP, "invalid_request") from None
    except (UnicodeDecodeError, ValueError):
        raise ClientError(400, "The request body is not valid JSON", "invalid_request") from None
    if not isinstance(body, dict):
        raise ClientError(400, "The request body must be a JSON object", "invalid_request")
    return body


def _read(stream: Any, length: int) -> bytes:
    try:
        return bytes(stream.read(length))
    except TimeoutError:
        # The server's body deadline (llmchat's own server raises this) passed.
        raise ClientError(408, "The request body did not arrive in time", "timeout") from None


def _too_large(max_body_bytes: int) -> str:
    return f"The request body is larger than the proxy's limit of {max_body_bytes} bytes"
