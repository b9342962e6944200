"""The objects of OpenAI's Responses API that the proxy's Responses face sends.

Pure builders over plain values, shared by the event stream (`responses.ResponsesStream`)
and the non-streaming body, so a streamed answer's final ``response`` and a
blocking answer are the same object. Shapes follow the recorded OpenAI streams
(``captures/responses``) and the ``openai`` SDK's ``types/responses`` models.
"""

from __future__ import annotations

import base64
import binascii
import uuid
from collections.abc import Mapping
from typing import Any, Final

__all__ = [
    "FAILED_CODE",
    "Echo",
    "carried_reasoning",
    "custom_tool_call_item",
    "function_call_item",
    "message_item",
    "new_id",
    "output_text_part",
    "reasoning_item",
    "reasoning_text_part",
    "response_object",
    "status_for",
    "summary_text_part",
    "uncarried_reasoning",
    "usage_object",
]

FAILED_CODE: Final = "server_error"
"""The ``error.code`` of a failed response: the proxy never passes the upstream's own on."""

Echo = Mapping[str, Any]
"""The request fields a Response object repeats (``model``, ``instructions``, ``tools`` …)."""

_CARRIED: Final = "llmchat.v1:"
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


def summary_text_part(text: str) -> dict[str, Any]:
    """A reasoning item's ``summary_text`` part."""
    return {"type": "summary_text", "text": text}


def reasoning_item(
    item_id: str, text: str | None, status: str, *, summary: bool = False, carry: bool = False
) -> dict[str, Any]:
    """A ``reasoning`` output item carrying the upstream's reasoning text as content.

    The upstream's reasoning is the model's own text, not a summary of it, so
    it is a ``reasoning_text`` part (as DeepSeek's and LM Studio's Responses
    servers send it). With `summary` (the request set ``reasoning.summary``)
    the same text is also the one ``summary_text`` part: clients that read only
    summaries (the Vercel AI SDK) show it. With `carry` (the request included
    ``reasoning.encrypted_content``) it is also ``encrypted_content``, so a
    client that replays only that field gives the text back (`carried_reasoning`).
    """
    content = [] if text is None else [reasoning_text_part(text)]
    parts = [summary_text_part(text)] if summary and text is not None else []
    item: dict[str, Any] = {
        "id": item_id,
        "type": "reasoning",
        "status": status,
        "summary": parts,
        "content": content,
    }
    if carry and text:
        item["encrypted_content"] = carried_reasoning(text)
    return item


def carried_reasoning(text: str) -> str:
    """The ``encrypted_content`` the proxy sends for reasoning `text`.

    Not encrypted: the client already has the text in the item's content.
    It only lets the text come back from clients that replay a reasoning item
    by this field alone (Codex on ``store: false``; what OpenAI's own is for).
    """
    return _CARRIED + base64.b64encode(text.encode("utf-8")).decode("ascii")


def uncarried_reasoning(value: Any) -> str | None:
    """The reasoning text in an ``encrypted_content`` the proxy sent, or None for any other."""
    if not isinstance(value, str) or not value.startswith(_CARRIED):
        return None
    try:
        return base64.b64decode(value[len(_CARRIED) :], validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return None


def function_call_item(
    item_id: str,
    call_id: str,
    name: str,
    arguments: str,
    status: str,
    namespace: str | None = None,
) -> dict[str, Any]:
    """A ``function_call`` output item; `namespace` for a tool of a ``namespace`` tool."""
    head = {"id": item_id, "type": "function_call", "status": status, "arguments": arguments}
    return _call(head, call_id, name, namespace)


def custom_tool_call_item(
    item_id: str, call_id: str, name: str, text: str, status: str, namespace: str | None = None
) -> dict[str, Any]:
    """A ``custom_tool_call`` output item: a freeform tool's raw `text` as its ``input``."""
    head = {"id": item_id, "type": "custom_tool_call", "status": status, "input": text}
    return _call(head, call_id, name, namespace)


def _call(head: dict[str, Any], call_id: str, name: str, namespace: str | None) -> dict[str, Any]:
    item = {**head, "call_id": call_id, "name": name}
    if namespace:
        item["namespace"] = namespace
    return item


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
