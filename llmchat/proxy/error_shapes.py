"""How the proxy's error answers look and end, whichever layer sends them.

The error body each face answers with, which face a path belongs to, the
statuses whose answer says "do not retry", and `StreamCut` (a streamed body
that must end without its last chunk). The app answers its own errors with
these, and so does the server for the errors it answers before the app runs (a
malformed request line, headers too large, too many connections): a client of
any face can parse every error the proxy sends the way it parses its own
server's.

The one module outside `server/` that the server may import: it imports no
face, no app and no I/O, only the standard library and the pure
`protocols.anthropic_terms`.
"""

from __future__ import annotations

from typing import Any, Final
from urllib.parse import urlsplit

from ..protocols.anthropic_terms import error_type_for_status

__all__ = [
    "GEMINI_KEY_MESSAGE",
    "NO_RETRY_STATUSES",
    "StreamCut",
    "anthropic_error_body",
    "error_body",
    "face_of",
    "face_of_request_line",
    "gemini_error_body",
    "gemini_key_refusal",
    "gemini_status",
    "ollama_error_body",
    "openai_error_type",
    "overloaded_body",
]

NO_RETRY_STATUSES: Final = frozenset({400, 401, 403, 404, 405, 411, 413, 414, 422, 431})
"""Statuses the same request gets again: the request, its size or its key is the cause.

An error answer with one of them says ``x-should-retry: false``. 408 (the body
was slow), 409, 429 and the 5xx can succeed later and keep the client's own
retry rules.
"""


class StreamCut(ConnectionResetError):
    """Raised by a streamed body to end the connection without the body's last chunk.

    A connection reset because that is what the client gets, and because
    gunicorn closes a connection whose answer raised one quietly (any other
    exception from a started body it logs with its traceback); the proxy's own
    server does the same. The failure is already logged, and in the stream.
    """


def face_of(path: str) -> str:
    """`"ollama"`, `"anthropic"`, `"gemini"`, `"openai"` or `"proxy"`: whose client asks for
    `path`.

    Gemini's paths are ``/v1beta/...``, and under ``/v1/`` a model's method
    (``/v1/models/{model}:generateContent``: the colon says so).
    """
    if path.startswith("/api/"):
        return "ollama"
    if path.startswith("/v1/messages"):
        return "anthropic"
    if path.startswith("/v1beta/") or path == "/v1beta":
        return "gemini"
    if path.startswith("/v1/models/") and ":" in path:
        return "gemini"
    if path.startswith("/v1/"):
        return "openai"
    return "proxy"


def face_of_request_line(line: bytes) -> str:
    """The face of a raw HTTP request line, even one too long or too broken to parse.

    Used when the server must answer before it has a path: the second word is
    taken as the target, whatever else is wrong with the line.
    """
    words = line.decode("iso-8859-1").split()
    if len(words) < 2:
        return "proxy"
    target = words[1]
    if not target.startswith("/"):
        try:
            target = urlsplit(target).path  # an absolute-form target, http://host/path
        except ValueError:
            return "proxy"
    return face_of(target)


def error_body(face: str, status: int, message: str) -> dict[str, Any]:
    """The JSON error body `face`'s clients expect for HTTP `status`; `"proxy"` gets OpenAI's."""
    if face == "ollama":
        return ollama_error_body(message)
    if face == "anthropic":
        return anthropic_error_body(status, message)
    if face == "gemini":
        return gemini_error_body(status, message)
    return {"error": {"message": message, "type": openai_error_type(status), "code": status}}


def ollama_error_body(message: str) -> dict[str, Any]:
    """Ollama's error body: ``{"error": message}``."""
    return {"error": message}


def anthropic_error_body(status: int, message: str) -> dict[str, Any]:
    """Anthropic's error body, its ``error.type`` chosen by HTTP `status`."""
    return {"type": "error", "error": {"type": error_type_for_status(status), "message": message}}


_GEMINI_STATUS: Final = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    405: "UNIMPLEMENTED",
    408: "DEADLINE_EXCEEDED",
    409: "ABORTED",
    411: "INVALID_ARGUMENT",
    413: "INVALID_ARGUMENT",
    414: "INVALID_ARGUMENT",
    422: "INVALID_ARGUMENT",
    429: "RESOURCE_EXHAUSTED",
    431: "INVALID_ARGUMENT",
    499: "CANCELLED",
    501: "UNIMPLEMENTED",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
    529: "UNAVAILABLE",
}
"""google.rpc.Code names by HTTP status, as Google's APIs pair them."""


def gemini_status(status: int) -> str:
    """The google.rpc ``status`` word Gemini's errors carry for HTTP `status`."""
    found = _GEMINI_STATUS.get(status)
    if found is not None:
        return found
    return "FAILED_PRECONDITION" if 400 <= status < 500 else "INTERNAL"


def gemini_error_body(status: int, message: str) -> dict[str, Any]:
    """Gemini's error body: ``{"error": {"code", "message", "status"}}``.

    google-genai raises its ``ClientError``/``ServerError`` from it, and Gemini
    CLI reads ``code`` and ``status`` (its retry and quota rules).
    """
    return {"error": {"code": status, "message": message, "status": gemini_status(status)}}


GEMINI_KEY_MESSAGE: Final = "API key not valid. Please pass a valid API key."
"""Google's words for a missing or wrong key, which Gemini's face answers with too."""


def gemini_key_refusal() -> dict[str, Any]:
    """Google's answer to a bad key: a 400 ``INVALID_ARGUMENT`` whose ``ErrorInfo`` says
    ``API_KEY_INVALID`` (a 401 is what Google answers a bad OAuth token, not a key)."""
    body = gemini_error_body(400, GEMINI_KEY_MESSAGE)
    body["error"]["details"] = [
        {
            "@type": "type.googleapis.com/google.rpc.ErrorInfo",
            "reason": "API_KEY_INVALID",
            "domain": "googleapis.com",
            "metadata": {"service": "generativelanguage.googleapis.com"},
        },
        {
            "@type": "type.googleapis.com/google.rpc.LocalizedMessage",
            "locale": "en-US",
            "message": GEMINI_KEY_MESSAGE,
        },
    ]
    return body


def overloaded_body(face: str, message: str) -> dict[str, Any]:
    """The 503 body for "too many connections, retry later" in `face`'s shape.

    Anthropic's SDK retries on ``overloaded_error``; its status table would say
    ``api_error`` for a 503, so the type is set here.
    """
    body = error_body(face, 503, message)
    if face == "anthropic":
        body["error"]["type"] = "overloaded_error"
    return body


def openai_error_type(status: int) -> str:
    """The OpenAI ``error.type`` for HTTP `status`."""
    if status == 401:
        return "authentication_error"
    if status == 429:
        return "rate_limit_error"
    if 400 <= status < 500:
        return "invalid_request_error"
    return "server_error"
