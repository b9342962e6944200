"""The Responses face of the proxy: a ``POST /v1/responses`` body as an OpenAI chat body.

Pure translation, no I/O. `responses_request` returns the upstream chat
request and the `Echo` (what the Response object repeats of the request);
`error_body` is OpenAI's error shape with the ``param`` the message names.
``input`` is `responses_input`'s.

The face is stateless. Decisions where OpenAI's API leaves room:

- ``store`` absent or ``false`` means nothing is stored (OpenAI's own default
  is ``true``; a proxy that keeps nothing reads absence as "not stored", and
  every Response it sends says ``"store": false``). ``store: true``,
  ``previous_response_id``, ``conversation``, ``prompt`` and
  ``background: true`` need stored state and get a 400
  (``unsupported_parameter``) before any upstream I/O.
- Only ``function`` tools: built-in tools (``web_search``, ``file_search``,
  ``code_interpreter``, ``mcp``, ``custom`` …) get a 400 naming the tool.
  ``tool_choice`` ``allowed_tools`` sends only the allowed function tools, with
  its ``mode``.
- ``text.format`` ``json_schema``/``json_object`` becomes ``response_format``;
  ``reasoning.effort`` becomes ``reasoning_effort`` (the chat API's same
  words); ``max_output_tokens`` ``max_tokens``. ``include``, ``metadata``,
  ``truncation``, ``service_tier``, ``user``, ``prompt_cache_key``,
  ``safety_identifier``, ``text.verbosity`` and ``reasoning.summary`` have no
  chat meaning and are not sent.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from .. import wire_json
from ..errors import InvalidArgumentError, InvalidTypeError
from ..protocols.responses_objects import Echo
from .fields import integer, json_type, number, require_bool, require_mapping, require_str
from .responses_input import Unsupported, input_messages

__all__ = ["Unsupported", "error_body", "responses_request"]

_STATEFUL: Final = ("previous_response_id", "conversation", "prompt")
_EFFORTS: Final = frozenset({"none", "minimal", "low", "medium", "high", "xhigh"})
_CHOICE_WORDS: Final = frozenset({"auto", "none", "required"})


def responses_request(body: Mapping[str, Any]) -> tuple[dict[str, Any], Echo]:
    """`(chat request, echo)` for a decoded ``/v1/responses`` body.

    Raises `Unsupported` for stateful or hosted-tool features and
    `InvalidArgumentError`/`InvalidTypeError` for malformed fields, each
    message starting with the field's path.
    """
    require_mapping(body, "body")
    _refuse_state(body)
    model = require_str(body.get("model"), "model")
    if not model:
        raise InvalidArgumentError("model: must not be empty")
    stream = body.get("stream")
    stream = False if stream is None else require_bool(stream, "stream")
    instructions = body.get("instructions")
    if instructions is not None:
        require_str(instructions, "instructions")
    if "input" not in body or body["input"] is None:
        raise InvalidArgumentError("input: is required")
    out: dict[str, Any] = {
        "model": model,
        "messages": input_messages(body["input"], instructions),
        "stream": stream,
    }
    echo: dict[str, Any] = {"model": model, "instructions": instructions}
    if body.get("max_output_tokens") is not None:
        limit = integer(body["max_output_tokens"], "max_output_tokens")
        if limit < 1:
            raise InvalidArgumentError(f"max_output_tokens: must be at least 1, not {limit}")
        out["max_tokens"] = echo["max_output_tokens"] = limit
    for name in ("temperature", "top_p"):
        if body.get(name) is not None:
            out[name] = echo[name] = number(body[name], name)
    if body.get("parallel_tool_calls") is not None:
        parallel = require_bool(body["parallel_tool_calls"], "parallel_tool_calls")
        out["parallel_tool_calls"] = echo["parallel_tool_calls"] = parallel
    tools = _tools(body.get("tools"))
    echo["tools"] = [tool for _, tool in tools]
    _tool_choice(body.get("tool_choice"), tools, out, echo)
    _text(body.get("text"), out, echo)
    _reasoning(body.get("reasoning"), out, echo)
    metadata = body.get("metadata")
    if isinstance(metadata, Mapping):
        echo["metadata"] = dict(metadata)
    for name, value in echo.items():
        try:
            wire_json.encode_data(value)  # every event repeats the echo: it must encode
        except ValueError as exc:
            text = str(exc).removeprefix("body: ")
            raise InvalidArgumentError(f"{name}: {text}") from None
    return out, echo


def error_body(message: str, *, code: str | None = None) -> dict[str, Any]:
    """OpenAI's 400 body; ``param`` is the field path `message` starts with, if any."""
    head, sep, _ = message.partition(": ")
    param = head if sep and head and " " not in head else None
    return {
        "error": {
            "message": message,
            "type": "invalid_request_error",
            "param": param,
            "code": code,
        }
    }


# -- state and tools ----------------------------------------------------------


def _refuse_state(body: Mapping[str, Any]) -> None:
    for name in _STATEFUL:
        if body.get(name) is not None:
            raise Unsupported(
                f"{name}: this proxy is stateless and keeps no responses; "
                "send the whole conversation in input"
            )
    store = body.get("store")
    if store is not None and require_bool(store, "store"):
        raise Unsupported("store: this proxy keeps no responses; send store: false")
    background = body.get("background")
    if background is not None and require_bool(background, "background"):
        raise Unsupported("background: background responses need stored state")


