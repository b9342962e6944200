"""Reading the fields of a decoded OpenAI stream chunk, the same way for every translator."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .. import wire_json

__all__ = [
    "int_or_none",
    "reasoning_text",
    "tool_call_list",
    "tool_fragment",
    "upstream_error_message",
]


def int_or_none(value: Any) -> int | None:
    """A token count as an int; None for anything that is not a whole number."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None


def reasoning_text(delta: Mapping[str, Any]) -> str:
    """The reasoning a delta adds; ``""`` when none."""
    # Servers differ on the key (vLLM/DeepSeek: reasoning_content, OpenRouter and
    # llama.cpp variants: reasoning); a few send both with one of them null.
    for key in ("reasoning_content", "reasoning"):
        value = delta.get(key)
        if isinstance(value, str) and value:
            return value
    return ""


def upstream_error_message(error: Any) -> str:
    """What a client is told about an in-band upstream ``error`` object."""
    message = error.get("message") if isinstance(error, Mapping) else error
    if isinstance(message, str) and message:
        return f"Upstream error: {message}"
    return "Upstream error"


def tool_call_list(delta: Mapping[str, Any]) -> list[Any] | None:
    """The delta's ``tool_calls`` fragments, None when it has none.

    Raises `TypeError` when they are not a list: the translator then rejects the chunk.
    """
    tool_calls = delta.get("tool_calls")
    if tool_calls is not None and not isinstance(tool_calls, list):
        raise TypeError("tool_calls is not a list")
    return tool_calls


def tool_fragment(fragment: Mapping[str, Any]) -> tuple[str, str, str]:
    """``(id, name, arguments text)`` of one OpenAI tool-call fragment; ``""`` for each absent.

    Arguments sent as a whole object (a few servers do) come back as compact JSON text.
    """
    call_id = fragment.get("id")
    function = fragment.get("function")
    function = function if isinstance(function, Mapping) else {}
    name = function.get("name")
    arguments = function.get("arguments")
    if isinstance(arguments, Mapping):
        arguments = wire_json.encode_data(arguments).decode("utf-8") if arguments else ""
    return (
        call_id if isinstance(call_id, str) else "",
        name if isinstance(name, str) else "",
        arguments if isinstance(arguments, str) else "",
    )
