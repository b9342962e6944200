"""Exceptions and the remote error classes.

Two kinds of trouble reach a caller, and they travel differently.

*Caller mistakes* (a bad argument, an unknown role, an invalid JSON Schema)
are raised as exceptions **before any network I/O**, and their messages name
the field and the fix. They inherit from ``ValueError`` or ``TypeError`` as
well, so either ``except`` style catches them.

*Remote failures* are not exceptions: a completion returns a ``Response``
whose ``error_class`` says what went wrong. ``Response.raise_for_error()``
turns a failed Response into one of the ``RemoteError`` subclasses below for
callers who prefer exceptions.

::

    LLMChatError
    ├── InvalidArgumentError      (also ValueError)  a bad value, named
    ├── InvalidTypeError          (also TypeError)   a value of the wrong type
    │   └── InvalidMessageError   (also ValueError)  a message llmchat cannot send
    └── RemoteError               a failed Response, raised on request
        ├── HTTPStatusError       error_class "http"        (error_status set)
        ├── RequestTimeoutError   error_class "timeout"
        ├── RemoteConnectionError error_class "connection"
        ├── UnusableResponseError error_class "response"
        └── UnknownRemoteError    error_class "unknown"

The names avoid the builtins ``TimeoutError`` and ``ConnectionError`` on
purpose: an ``except`` clause should never change meaning with an import.

Error classes (``Response.error_class``):

``http``
    the server answered with a non-2xx status (see ``error_status``).
``timeout``
    the request was accepted, then went silent past a deadline.
``connection``
    could not connect, connection reset, DNS failure.
``response``
    HTTP was fine but the result is unusable: truncated (``length``), content
    filtered, an unknown finish reason, a stream cut off, corrupted tool-call
    frames, an empty body, an in-band provider error.
``unknown``
    anything else.

``None`` means success, and also a user cancel: a cancel is not a failure.
"""

from __future__ import annotations

from typing import Any, Final, Literal, TypeAlias, get_args

__all__ = [
    "ERROR_CLASSES",
    "ErrorClass",
    "HTTPStatusError",
    "InvalidArgumentError",
    "InvalidMessageError",
    "InvalidTypeError",
    "LLMChatError",
    "RemoteConnectionError",
    "RemoteError",
    "RequestTimeoutError",
    "UnknownRemoteError",
    "UnusableResponseError",
    "remote_error_for",
]

ErrorClass: TypeAlias = Literal["http", "timeout", "connection", "response", "unknown"]
"""What kind of remote failure settled a Response (None on success and on a cancel)."""
ERROR_CLASSES: Final[tuple[ErrorClass, ...]] = get_args(ErrorClass)


class LLMChatError(Exception):
    """Root of every exception llmchat raises on purpose."""


class InvalidArgumentError(LLMChatError, ValueError):
    """A caller passed a value llmchat cannot use; the message names the field."""


class InvalidTypeError(LLMChatError, TypeError):
    """A caller passed a value of the wrong type; the message names the field."""


class InvalidMessageError(InvalidTypeError, InvalidArgumentError):
    """A chat message llmchat cannot send (unknown role, content of a wrong type, ...).

    Both a `ValueError` and a `TypeError`: a message is one value, and callers
    reasonably catch either. The text names the message index and the field.
    """


class RemoteError(LLMChatError):
    """A failed Response, raised by `Response.raise_for_error()`.

    `response` is the failed Response (keyword-only), so nothing it carried —
    partial text, usage, tool calls — is lost by raising.
    """

    error_class: str = "unknown"

    def __init__(self, message: str, *, response: Any = None, status: int | None = None) -> None:
        super().__init__(message)
        self.response = response
        self.status = status


class HTTPStatusError(RemoteError):
    """The server answered with a non-2xx status; `status` holds it."""

    error_class = "http"


class RequestTimeoutError(RemoteError):
    """The request was accepted, then went silent past a deadline."""

    error_class = "timeout"


class RemoteConnectionError(RemoteError):
    """Could not connect, or the connection was reset."""

    error_class = "connection"


class UnusableResponseError(RemoteError):
    """HTTP succeeded but the result is unusable (truncated, filtered, cut off, ...)."""

    error_class = "response"


class UnknownRemoteError(RemoteError):
    """A remote failure that fits no other class."""

    error_class = "unknown"


_BY_CLASS: Final[dict[str, type[RemoteError]]] = {
    cls.error_class: cls
    for cls in (HTTPStatusError, RequestTimeoutError, RemoteConnectionError, UnusableResponseError)
}


def remote_error_for(error_class: str | None) -> type[RemoteError]:
    """Return the `RemoteError` subclass that stands for `error_class`."""
    return _BY_CLASS.get(error_class or "unknown", UnknownRemoteError)
