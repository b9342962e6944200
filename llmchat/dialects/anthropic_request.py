"""The Anthropic Messages request body, built from OpenAI-shaped input.

Pure, no I/O (ARCHITECTURE: dialects). `messages_body` takes normalized
`Message`s (OpenAI-shaped history), the OpenAI-named settings a backend's
`_get_api_settings` returns, OpenAI-shaped tools and tool choice, and returns
the ``POST /v1/messages`` body. Anthropic's own shapes (a tool with
``input_schema``, a ``tool_choice`` of type ``any``/``tool``, native content
blocks) are accepted as given. Bad input raises `ValueError`/`TypeError`
naming the field, before anything is sent.

The history's translation (Anthropic: "Messages", "Tool use"):

- system and developer messages, wherever they are, become the top-level
  ``system`` (a string, or text blocks when any of them had a parts list);
- text and image parts become blocks (a ``data:`` URL a base64 source, an
  ``http(s)`` URL a url source);
- an assistant turn is its ``anthropic`` reasoning parts first (thinking
  blocks with their signatures, redacted thinking), then its text, then a
  ``tool_use`` block per call (``input`` is the parsed arguments object);
  an OpenAI-shaped ``reasoning_content`` is not sent (it has no signature);
- tool results become ``tool_result`` blocks of one user message per run of
  consecutive results; a tool message's extra keys (``is_error``,
  ``cache_control``) go on its block.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any, Final

from ..errors import InvalidArgumentError, InvalidTypeError
from ..messages import Message
from ..tools import tool_definitions
from .anthropic_content import (
    assistant_content,
    content_blocks,
    copy_dict,
    copy_json,
    system_blocks,
    tool_result,
)

log = logging.getLogger("llmchat")

__all__ = ["DEFAULT_MAX_TOKENS", "EFFORT_BUDGETS", "messages_body", "thinking_config"]

DEFAULT_MAX_TOKENS: Final = 4096
"""``max_tokens`` when the settings have none (Anthropic requires it); a thinking
budget is added on top, so the answer keeps this much room."""

EFFORT_BUDGETS: Final[Mapping[str, int]] = {
    "minimal": 1024,
    "low": 2048,
    "medium": 8192,
    "high": 16384,
    "xhigh": 32768,
    "max": 32768,
}
"""``reasoning_effort`` levels as thinking budgets (``"none"``: no thinking);
1024 is Anthropic's smallest budget."""

_TRANSLATED: Final = frozenset(
    {
        "model",
        "max_tokens",
        "temperature",
        "top_p",
        "top_k",
        "stop",
        "response_format",
        "reasoning_effort",
        "reasoning_budget_tokens",
        "parallel_tool_calls",
    }
)
_NAMED_CHOICES: Final[Mapping[str, str]] = {"auto": "auto", "none": "none", "required": "any"}
_OWN_CHOICES: Final = frozenset({"auto", "any", "tool", "none"})


def messages_body(
    messages: Sequence[Message],
    settings: Mapping[str, Any],
    tools: Sequence[Mapping[str, Any]] | None = None,
    tool_choice: str | Mapping[str, Any] | None = None,
    *,
    model: str | None = None,
    stream: bool = False,
    default_max_tokens: int = DEFAULT_MAX_TOKENS,
) -> dict[str, Any]:
    """The ``/v1/messages`` body, as a new dict sharing nothing with the input.

    `settings` are OpenAI-named body members (`Settings.to_body`); the ones
    Anthropic spells differently are translated (``stop`` → ``stop_sequences``,
    ``response_format`` → ``output_format``, the reasoning settings →
    ``thinking``, ``parallel_tool_calls: false`` → ``disable_parallel_tool_use``);
    every other member (``extra_body``'s) goes out as it is, last, so it wins.
    """
    thinking = thinking_config(settings)
    body: dict[str, Any] = {}
    chosen_model = settings.get("model", model)
    if chosen_model is not None:
        body["model"] = chosen_model
    body["max_tokens"] = _max_tokens(settings, thinking, default_max_tokens)
    system, wire_messages = _history(messages)
    if system is not None:
        body["system"] = system
    body["messages"] = wire_messages
    if thinking is not None:
        body["thinking"] = thinking
    for name in ("temperature", "top_p", "top_k"):
        if name in settings:
            body[name] = settings[name]
    if "stop" in settings:
        body["stop_sequences"] = _stop_sequences(settings["stop"])
    if "response_format" in settings:
        body["output_format"] = _output_format(settings["response_format"])
    if tools is not None:
        body["tools"] = anthropic_tools(tools)
    choice = _tool_choice(tool_choice, settings.get("parallel_tool_calls"), tools)
    if choice is not None:
        body["tool_choice"] = choice
    if stream:
        body["stream"] = True
    for name, value in settings.items():
        if name not in _TRANSLATED:
            body[name] = value
    if _unsigned_tool_turn(body):
        # With thinking on, Anthropic refuses (400, "a final `assistant` message must
        # start with a thinking block") a tool loop whose last assistant turn has no
        # signed thinking, which a history from another model or a translating face
        # never has: this request goes without thinking rather than fail.
        log.debug("thinking left out: the last assistant tool turn carries no signed thinking")
        del body["thinking"]
    return body