def _tools(value: Any) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """`(chat tool, echoed Responses tool)` per function tool."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise InvalidTypeError(f"tools: must be a list, not {json_type(value)}")
    out: list[tuple[dict[str, Any], dict[str, Any]]] = []
    for index, given in enumerate(value):
        where = f"tools[{index}]"
        tool = require_mapping(given, where)
        kind = tool.get("type")
        if kind != "function":
            raise Unsupported(
                f"{where}.type: built-in tool {kind!r} is not supported; "
                "this proxy serves function tools only"
            )
        name = require_str(tool.get("name"), f"{where}.name")
        if not name:
            raise InvalidArgumentError(f"{where}.name: must not be empty")
        function: dict[str, Any] = {"name": name}
        echoed: dict[str, Any] = {"type": "function", "name": name}
        description = tool.get("description")
        if description is not None:
            function["description"] = echoed["description"] = require_str(
                description, f"{where}.description"
            )
        parameters = tool.get("parameters")
        if parameters is not None:
            function["parameters"] = dict(require_mapping(parameters, f"{where}.parameters"))
        else:
            function["parameters"] = {"type": "object", "properties": {}}
        echoed["parameters"] = function["parameters"]
        strict = tool.get("strict")
        if strict is not None:
            function["strict"] = require_bool(strict, f"{where}.strict")
        echoed["strict"] = bool(strict) if strict is not None else True
        out.append(({"type": "function", "function": function}, echoed))
    return out


def _tool_choice(
    value: Any,
    tools: list[tuple[dict[str, Any], dict[str, Any]]],
    out: dict[str, Any],
    echo: dict[str, Any],
) -> None:
    chosen = tools
    if value is None:
        pass
    elif isinstance(value, str):
        if value not in _CHOICE_WORDS:
            raise InvalidArgumentError(
                f"tool_choice: must be 'auto', 'none' or 'required', not {value!r}"
            )
        out["tool_choice"] = echo["tool_choice"] = value
    else:
        choice = require_mapping(value, "tool_choice")
        kind = choice.get("type")
        if kind == "function":
            name = require_str(choice.get("name"), "tool_choice.name")
            if name not in {tool["name"] for _, tool in tools}:
                raise InvalidArgumentError(f"tool_choice.name: no function tool named {name!r}")
            out["tool_choice"] = {"type": "function", "function": {"name": name}}
        elif kind == "allowed_tools":
            chosen = _allowed(choice, tools, out)
        else:
            raise Unsupported(f"tool_choice.type: {kind!r} is not supported; use function tools")
        echo["tool_choice"] = dict(choice)
    if chosen:
        out["tools"] = [tool for tool, _ in chosen]


def _allowed(
    choice: Mapping[str, Any],
    tools: list[tuple[dict[str, Any], dict[str, Any]]],
    out: dict[str, Any],
) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    mode = choice.get("mode", "auto")
    if mode not in ("auto", "required"):
        raise InvalidArgumentError(f"tool_choice.mode: must be 'auto' or 'required', not {mode!r}")
    allowed = choice.get("tools")
    if not isinstance(allowed, list):
        raise InvalidTypeError(f"tool_choice.tools: must be a list, not {json_type(allowed)}")
    names: set[str] = set()
    for index, given in enumerate(allowed):
        entry = require_mapping(given, f"tool_choice.tools[{index}]")
        if entry.get("type") != "function":
            raise Unsupported(f"tool_choice.tools[{index}].type: only function tools are served")
        names.add(require_str(entry.get("name"), f"tool_choice.tools[{index}].name"))
    out["tool_choice"] = mode
    return [pair for pair in tools if pair[1]["name"] in names]


# -- text and reasoning -------------------------------------------------------


def _text(value: Any, out: dict[str, Any], echo: dict[str, Any]) -> None:
    if value is None:
        return
    text = require_mapping(value, "text")
    given = text.get("format")
    if given is None:
        return
    shape = require_mapping(given, "text.format")
    kind = shape.get("type")
    if kind == "json_schema":
        name = require_str(shape.get("name"), "text.format.name")
        spec: dict[str, Any] = {
            "name": name,
            "schema": dict(require_mapping(shape.get("schema"), "text.format.schema")),
        }
        if shape.get("description") is not None:
            spec["description"] = require_str(shape["description"], "text.format.description")
        if shape.get("strict") is not None:
            spec["strict"] = require_bool(shape["strict"], "text.format.strict")
        out["response_format"] = {"type": "json_schema", "json_schema": spec}
    elif kind == "json_object":
        out["response_format"] = {"type": "json_object"}
    elif kind != "text":
        raise InvalidArgumentError(
            f"text.format.type: must be 'text', 'json_schema' or 'json_object', not {kind!r}"
        )
    echo["text"] = {"format": dict(shape)}


def _reasoning(value: Any, out: dict[str, Any], echo: dict[str, Any]) -> None:
    if value is None:
        return
    reasoning = require_mapping(value, "reasoning")
    effort = reasoning.get("effort")
    if effort is not None:
        if effort not in _EFFORTS:
            raise InvalidArgumentError(
                f"reasoning.effort: must be one of {', '.join(sorted(_EFFORTS))}, not {effort!r}"
            )
        out["reasoning_effort"] = effort
    summary = reasoning.get("summary")
    echo["reasoning"] = {"effort": effort, "summary": summary if isinstance(summary, str) else None}
