"""Gemini's words for what an OpenAI answer says: parts, finish reasons, usage, errors.

Pure, no I/O. What `GeminiStream` writes chunk by chunk and what the Gemini
face's whole ``generateContent`` body is built from, so both say the same
thing the same way: a ``GenerateContentResponse`` is ``candidates`` (one, index
0, ``content.role`` ``"model"``), then ``usageMetadata``, ``modelVersion`` and
``responseId``, in the order Gemini writes them.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

from ..tools import ToolCall
from .chunk_fields import int_or_none
from .rejection import UndecodableArguments

__all__ = [
    "encode_ordered",
    "error_body",
    "finish_reason_for",
    "function_call_part",
    "gemini_status",
    "generate_content_response",
    "reasoning_tokens_of",
    "usage_metadata",
]

_FINISH_REASONS: Final[Mapping[str, str]] = {
    "stop": "STOP",
    "length": "MAX_TOKENS",
    "content_filter": "SAFETY",
    # Gemini ends a turn that called functions with STOP: there is no tool_calls reason.
    "tool_calls": "STOP",
    "function_call": "STOP",
}

# google.rpc codes as the Gemini API writes them over HTTP (code, status).
_STATUSES: Final[Mapping[int, str]] = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    409: "ABORTED",
    429: "RESOURCE_EXHAUSTED",
    499: "CANCELLED",
    500: "INTERNAL",
    501: "UNIMPLEMENTED",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}

_dump: Callable[[Any], str] = json.JSONEncoder(
    ensure_ascii=False, allow_nan=False, separators=(",", ":")
).encode


def encode_ordered(value: Any) -> bytes:
    """Compact UTF-8 JSON with members in insertion order: Gemini's order, as built here.

    Raises `ValueError` for NaN or a lone surrogate, `TypeError` for a value JSON
    cannot carry (the translator then writes its error instead).
    """
    return _dump(value).encode("utf-8")


def finish_reason_for(reason: str | None) -> str:
    """Gemini's ``finishReason`` for an OpenAI finish reason (None: ``STOP``).

    A reason Gemini has no word for is ``OTHER``, which its clients read as a
    stop for an unstated reason.
    """
    if reason is None:
        return "STOP"
    return _FINISH_REASONS.get(reason, "OTHER")


def gemini_status(code: int) -> tuple[int, str]:
    """The ``(code, status)`` pair of a Gemini error for an HTTP status the proxy chose.

    Google pairs each code with one status name; a status it has no name for is
    ``500 INTERNAL`` (a 5xx, e.g. the proxy's 502 for an unreadable chunk) or
    ``400 INVALID_ARGUMENT`` (a 4xx).
    """
    name = _STATUSES.get(code)
    if name is not None:
        return code, name
    return (500, "INTERNAL") if code >= 500 or code < 400 else (400, "INVALID_ARGUMENT")


def error_body(code: int, message: str) -> dict[str, Any]:
    """``{"error": {"code", "message", "status"}}``: what google-genai and Gemini CLI read."""
    code, status = gemini_status(code)
    return {"error": {"code": code, "message": str(message), "status": status}}


def function_call_part(call: ToolCall) -> dict[str, Any]:
    """One whole ``functionCall`` part: the name and the arguments as an object.

    No ``id``: the Gemini API sends none, and its clients pair a
    ``functionResponse`` with its call by name and order (Gemini CLI 0.61
    makes its own id, ``name_<ms>_<n>``, and echoes it on the result; the face's
    history pairs by that id, else by name and order). Raises
    `UndecodableArguments` for a call without a name or whose arguments were
    not a JSON object: never a call to run with ``{}``.
    """
    if call.arguments_undecodable or not call.name:
        raise UndecodableArguments(f"tool call {call.name!r}: arguments are not a JSON object")
    return {"functionCall": {"name": call.name, "args": dict(call.arguments)}}


def reasoning_tokens_of(usage: Mapping[str, Any]) -> int | None:
    """The reasoning tokens an upstream ``usage`` block reports, in any spelling it uses."""
    for block in ("completion_tokens_details", "output_tokens_details"):
        details = usage.get(block)
        if isinstance(details, Mapping):
            count = int_or_none(details.get("reasoning_tokens"))
            if count is not None:
                return count
    return int_or_none(usage.get("thoughtsTokenCount"))  # a Gemini upstream's own block


def usage_metadata(
    prompt: int | None,
    completion: int | None,
    *,
    reasoning: int | None = None,
    cached: int | None = None,
) -> dict[str, int] | None:
    """``usageMetadata`` for OpenAI counts; None when nothing was counted.

    `completion` is OpenAI's (reasoning included); Gemini's
    ``candidatesTokenCount`` leaves the thoughts out (the captures: 11 + 2 + 291
    = 304), so it is `completion` minus `reasoning`, which goes to
    ``thoughtsTokenCount``. ``totalTokenCount`` is prompt plus completion.
    ``cachedContentTokenCount`` (part of the prompt, as OpenAI's cached tokens)
    and ``thoughtsTokenCount`` are written only when counted, as Gemini does.
    """
    if prompt is None and completion is None:
        return None
    out: dict[str, int] = {}
    if prompt is not None:
        out["promptTokenCount"] = prompt
    if completion is not None:
        candidates = completion if reasoning is None else max(completion - reasoning, 0)
        out["candidatesTokenCount"] = candidates
    out["totalTokenCount"] = (prompt or 0) + (completion or 0)
    if cached is not None:
        out["cachedContentTokenCount"] = cached
    if reasoning is not None:
        out["thoughtsTokenCount"] = reasoning
    return out


def generate_content_response(
    parts: Sequence[Mapping[str, Any]] | None,
    *,
    model: str,
    response_id: str,
    finish_reason: str | None = None,
    usage: Mapping[str, int] | None = None,
) -> dict[str, Any]:
    """One ``GenerateContentResponse``: candidate 0 with `parts` (None: a content without
    parts, as Gemini writes a turn that said nothing), its finish, then the usage."""
    content: dict[str, Any] = {"parts": list(parts)} if parts is not None else {}
    content["role"] = "model"
    candidate: dict[str, Any] = {"content": content}
    if finish_reason is not None:
        candidate["finishReason"] = finish_reason
    candidate["index"] = 0
    out: dict[str, Any] = {"candidates": [candidate]}
    if usage is not None:
        out["usageMetadata"] = dict(usage)
    out["modelVersion"] = model
    out["responseId"] = response_id
    return out
