"""The objects of OpenAI's Responses API that the proxy's Responses face sends.

Pure builders over plain values, shared by the event stream (`responses.ResponsesStream`)
and the non-streaming body, so a streamed answer's final ``response`` and a
blocking answer are the same object. Shapes follow the recorded OpenAI streams
(``captures/responses``) and the ``openai`` SDK's ``types/responses`` models.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any, Final

__all__ = [
    "FAILED_CODE",
    "Echo",
    "function_call_item",
    "message_item",
    "new_id",
    "output_text_part",
    "reasoning_item",
    "reasoning_text_part",
    "response_object",
    "status_for",
    "usage_object",
]

FAILED_CODE: Final = "server_error"
"""The ``error.code`` of a failed response: the proxy never passes the upstream's own on."""

Echo = Mapping[str, Any]
"""The request fields a Response object repeats (``model``, ``instructions``, ``tools`` …)."""

_INCOMPLETE_REASONS: Final = {"length": "max_output_tokens", "content_filter": "content_filter"}


def new_id(prefix: str) -> str:
    """A fresh id in OpenAI's style: ``resp_…``, ``msg_…``, ``rs_…``, ``fc_…``, ``call_…``."""
    return f"{prefix}_{uuid.uuid4().hex}"


def status_for(finish_reason: str | None) -> tuple[str, dict[str, Any] | None]:
    """`(status, incomplete_details)` for an OpenAI chat ``finish_reason``.

    ``length`` is an incomplete response for ``max_output_tokens``,
    ``content_filter`` one for ``content_filter``; anything else completed.
    """
    reason = _INCOMPLETE_REASONS.get(finish_reason or "")
    if reason is None:
        return "completed", None
    return "incomplete", {"reason": reason}


def output_text_part(text: str) -> dict[str, Any]:
    """A message's ``output_text`` content part."""
    return {"type": "output_text", "text": text, "annotations": [], "logprobs": []}


def reasoning_text_part(text: str) -> dict[str, Any]:
    """A reasoning item's ``reasoning_text`` content part (raw reasoning, not a summary)."""
    return {"type": "reasoning_text", "text": text}


def message_item(item_id: str, text: str | None, status: str) -> dict[str, Any]:
    """An assistant ``message`` output item; `text` None while its part is not yet open."""
    content = [] if text is None else [output_text_part(text)]
    return {
        "id": item_id,
        "type": "message",
        "status": status,
        "role": "assistant",
        "content": content,
    }


def reasoning_item(item_id: str, text: str | None, status: str) -> dict[str, Any]:
    """A ``reasoning`` output item carrying the upstream's reasoning text as content.

    The upstream's reasoning is the model's own text, not a summary of it, so
    it is a ``reasoning_text`` part (as DeepSeek's and LM Studio's Responses
    servers send it) and ``summary`` stays empty.
    """
    content = [] if text is None else [reasoning_text_part(text)]
    return {"id": item_id, "type": "reasoning", "status": status, "summary": [], "content": content}


def function_call_item(
    item_id: str, call_id: str, name: str, arguments: str, status: str
) -> dict[str, Any]:
    """A ``function_call`` output item."""
    return {
        "id": item_id,
        "type": "function_call",
        "status": status,
        "arguments": arguments,
        "call_id": call_id,
        "name": name,
    }


def usage_object(
    input_tokens: int | None,
    output_tokens: int | None,
    cached_tokens: int | None = None,
    reasoning_tokens: int | None = None,
) -> dict[str, Any]:
    """The Responses ``usage`` block; a count the upstream did not report is 0.

    ``cache_write_tokens`` is always 0: chat upstreams report no cache writes,
    and the ``openai`` SDK's current types require the field.
    """
    given_in, given_out = input_tokens or 0, output_tokens or 0
    return {
        "input_tokens": given_in,
        "input_tokens_details": {"cached_tokens": cached_tokens or 0, "cache_write_tokens": 0},
        "output_tokens": given_out,
        "output_tokens_details": {"reasoning_tokens": reasoning_tokens or 0},
        "total_tokens": given_in + given_out,
    }


def response_object(
    echo: Echo,
    *,
    response_id: str,
    created_at: int,
    status: str,
    output: list[dict[str, Any]],
    usage: dict[str, Any] | None = None,
    error: dict[str, Any] | None = None,
    incomplete_details: dict[str, Any] | None = None,
    model: str | None = None,
) -> dict[str, Any]:
    """The ``response`` object, in the field order OpenAI sends it.

    `echo` supplies what the request set (defaults as OpenAI reports them);
    ``store`` is always false and ``previous_response_id`` null: the face keeps
    no state.
    """
    return {
        "id": response_id,
        "object": "response",
        "created_at": created_at,
        "status": status,
        "background": False,
        "error": error,
        "incomplete_details": incomplete_details,
        "instructions": echo.get("instructions"),
        "max_output_tokens": echo.get("max_output_tokens"),
        "max_tool_calls": None,
        "model": model or echo.get("model") or "",
        "output": output,
        "parallel_tool_calls": echo.get("parallel_tool_calls", True),
        "previous_response_id": None,
        "reasoning": echo.get("reasoning") or {"effort": None, "summary": None},
        "store": False,
        "temperature": echo.get("temperature", 1.0),
        "text": echo.get("text") or {"format": {"type": "text"}},
        "tool_choice": echo.get("tool_choice", "auto"),
        "tools": list(echo.get("tools") or []),
        "top_p": echo.get("top_p", 1.0),
        "truncation": "disabled",
        "usage": usage,
        "user": None,
        "metadata": dict(echo.get("metadata") or {}),
    }
