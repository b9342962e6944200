"""Reading OpenAI-compatible completion bodies: pure functions, no I/O.

What a finished (non-streamed) body says — text, reasoning, tool calls,
finish reason, usage, in-band errors — and the finish-reason rules every
completion path applies (spec: STREAM TERMINATION CONTRACT, which the
blocking paths follow too).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from .messages import content_text
from .tools import ToolCall

__all__ = [
    "Completion",
    "ErrorBody",
    "error_message",
    "inband_error",
    "json_error_message",
    "judge_finish",
    "no_finish",
    "parse_completion",
    "usage_fields",
]

SUCCESS_REASONS: Final = frozenset({"stop", "tool_calls", "function_call"})
ERR_LENGTH: Final = "Hit max tokens"
ERR_FILTER: Final = "Blocked by content filter"
ERR_PROVIDER: Final = "The provider ended the completion with finish_reason 'error'"


@dataclass(slots=True)
class Completion:
    """What one non-streamed completion body says."""

    text: str = ""
    reasoning: str | None = None
    refusal: str | None = None
    tool_calls: list[ToolCall] = field(default_factory=list)
    finish_reason: str | None = None
    model: str | None = None
    id: str | None = None
    citations: list[Any] | None = None
    error: str | None = None
    """An in-band provider error (top-level or a choice's `error`); None when none."""


def no_finish(reason: Any) -> bool:
    """True when `reason` means "no finish yet": None, ``""`` or the string ``"null"``."""
    return reason is None or reason == "" or reason == "null"


def judge_finish(reason: str | None) -> tuple[str | None, str | None]:
    """Return `(error_class, err)` for a decided finish reason; `(None, None)` is success.

    ``length`` is a failure (a truncated answer is never labelled complete),
    as are ``content_filter`` and any reason llmchat does not know.
    """
    if reason is None or reason in SUCCESS_REASONS:
        return None, None
    if reason == "length":
        return "response", ERR_LENGTH
    if reason == "content_filter":
        return "response", ERR_FILTER
    if reason == "error":  # an upstream failure with no error object to quote
        return "response", ERR_PROVIDER
    return "response", f"Unknown finish reason: {reason}"


def parse_completion(payload: Mapping[str, Any], *, kind: str = "chat") -> Completion:
    """Read a ``chat.completion`` (`kind="chat"`) or ``text_completion`` body.

    Never raises on odd shapes: what is missing stays at its default.
    """
    out = Completion(model=_str_or_none(payload.get("model")), id=_str_or_none(payload.get("id")))
    out.error = inband_error(payload.get("error"))
    citations = payload.get("citations")
    if isinstance(citations, list):
        out.citations = citations
    choices = payload.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], Mapping):
        return out
    choice = choices[0]
    out.error = out.error or inband_error(choice.get("error"))
    reason = choice.get("finish_reason")
    out.finish_reason = None if no_finish(reason) else str(reason)
    if kind == "text":
        out.text = content_text(choice.get("text"))
        return out
    message = choice.get("message")
    if not isinstance(message, Mapping):
        return out
    out.text = content_text(message.get("content"))
    reasoning = message.get("reasoning_content")
    if not isinstance(reasoning, str) or not reasoning:
        reasoning = message.get("reasoning")
    out.reasoning = reasoning if isinstance(reasoning, str) and reasoning else None
    refusal = message.get("refusal")
    out.refusal = refusal if isinstance(refusal, str) and refusal else None
    calls = message.get("tool_calls")
    if isinstance(calls, list):
        out.tool_calls = [ToolCall.from_openai(c) for c in calls if isinstance(c, Mapping)]
    return out


def _str_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def inband_error(error: Any) -> str | None:
    """The message of a provider's in-band `error` value; None when there is none."""
    if not error:  # None, False, "" and {} all mean "no error"
        return None
    if isinstance(error, Mapping):
        message = error.get("message")
        return str(message) if message else str(dict(error))
    return str(error)


_USAGE_KEYS: Final = ("prompt_tokens", "completion_tokens", "total_tokens")


def usage_fields(payload: Mapping[str, Any]) -> dict[str, Any]:
    """The Response usage fields a body or stream event reports; absent keys left out.

    Reads ``usage.{prompt,completion,total}_tokens``,
    ``usage.prompt_tokens_details.cached_tokens``,
    ``usage.completion_tokens_details.reasoning_tokens``, the raw ``usage``
    block, and ``model``. A count of 0 is kept: 0 is a real value.
    """
    fields: dict[str, Any] = {}
    model = payload.get("model")
    if isinstance(model, str) and model:
        fields["model"] = model
    usage = payload.get("usage")
    if not isinstance(usage, Mapping):
        return fields
    fields["usage"] = dict(usage)
    for key in _USAGE_KEYS:
        if _is_count(usage.get(key)):
            fields[key] = usage[key]
    cached = _detail(usage, "prompt_tokens_details", "cached_tokens")
    if cached is not None:
        fields["cached_tokens"] = cached
    reasoning = _detail(usage, "completion_tokens_details", "reasoning_tokens")
    if reasoning is not None:
        fields["reasoning_tokens"] = reasoning
    return fields


def _detail(usage: Mapping[str, Any], block: str, key: str) -> int | None:
    details = usage.get(block)
    if isinstance(details, Mapping) and _is_count(details.get(key)):
        return int(details[key])
    return None


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


@dataclass(frozen=True, slots=True)
class ErrorBody:
    """What an error-status body was, for a log line that must not quote arbitrary text."""

    size: int
    """The body's length in bytes."""
    content_type: str | None
    """The response's ``Content-Type``; None when it sent none."""
    message: str | None
    """The message of a JSON error body; None when the body was not JSON with a message."""

    def describe(self) -> str:
        """The JSON message, or only the body's size and content type."""
        if self.message is not None:
            return self.message
        return f"{self.size} bytes of {self.content_type or 'unknown content type'}"


def json_error_message(payload: Any) -> str | None:
    """The message of a JSON error body (``error``, ``message`` or ``detail``); None if none."""
    if isinstance(payload, Mapping):
        for key in ("error", "message", "detail"):
            found = inband_error(payload.get(key))
            if found:
                return found
    return None


def error_message(payload: Any, text: str, status: int | None = None) -> str:
    """The provider's own words for a failure, from a JSON error body or the text."""
    found = json_error_message(payload)
    if found:
        return found
    stripped = text.strip()
    if stripped:
        return stripped if len(stripped) <= 500 else stripped[:497] + "..."
    return f"HTTP {status}" if status is not None else "Empty response body"
