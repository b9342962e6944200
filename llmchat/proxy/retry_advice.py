"""What an error answer tells a client about retrying, and the log line of a refused request.

Agent clients retry on their own (Claude Code about ten times with growing
back-off, the OpenAI and Anthropic SDKs twice): an error that cannot succeed
on a retry says so with ``x-should-retry: false``, the header both SDKs obey,
so a wrong key fails in a second instead of minutes. A rate limit or overload
passes the upstream's ``retry-after`` on, so the client waits as long as the
upstream asked.
"""

from __future__ import annotations

import logging
import re
from email.utils import parsedate_to_datetime
from typing import Final

__all__ = [
    "RETRY_AFTER_STATUSES",
    "clean_retry_after",
    "describe_refusal",
    "log_refusal",
]

log = logging.getLogger("llmchat.proxy")

RETRY_AFTER_STATUSES: Final = frozenset({429, 503, 529})

_DELAY_SECONDS = re.compile(r"\d{1,6}")
_QUOTED = re.compile(r"'[^']*'|\"[^\"]*\"|`[^`]*`")
_FIELD_PATH = re.compile(r"[A-Za-z_][\w.\[\]\-]*")


def clean_retry_after(value: str | None) -> str | None:
    """An upstream's ``Retry-After`` when it is a delay in seconds or an HTTP date; else None.

    Anything else is not passed on: the header is copied into the client's
    answer, so only the two forms RFC 9110 allows may cross.
    """
    if value is None:
        return None
    value = value.strip()
    if _DELAY_SECONDS.fullmatch(value):
        return value
    try:
        parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    return value if value.isascii() and len(value) <= 64 else None


def describe_refusal(message: str) -> str:
    """`message` with every quoted value masked: the field path and the reason, no content.

    The faces word their refusals as ``path: reason`` and quote what the client
    sent (``not 'system'``); the quotes are where a field's content would be.
    """
    path, sep, reason = message.partition(": ")
    masked = _QUOTED.sub("'…'", reason if sep else message)
    if sep and _FIELD_PATH.fullmatch(path):
        return f"{path}: {masked[:200]}"
    return masked[:200]


def log_refusal(face: str, status: int, message: str) -> None:
    """The one WARNING line of a 4xx the proxy answers itself: face, status, field and reason."""
    log.warning("%s face refused a request (HTTP %d): %s", face, status, describe_refusal(message))
