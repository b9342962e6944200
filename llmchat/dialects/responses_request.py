"""The OpenAI Responses request body, built from OpenAI-shaped messages, settings and tools.

Pure, no I/O (ARCHITECTURE: dialects). `responses_body` is the one entry: the
conversation becomes ``instructions`` and ``input`` items, the chat-named
settings their Responses spellings, the tools flat function tools. Bad input
raises `ValueError`/`TypeError` naming the field, before anything is sent.

Decisions where the API leaves room (notes/responses.md):

- the first message, when it is ``system``/``developer`` text, is ``instructions``;
  every later one stays an input message in its own role and place;
- ``store: false`` unless the caller set ``store``: llmchat sends the whole
  conversation every time and never ``previous_response_id``;
- reasoning items of this dialect go back before the turn's message and calls,
  without their ``id``/``status`` (with ``store: false`` an id refers to nothing);
  ``include: ["reasoning.encrypted_content"]`` is asked only when a reasoning
  effort is (non-reasoning models refuse that include);
- a tool without ``strict`` is sent ``strict: false``, the chat API's default
  (the Responses API would default to strict and refuse ordinary schemas).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Final

from ..errors import InvalidArgumentError, InvalidTypeError
from ..messages import Message
from .responses_items import DIALECT

__all__ = ["responses_body", "responses_input", "responses_tool", "responses_tool_choice"]

_INPUT_ROLES: Final = frozenset({"user", "system", "developer"})
_RESPONSES_PARTS: Final = frozenset({"input_text", "input_image", "input_file"})
_CHOICE_WORDS: Final = frozenset({"auto", "none", "required"})
_ENCRYPTED: Final = "reasoning.encrypted_content"
_LOGPROBS: Final = "message.output_text.logprobs"
_TRANSLATED: Final = frozenset({"max_tokens", "response_format", "reasoning_effort", "logprobs"})


def responses_body(
    messages: Sequence[Message],
    settings: Mapping[str, Any],
    tools: Sequence[Mapping[str, Any]] | None = None,
    tool_choice: str | Mapping[str, Any] | None = None,
    *,
    model: str | None = None,
    stream: bool = False,
) -> dict[str, Any]:
    """The ``POST /responses`` body, as a new dict; `settings` in chat names.

    `settings` is what `_get_api_settings` returns: ``max_tokens`` becomes
    ``max_output_tokens``, a ``response_format`` ``text.format``,
    ``reasoning_effort`` ``reasoning.effort``, ``logprobs`` an ``include``;
    every other member (``temperature``, ``top_p``, ``extra_body`` keys) goes as it is.
    """
    instructions, items = responses_input(messages)
    body: dict[str, Any] = {}
    if model is not None:
        body["model"] = model
    body.update(_settings(settings))
    if instructions is not None:
        body["instructions"] = instructions
    body["input"] = items
    if tools is not None:
        body["tools"] = [responses_tool(tool, index) for index, tool in enumerate(tools)]
    if tool_choice is not None:
        body["tool_choice"] = responses_tool_choice(tool_choice)
    body.setdefault("store", False)
    if _wants_encrypted_reasoning(body):
        body["include"] = _with_include(body.get("include"), _ENCRYPTED)
    if stream:
        body["stream"] = True
    return body


# -- settings ----------------------------------------------------------------------------


def _settings(settings: Mapping[str, Any]) -> dict[str, Any]:
    """The settings in Responses names; members given under their Responses names win."""
    out = {name: value for name, value in settings.items() if name not in _TRANSLATED}
    if "max_tokens" in settings:
        out.setdefault("max_output_tokens", settings["max_tokens"])
    if "response_format" in settings:
        out["text"] = {
            "format": _text_format(settings["response_format"]),
            **_mapping(out.get("text")),
        }
    if settings.get("reasoning_effort") is not None:
        out["reasoning"] = {
            "effort": settings["reasoning_effort"],
            **_mapping(out.get("reasoning")),
        }
    if settings.get("logprobs"):
        out["include"] = _with_include(out.get("include"), _LOGPROBS)
    return out


def _mapping(value: Any) -> dict[str, Any]:
    return dict(value) if isinstance(value, Mapping) else {}


def _text_format(response_format: Any) -> dict[str, Any]:
    """A chat ``response_format`` as a Responses ``text.format``."""
    if not isinstance(response_format, Mapping):
        raise InvalidTypeError("settings response_format must be a mapping")
    kind = response_format.get("type")
    if kind != "json_schema":
        return dict(response_format)  # {"type": "json_object"} / {"type": "text"}
    spec = _mapping(response_format.get("json_schema"))
    out: dict[str, Any] = {"type": "json_schema", "name": spec.get("name") or "response"}
    if "description" in spec:
        out["description"] = spec["description"]
    out["schema"] = spec.get("schema", {})
    out["strict"] = bool(spec.get("strict", False))
    return out


def _wants_encrypted_reasoning(body: Mapping[str, Any]) -> bool:
    reasoning = body.get("reasoning")
    effort = reasoning.get("effort") if isinstance(reasoning, Mapping) else None
    return body.get("store") is False and effort not in (None, "none")


def _with_include(given: Any, entry: str) -> list[Any]:
    include = list(given) if isinstance(given, (list, tuple)) else []
    return include if entry in include else [*include, entry]


# -- messages ----------------------------------------------------------------------------


def responses_input(messages: Sequence[Message]) -> tuple[str | None, list[dict[str, Any]]]:
    """`(instructions, input items)` for a normalized conversation."""
    instructions: str | None = None
    items: list[dict[str, Any]] = []
    for index, message in enumerate(messages):
        if not isinstance(message, Message):
            raise InvalidTypeError(f"messages[{index}] must be a Message")
        if index == 0 and message.role in ("system", "developer"):
            instructions = _instruction_text(message)
            if instructions is not None:
                continue
        items += _items(message, f"messages[{index}]")
    return instructions, items


def _instruction_text(message: Message) -> str | None:
    content = message.content
    if isinstance(content, str):
        return content
    if isinstance(content, list) and all(
        isinstance(p, Mapping) and p.get("type") in ("text", "input_text") for p in content
    ):
        return "".join(str(p.get("text") or "") for p in content)
    return None  # images in a system message: sent as an input item instead


def _items(message: Message, where: str) -> list[dict[str, Any]]:
    role = message.role
    if role in _INPUT_ROLES:
        return [_message_item(role, _input_parts(message.content, where, "input_text"))]
    if role == "assistant":
        return _assistant_items(message, where)
    if role == "tool":
        if not message.tool_call_id:
            raise InvalidArgumentError(f"{where}.tool_call_id is missing; a tool result needs it")
        return [
            {
                "type": "function_call_output",
                "call_id": message.tool_call_id,
                "output": _tool_output(message.content, where),
            }
        ]
    raise InvalidArgumentError(
        f"{where}.role {role!r} has no Responses form; send tool results as role 'tool'"
    )


def _message_item(role: str, content: list[dict[str, Any]]) -> dict[str, Any]:
    return {"type": "message", "role": role, "content": content}


def _assistant_items(message: Message, where: str) -> list[dict[str, Any]]:
    items = [
        _reasoning_input(part["item"])
        for part in message.reasoning_parts or ()
        if part.get("dialect") == DIALECT and isinstance(part.get("item"), Mapping)
    ]
    content = _input_parts(message.content, where, "output_text")
    if content:
        items.append(_message_item("assistant", content))
    for index, call in enumerate(message.tool_calls or ()):
        items.append(_function_call(call, f"{where}.tool_calls[{index}]"))
    return items


def _reasoning_input(item: Mapping[str, Any]) -> dict[str, Any]:
    """A kept reasoning item as an input item: as received, without ``id`` and ``status``."""
    out = {k: v for k, v in item.items() if k not in ("id", "status")}
    out["type"] = "reasoning"
    out.setdefault("summary", [])
    return out


def _function_call(call: Any, where: str) -> dict[str, Any]:
    if not isinstance(call, Mapping):
        raise InvalidTypeError(f"{where} must be a mapping, got {type(call).__name__}")
    function = call.get("function")
    if not isinstance(function, Mapping) or not isinstance(function.get("name"), str):
        raise InvalidArgumentError(f"{where}.function.name is missing")
    if not isinstance(call.get("id"), str) or not call["id"]:
        raise InvalidArgumentError(f"{where}.id is missing; the tool result refers to it")
    arguments = function.get("arguments")
    if arguments is None:
        arguments = "{}"
    elif not isinstance(arguments, str):
        arguments = _json(arguments)
    return {
        "type": "function_call",
        "call_id": call["id"],
        "name": function["name"],
        "arguments": arguments,
    }


def _input_parts(content: Any, where: str, text_type: str) -> list[dict[str, Any]]:
    """Message content as Responses content parts (`text_type` for the text parts)."""
    if content is None:
        return []
    if isinstance(content, str):
        return (
            [{"type": text_type, "text": content}] if content or text_type != "output_text" else []
        )
    out: list[dict[str, Any]] = []
    for index, part in enumerate(content):
        out.append(_part(part, f"{where}.content[{index}]", text_type))
    return out


def _part(part: Any, where: str, text_type: str) -> dict[str, Any]:
    if not isinstance(part, Mapping):
        raise InvalidTypeError(f"{where} must be a mapping, got {type(part).__name__}")
    kind = part.get("type")
    if kind in ("text", "input_text", "output_text"):
        if not isinstance(part.get("text"), str):
            raise InvalidTypeError(f"{where}.text must be a str")
        return {"type": text_type, "text": part["text"]}
    if text_type == "output_text":
        if kind == "refusal":
            return dict(part)
        raise InvalidArgumentError(f"{where}.type {kind!r} cannot be in an assistant message")
    if kind == "image_url":
        return _image(part.get("image_url"), where)
    if kind == "file" and isinstance(part.get("file"), Mapping):
        return {"type": "input_file", **dict(part["file"])}
    if kind in _RESPONSES_PARTS:
        return dict(part)
    raise InvalidArgumentError(f"{where}.type {kind!r} has no Responses form")


def _image(value: Any, where: str) -> dict[str, Any]:
    spec = value if isinstance(value, Mapping) else {"url": value}
    url = spec.get("url")
    if not isinstance(url, str) or not url:
        raise InvalidArgumentError(f"{where}.image_url.url is missing")
    return {"type": "input_image", "image_url": url, "detail": spec.get("detail") or "auto"}


def _tool_output(content: Any, where: str) -> str | list[dict[str, Any]]:
    if content is None or isinstance(content, str):
        return content or ""
    parts = _input_parts(content, where, "input_text")
    if all(p["type"] == "input_text" for p in parts):
        return "".join(p["text"] for p in parts)
    return parts


# -- tools -------------------------------------------------------------------------------


def responses_tool(tool: Any, index: int) -> dict[str, Any]:
    """One chat-shaped tool as a flat Responses function tool; other shapes as given."""
    where = f"tools[{index}]"
    if not isinstance(tool, Mapping):
        raise InvalidTypeError(f"{where} must be a mapping, got {type(tool).__name__}")
    function = tool.get("function")
    if tool.get("type") != "function" or "function" not in tool:
        return dict(tool)  # already flat, or a hosted tool (web_search, mcp …)
    if not isinstance(function, Mapping) or not isinstance(function.get("name"), str):
        raise InvalidArgumentError(f"{where}.function.name is missing")
    out: dict[str, Any] = {"type": "function", "name": function["name"]}
    if function.get("description") is not None:
        out["description"] = function["description"]
    parameters = function.get("parameters")
    out["parameters"] = {"type": "object", "properties": {}} if parameters is None else parameters
    out["strict"] = bool(function.get("strict", False))
    return out


def responses_tool_choice(tool_choice: Any) -> str | dict[str, Any]:
    """A chat ``tool_choice`` in the Responses shape; a Responses-shaped one as given."""
    if isinstance(tool_choice, str):
        if tool_choice not in _CHOICE_WORDS:
            raise InvalidArgumentError(
                f"tool_choice {tool_choice!r} is not one of auto, none, required"
            )
        return tool_choice
    if not isinstance(tool_choice, Mapping):
        raise InvalidTypeError("tool_choice must be a str, a mapping or None")
    function = tool_choice.get("function")
    if tool_choice.get("type") == "function" and isinstance(function, Mapping):
        if not isinstance(function.get("name"), str):
            raise InvalidArgumentError("tool_choice.function.name is missing")
        return {"type": "function", "name": function["name"]}
    if not isinstance(tool_choice.get("type"), str):
        raise InvalidArgumentError("tool_choice.type is missing")
    return dict(tool_choice)


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