def _unsigned_tool_turn(body: Mapping[str, Any]) -> bool:
    """Thinking is on and the last assistant turn calls a tool without leading thinking."""
    thinking = body.get("thinking")
    if not isinstance(thinking, Mapping) or thinking.get("type") == "disabled":
        return False
    turns = [m for m in body.get("messages") or () if isinstance(m, Mapping)]
    last = next((m for m in reversed(turns) if m.get("role") == "assistant"), None)
    content = last.get("content") if last is not None else None
    if not isinstance(content, list) or not content:
        return False
    kinds = [block.get("type") for block in content if isinstance(block, Mapping)]
    return "tool_use" in kinds and kinds[0] not in ("thinking", "redacted_thinking")


# -- settings -------------------------------------------------------------------------


def thinking_config(settings: Mapping[str, Any]) -> dict[str, Any] | None:
    """The ``thinking`` member the reasoning settings ask for; None: send none.

    ``reasoning_budget_tokens`` N > 0 enables thinking with that budget (0: no
    thinking; -1, llama.cpp's "unlimited", has no Anthropic meaning and
    raises); else ``reasoning_effort`` is a level of `EFFORT_BUDGETS`
    (``"none"``: no thinking). The budget wins when both are set.
    """
    budget = settings.get("reasoning_budget_tokens")
    if budget is not None:
        if not isinstance(budget, int) or isinstance(budget, bool) or budget < 0:
            raise InvalidArgumentError(
                f"reasoning_budget_tokens must be an int >= 0 for Anthropic (a thinking "
                f"budget; 0: no thinking), got {budget!r}"
            )
        return {"type": "enabled", "budget_tokens": budget} if budget else None
    effort = settings.get("reasoning_effort")
    if effort is None or effort == "none":
        return None
    if effort not in EFFORT_BUDGETS:
        levels = ", ".join(["none", *EFFORT_BUDGETS])
        raise InvalidArgumentError(
            f"reasoning_effort {effort!r} has no Anthropic thinking budget; use one of {levels}, "
            "or reasoning_budget_tokens"
        )
    return {"type": "enabled", "budget_tokens": EFFORT_BUDGETS[effort]}


def _max_tokens(
    settings: Mapping[str, Any], thinking: Mapping[str, Any] | None, default: int
) -> Any:
    if "max_tokens" in settings:
        return settings["max_tokens"]
    return default + (int(thinking["budget_tokens"]) if thinking is not None else 0)


def _stop_sequences(stop: Any) -> list[str]:
    if isinstance(stop, str):
        return [stop]
    if isinstance(stop, (list, tuple)) and all(isinstance(s, str) for s in stop):
        return list(stop)
    raise InvalidTypeError(f"stop must be a str or a list of str, got {type(stop).__name__}")


def _output_format(response_format: Any) -> dict[str, Any]:
    """OpenAI's ``response_format`` json_schema as Anthropic's structured-outputs member."""
    wrapper = response_format.get("json_schema") if isinstance(response_format, Mapping) else None
    if (
        not isinstance(response_format, Mapping)
        or response_format.get("type") != "json_schema"
        or not isinstance(wrapper, Mapping)
        or not isinstance(wrapper.get("schema"), Mapping)
    ):
        raise InvalidArgumentError(
            "response_format has no Anthropic equivalent except a json_schema one "
            "(Settings.json_schema); send output_format through extra_body instead"
        )
    return {"type": "json_schema", "schema": copy_json(wrapper["schema"])}


# -- tools ----------------------------------------------------------------------------


