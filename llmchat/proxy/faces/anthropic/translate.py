"""Anthropic's face of the proxy: pure translation between Anthropic and OpenAI bodies.

`messages_request` turns a decoded ``POST /v1/messages`` body into an OpenAI
chat-completions body; `message_body` and `error_body` build what an
Anthropic client reads back. No I/O, no clock, no randomness; DEBUG lines only.

**The liberal rule.** The face never refuses a whole turn over something a
chat upstream can do without. Claude Code changes its requests every few
weeks (new betas, fields, block and tool types); whatever the face does not
know is folded into what a chat upstream understands, or dropped with one
DEBUG line in the ``llmchat.proxy`` log naming its field path
(``messages[3].content[1] (redacted_thinking) dropped``), never a 400. Nothing
is forwarded as sent: the upstream speaks OpenAI chat (the CLI's always does;
a library upstream of Anthropic's dialect is still reached through that
translation, and Anthropic's servers refuse a beta field without its beta
header, which `Settings` cannot carry per request). A 400 is kept for a
request that cannot be served at all: a malformed body (a field of the
wrong JSON type, no messages, ``max_tokens`` below 1), a ``tool_use`` in a
user turn, an image or document the upstream cannot take. Those 400s use
the field path as the client wrote it, in Anthropic's wording where Claude
Code matches on it (``Unexpected role``/``input message role``;
``messages.N.content.M.image`` and ``.document``; ``prompt is too long``).

Decisions worth knowing:

- ``system`` (a string or a list of blocks, text joined with ``"\\n"``)
  becomes one system message, first; an empty one sends nothing. A
  ``system`` message inside ``messages`` (Claude Code's mid-conversation
  system turn) stays in place as user text behind ``[System message]``,
  `normalize_messages`' own fold, so no template sees two system turns;
  consecutive user turns then become one, as Anthropic's API treats them.
- A user turn's ``tool_result`` blocks become ``tool`` messages, in block
  order, before a user message holding the turn's other blocks (if any),
  the results' images included (an OpenAI tool message carries text only).
  A result's text is its string content or its text blocks joined with
  ``"\\n"``; ``is_error: true`` prefixes it with ``"Error: "`` because an
  OpenAI tool message has no error flag and the model must still learn that
  the call failed.
- User content is a plain string when the turn is one text block, a list of
  parts otherwise. Assistant text blocks are concatenated into one string;
  ``tool_use`` blocks become its ``tool_calls`` with arguments as compact,
  key-sorted JSON.
- ``thinking`` blocks in assistant history become the turn's
  ``reasoning_content`` (llama-server renders it back; a model that thinks
  between tool calls needs it). ``redacted_thinking`` is dropped. An
  assistant turn with nothing but thinking is dropped, rather than sent as
  an empty prefill.
- Other blocks (``document``, ``search_result``, ``compaction``, server-tool
  calls and their ``*_tool_result``s, ...) are folded into text or dropped
  (`blocks`).
- ``thinking: {"type": "enabled", "budget_tokens": N}`` becomes
  ``reasoning_effort``: ``"low"`` below 4096 tokens, ``"medium"`` below
  16384, ``"high"`` from there on, the one budget knob OpenAI-compatible
  servers share. ``disabled`` and ``adaptive`` (with any ``display``) send
  nothing (server default); an unknown type is dropped.
- ``output_config.effort`` also becomes ``reasoning_effort`` (``xhigh`` and
  ``max`` as ``"high"``), and wins over ``thinking``; ``output_config.format``
  (a JSON schema) becomes an OpenAI ``json_schema`` ``response_format``.
- ``tool_choice`` maps ``auto``/``any``/``tool``/``none`` to ``"auto"``,
  ``"required"``, a named function and ``"none"``;
  ``disable_parallel_tool_use: true`` adds ``parallel_tool_calls: false``.
  A choice of a dropped server tool, or ``any`` when only server tools
  were given, is dropped.
- Tools with a ``type`` other than ``custom`` (server tools such as
  ``web_search_*`` and ``code_execution_*``, Anthropic-schema tools such as
  ``bash_*``) are dropped: the upstream cannot run them and the model cannot
  call a tool it was given no schema for. ``defer_loading`` tools go as any other.
- ``metadata``, ``context_management``, ``service_tier``, ``cache_control``
  and every other field with no OpenAI meaning are dropped (one DEBUG line each).
- ``max_tokens`` must be at least 1: an OpenAI upstream has no use for
  Anthropic's ``0`` (cache pre-warming).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, Final

from ....errors import InvalidArgumentError
from ....protocols.anthropic import anthropic_usage, thinking_signature
from ....tools import ToolCall
from ...error_shapes import anthropic_error_body as error_body
from ...field_checks import (
    integer,
    number,
    optional_list,
    require_bool,
    require_mapping,
    require_str,
)
from .blocks import dropped
from .history import chat_turns, history_messages, required, system_text

__all__ = ["error_body", "message_body", "messages_request"]

log = logging.getLogger("llmchat.proxy")

_EFFORT_LOW_BELOW: Final = 4096
_EFFORT_MEDIUM_BELOW: Final = 16384
_EFFORTS: Final = {"low": "low", "medium": "medium", "high": "high", "xhigh": "high", "max": "high"}
_READ_FIELDS: Final = frozenset(
    {
        "model",
        "max_tokens",
        "stream",
        "system",
        "messages",
        "temperature",
        "top_p",
        "top_k",
        "stop_sequences",
        "tools",
        "tool_choice",
        "thinking",
        "output_config",
    }
)


# -- request --------------------------------------------------------------


def messages_request(body: Mapping[str, Any]) -> dict[str, Any]:
    """Translate an Anthropic ``/v1/messages`` request body into an OpenAI chat body.

    The result holds ``model``, ``messages``, ``max_tokens`` and ``stream``
    (default false), plus only the fields the request gave.
    """
    require_mapping(body, "body")
    model = required(body, "model")
    require_str(model, "model")
    if not model:
        raise InvalidArgumentError("model: must not be empty")
    max_tokens = integer(required(body, "max_tokens"), "max_tokens")
    if max_tokens < 1:
        raise InvalidArgumentError(f"max_tokens: must be at least 1, not {max_tokens}")
    stream = body.get("stream")
    if stream is None:
        stream = False
    require_bool(stream, "stream")

    messages = _system(body.get("system"))
    messages.extend(history_messages(required(body, "messages")))
    messages = chat_turns(messages)
    for name in body:
        if name not in _READ_FIELDS and body[name] is not None:
            log.debug("%s dropped", name)
    out: dict[str, Any] = {
        "model": model,
        "messages": messages,
        "max_tokens": max_tokens,
        "stream": stream,
    }
    for name in ("temperature", "top_p"):
        if body.get(name) is not None:
            out[name] = number(body[name], name)
    if body.get("top_k") is not None:
        out["top_k"] = integer(body["top_k"], "top_k")
    stop = _stop_sequences(body.get("stop_sequences"))
    if stop:
        out["stop"] = stop
    tools = _tools(body.get("tools"))
    if tools:
        out["tools"] = tools
    _tool_choice(body.get("tool_choice"), out, _server_tool_names(body.get("tools")))
    effort = _thinking(body.get("thinking"))
    output_effort = _output_config(body.get("output_config"), out)
    effort = output_effort or effort
    if effort is not None:
        out["reasoning_effort"] = effort
    return out


# -- responses ------------------------------------------------------------


def message_body(
    *,
    model: str,
    message_id: str,
    text: str,
    thinking: str | None,
    tool_calls: list[ToolCall],
    stop_reason: str,
    input_tokens: int | None,
    output_tokens: int | None,
    cached_tokens: int | None = None,
) -> dict[str, Any]:
    """The non-streaming Anthropic ``Message``.

    Content is a thinking block (when there was thinking; its ``signature``
    is `thinking_signature`'s, since the proxy cannot sign), a text block (when there was text)
    and one ``tool_use`` block per call, in that order. `stop_reason` is
    already Anthropic's word for it; token counts default to 0, and the
    upstream's `cached_tokens` are ``cache_read_input_tokens`` (`anthropic_usage`).
    """
    content: list[dict[str, Any]] = []
    if thinking:
        content.append(
            {"type": "thinking", "thinking": thinking, "signature": thinking_signature(thinking)}
        )
    if text:
        content.append({"type": "text", "text": text})
    content.extend(call.to_anthropic_block() for call in tool_calls)
    return {
        "id": message_id,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": anthropic_usage(input_tokens or 0, cached_tokens, output_tokens),
    }


# -- request pieces -------------------------------------------------------


def _system(value: Any) -> list[dict[str, Any]]:
    text = "" if value is None else system_text(value, "system")
    return [{"role": "system", "content": text}] if text else []


def _stop_sequences(value: Any) -> list[str]:
    value = optional_list(value, "stop_sequences", "a list of strings")
    for index, item in enumerate(value):
        require_str(item, f"stop_sequences[{index}]")
    return list(value)


def _tools(value: Any) -> list[dict[str, Any]]:
    out = []
    for index, tool in enumerate(optional_list(value, "tools")):
        where = f"tools[{index}]"
        require_mapping(tool, where)
        kind = tool.get("type")
        if kind is not None and kind != "custom":
            dropped(where, str(kind))
            continue
        name = required(tool, "name", where)
        require_str(name, f"{where}.name")
        if not name:
            raise InvalidArgumentError(f"{where}.name: must not be empty")
        schema = required(tool, "input_schema", where)
        require_mapping(schema, f"{where}.input_schema")
        function: dict[str, Any] = {"name": name}
        description = tool.get("description")
        if description is not None:
            require_str(description, f"{where}.description")
            function["description"] = description
        function["parameters"] = dict(schema)
        out.append({"type": "function", "function": function})
    return out


def _server_tool_names(tools: Any) -> set[str]:
    """Names of the tools `_tools` dropped (any ``type`` but ``custom``)."""
    return {
        str(tool.get("name"))
        for tool in tools or ()
        if isinstance(tool, Mapping) and tool.get("type") not in (None, "custom")
    }


def _tool_choice(value: Any, out: dict[str, Any], server_tools: set[str]) -> None:
    if value is None:
        return
    require_mapping(value, "tool_choice")
    kind = required(value, "type", "tool_choice")
    if kind == "auto":
        out["tool_choice"] = "auto"
    elif kind == "any":
        if server_tools and not out.get("tools"):
            dropped("tool_choice", "any, with only server tools")
            return
        out["tool_choice"] = "required"
    elif kind == "none":
        out["tool_choice"] = "none"
    elif kind == "tool":
        name = required(value, "name", "tool_choice")
        require_str(name, "tool_choice.name")
        if not name:
            raise InvalidArgumentError("tool_choice.name: must not be empty")
        if name in server_tools:
            # Dropped from the tools: the upstream would refuse a choice of it.
            dropped("tool_choice", f"{name}, a server tool")
            return
        out["tool_choice"] = {"type": "function", "function": {"name": name}}
    else:
        dropped("tool_choice", str(kind))
        return
    disable = value.get("disable_parallel_tool_use")
    if disable is not None:
        require_bool(disable, "tool_choice.disable_parallel_tool_use")
        if disable:
            out["parallel_tool_calls"] = False


def _thinking(value: Any) -> str | None:
    if value is None:
        return None
    require_mapping(value, "thinking")
    kind = required(value, "type", "thinking")
    if kind in ("disabled", "adaptive"):
        return None
    if kind != "enabled":
        dropped("thinking", str(kind))
        return None
    budget = integer(required(value, "budget_tokens", "thinking"), "thinking.budget_tokens")
    if budget < 1:
        raise InvalidArgumentError(f"thinking.budget_tokens: must be at least 1, not {budget}")
    if budget < _EFFORT_LOW_BELOW:
        return "low"
    if budget < _EFFORT_MEDIUM_BELOW:
        return "medium"
    return "high"


def _output_config(value: Any, out: dict[str, Any]) -> str | None:
    """Add ``output_config.format`` to `out`; return the effort it asks for, if any."""
    if value is None:
        return None
    require_mapping(value, "output_config")
    response_format = value.get("format")
    if response_format is not None:
        require_mapping(response_format, "output_config.format")
        kind = response_format.get("type")
        if kind == "json_schema":
            schema = required(response_format, "schema", "output_config.format")
            require_mapping(schema, "output_config.format.schema")
            out["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": "response", "schema": dict(schema)},
            }
        else:
            dropped("output_config.format", str(kind))
    effort = value.get("effort")
    if effort is None:
        return None
    if not isinstance(effort, str) or effort not in _EFFORTS:
        dropped("output_config.effort", str(effort))
        return None
    return _EFFORTS[effort]