def anthropic_tools(tools: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """OpenAI function tools as Anthropic tools (``name``, ``description``, ``input_schema``).

    A tool already in Anthropic's shape (a ``name`` and no ``function``: a
    custom tool with ``input_schema``, or a server tool with its own ``type``)
    is taken as given.
    """
    return [_tool(tool, f"tools[{index}]") for index, tool in enumerate(tool_definitions(tools))]


def _tool(tool: Any, where: str) -> dict[str, Any]:
    if not isinstance(tool, Mapping):
        raise InvalidTypeError(f"{where} must be a mapping, got {type(tool).__name__}")
    function = tool.get("function")
    if function is None and isinstance(tool.get("name"), str) and tool["name"]:
        return copy_dict(tool)
    if tool.get("type", "function") != "function" or not isinstance(function, Mapping):
        raise InvalidArgumentError(
            f"{where} must be an OpenAI function tool ({{'type': 'function', 'function': "
            "{...}}) or an Anthropic tool with a name"
        )
    name = function.get("name")
    if not isinstance(name, str) or not name:
        raise InvalidArgumentError(f"{where}.function.name must be a non-empty str")
    out: dict[str, Any] = {"name": name}
    description = function.get("description")
    if description is not None:
        if not isinstance(description, str):
            raise InvalidTypeError(f"{where}.function.description must be a str")
        out["description"] = description
    parameters = function.get("parameters")
    if parameters is None:
        parameters = {"type": "object", "properties": {}}
    elif not isinstance(parameters, Mapping):
        raise InvalidTypeError(f"{where}.function.parameters must be a JSON Schema object")
    out["input_schema"] = copy_json(parameters)
    if isinstance(function.get("strict"), bool):
        out["strict"] = function["strict"]
    return out


def _tool_choice(choice: Any, parallel: Any, tools: Any) -> dict[str, Any] | None:
    out = _choice(choice)
    if parallel is False and (out is not None or tools):
        out = out if out is not None else {"type": "auto"}
        if out["type"] != "none":
            out["disable_parallel_tool_use"] = True
    return out


def _choice(choice: Any) -> dict[str, Any] | None:
    if choice is None:
        return None
    if isinstance(choice, str):
        if choice not in _NAMED_CHOICES:
            raise InvalidArgumentError(
                f"tool_choice must be 'auto', 'none', 'required' or a named tool, got {choice!r}"
            )
        return {"type": _NAMED_CHOICES[choice]}
    if not isinstance(choice, Mapping):
        raise InvalidTypeError(
            f"tool_choice must be a str, a mapping or None, got {type(choice).__name__}"
        )
    kind = choice.get("type")
    if kind == "function":
        function = choice.get("function")
        name = function.get("name") if isinstance(function, Mapping) else None
        if not isinstance(name, str) or not name:
            raise InvalidArgumentError("tool_choice.function.name must be a non-empty str")
        return {"type": "tool", "name": name}
    if kind not in _OWN_CHOICES:
        raise InvalidArgumentError(
            f"tool_choice type {kind!r} is neither OpenAI's 'function' nor Anthropic's "
            "auto/any/tool/none"
        )
    if kind == "tool" and not (isinstance(choice.get("name"), str) and choice["name"]):
        raise InvalidArgumentError("tool_choice.name must be a non-empty str for type 'tool'")
    return copy_dict(choice)


# -- the history ----------------------------------------------------------------------


def _history(messages: Sequence[Message]) -> tuple[str | list[Any] | None, list[dict[str, Any]]]:
    """`(system, messages)`: the system text apart, the turns in Anthropic's shape."""
    system: list[Message] = []
    out: list[dict[str, Any]] = []
    results: list[dict[str, Any]] | None = None  # the open run of tool results
    for index, message in enumerate(messages):
        where = f"messages[{index}]"
        if not isinstance(message, Message):
            raise InvalidTypeError(f"{where} must be a Message, got {type(message).__name__}")
        role = message.role
        if role in ("system", "developer"):
            system.append(message)
            continue
        if role in ("tool", "function"):
            block = tool_result(message, where)
            if results is None:
                results = [block]
                out.append({"role": "user", "content": results})
            else:
                results.append(block)
            continue
        results = None
        if role == "assistant":
            content = assistant_content(message, where, dialect="anthropic")
        else:
            content = content_blocks(message.content, f"{where}.content", keep_str=True)
        wire: dict[str, Any] = {"role": role, "content": content}
        if message.extra:
            wire.update(copy_json(message.extra))
            # An OpenAI-shaped turn's reasoning text (what the proxy's faces make of
            # thinking a client sent back) is not a member Anthropic accepts (a 400,
            # "Extra inputs are not permitted"), and unsigned it cannot be a thinking block.
            wire.pop("reasoning_content", None)
        out.append(wire)
    return system_blocks(system), out
