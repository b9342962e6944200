"""The Responses face of the proxy: a ``POST /v1/responses`` body as an OpenAI chat body.

Pure translation, no I/O. `responses_request` returns the upstream chat
request and the `Echo` (what the Response object repeats of the request);
`error_body` is OpenAI's error shape with the ``param`` the message names.
``input`` is `input`'s.

The face is liberal by design (API.md "Faces are liberal by design"; STYLE
rule 17). Codex and the SDKs change their requests every few weeks, so the
face never refuses a turn over something a chat upstream can do without:

- a field, tool type, item type or content part it does not send upstream is
  dropped with exactly one DEBUG line on the ``llmchat.proxy`` logger naming
  its path (`tools.dropped`), never a 400. Tools: `tools`
  (namespaces flattened, custom tools folded, hosted tools dropped); items:
  `input` (reasoning kept as ``reasoning_content``, item references
  resolved or dropped);
- a 400, OpenAI's shape with ``param``, is kept for a request that cannot be
  served at all: a malformed body; ``previous_response_id``, ``conversation``
  or ``prompt`` (stored state the proxy cannot have); ``background: true``
  (it is polled for later); an ``item_reference`` to an unknown item that
  carries content; a file the user attached.

Decisions where OpenAI's API leaves room:

- nothing is stored: ``store: true`` is served as ``false`` (one DEBUG line)
  and every Response says ``"store": false``;
- ``tool_choice`` naming a tool picks it under its upstream name; a hosted
  tool's choice is dropped (the upstream then chooses); ``allowed_tools``
  sends only the allowed tools, with its ``mode``;
- ``text.format`` ``json_schema``/``json_object`` becomes ``response_format``;
  ``reasoning.effort`` becomes ``reasoning_effort`` (the chat API's same
  words); ``max_output_tokens`` ``max_tokens``. ``reasoning.summary`` asks
  for the reasoning as summary parts too, ``include:
  ["reasoning.encrypted_content"]`` for it in ``encrypted_content``
  (`responses_objects.reasoning_item`). ``metadata`` is echoed. The other
  fields (``prompt_cache_key``, ``client_metadata``, ``text.verbosity``,
  ``reasoning.context`` …) have no chat meaning and are dropped.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from .... import wire_json
from ....errors import InvalidArgumentError, InvalidTypeError
from ....protocols.responses_objects import Echo
from ....protocols.responses_shape import CALLS, CARRY, SUMMARY
from ...field_checks import integer, json_type, number, require_bool, require_mapping, require_str
from .input import Unsupported, additional_tools, input_messages
from .tools import ToolSet, dropped, tool_set

__all__ = ["Unsupported", "error_body", "responses_request"]

_STATEFUL: Final = ("previous_response_id", "conversation", "prompt")
_EFFORTS: Final = frozenset({"none", "minimal", "low", "medium", "high", "xhigh"})
_CHOICE_WORDS: Final = frozenset({"auto", "none", "required"})
_READ: Final = frozenset(
    {
        "model", "input", "instructions", "stream", "max_output_tokens", "temperature",
        "top_p", "parallel_tool_calls", "tools", "tool_choice", "text", "reasoning",
        "metadata", "store", "background", "include", *_STATEFUL,
    }
)  # fmt: skip


def responses_request(body: Mapping[str, Any]) -> tuple[dict[str, Any], Echo]:
    """`(chat request, echo)` for a decoded ``/v1/responses`` body.

    Raises `Unsupported` for what a stateless proxy cannot serve and
    `InvalidArgumentError`/`InvalidTypeError` for malformed fields, each
    message starting with the field's path. The echo's private keys
    (`responses_shape.CALLS`, ``SUMMARY``, ``CARRY``) tell the answer how to
    shape its output.
    """
    require_mapping(body, "body")
    _refuse_state(body)
    for name in body:
        if name not in _READ:
            dropped(f"body.{name}", "no chat meaning")
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
    tools = tool_set(body.get("tools"), additional_tools(body["input"]))
    out: dict[str, Any] = {
        "model": model,
        "messages": input_messages(body["input"], instructions, tools),
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
    echo["tools"] = tools.echo
    _tool_choice(body.get("tool_choice"), tools, out, echo)
    _text(body.get("text"), out, echo)
    _reasoning(body.get("reasoning"), out, echo)
    metadata = body.get("metadata")
    if isinstance(metadata, Mapping):
        echo["metadata"] = dict(metadata)
    for name, value in list(echo.items()):
        if name.startswith("_"):
            continue
        try:
            wire_json.encode_data(value)  # every event repeats the echo: it must encode
        except ValueError as exc:
            text = str(exc).removeprefix("body: ")
            raise InvalidArgumentError(f"{name}: {text}") from None
    include = body.get("include")
    echo[CARRY] = isinstance(include, list) and "reasoning.encrypted_content" in include
    echo[CALLS] = tools.calls
    return out, echo


def error_body(
    message: str, *, code: str | None = None, param: str | None = None
) -> dict[str, Any]:
    """OpenAI's 400 body; ``param`` is `param`, else the field path `message` starts with."""
    if param is None:
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
    previous = body.get("previous_response_id")
    if previous is not None:
        # OpenAI's own words for a response it does not hold.
        raise Unsupported(
            f"Previous response with id '{previous}' not found.",
            param="previous_response_id",
            code="previous_response_not_found",
        )
    for name in _STATEFUL[1:]:
        if body.get(name) is not None:
            raise Unsupported(
                f"{name}: this proxy is stateless and keeps no {name}s; "
                "send the whole conversation in input"
            )
    store = body.get("store")
    if store is not None and require_bool(store, "store"):
        dropped("body.store", "this proxy keeps no responses; served as store: false")
    background = body.get("background")
    if background is not None and require_bool(background, "background"):
        raise Unsupported("background: background responses need stored state")


def _tool_choice(value: Any, tools: ToolSet, out: dict[str, Any], echo: dict[str, Any]) -> None:
    chosen = tools.chat
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
        if kind in ("function", "custom"):
            name = require_str(choice.get("name"), "tool_choice.name")
            upstream = tools.upstream_name(name, _namespace(choice))
            if upstream not in tools.calls:
                raise InvalidArgumentError(f"tool_choice.name: no tool named {name!r}")
            out["tool_choice"] = {"type": "function", "function": {"name": upstream}}
            echo["tool_choice"] = dict(choice)
        elif kind == "allowed_tools":
            chosen = _allowed(choice, tools, out)
            echo["tool_choice"] = dict(choice)
        else:
            dropped(f"tool_choice ({kind!r})", "a choice of a tool the upstream cannot run")
    if chosen:
        out["tools"] = chosen


def _namespace(entry: Mapping[str, Any]) -> str | None:
    namespace = entry.get("namespace")
    return namespace if isinstance(namespace, str) else None


def _allowed(choice: Mapping[str, Any], tools: ToolSet, out: dict[str, Any]) -> list[Any]:
    mode = choice.get("mode", "auto")
    if mode not in ("auto", "required"):
        raise InvalidArgumentError(f"tool_choice.mode: must be 'auto' or 'required', not {mode!r}")
    allowed = choice.get("tools")
    if not isinstance(allowed, list):
        raise InvalidTypeError(f"tool_choice.tools: must be a list, not {json_type(allowed)}")
    names: set[str] = set()
    for index, given in enumerate(allowed):
        entry = require_mapping(given, f"tool_choice.tools[{index}]")
        if entry.get("type") not in ("function", "custom"):
            dropped(f"tool_choice.tools[{index}]", "a tool the upstream cannot run")
            continue
        name = require_str(entry.get("name"), f"tool_choice.tools[{index}].name")
        names.add(tools.upstream_name(name, _namespace(entry)))
    out["tool_choice"] = mode
    return [tool for tool in tools.chat if tool["function"]["name"] in names]


# -- text and reasoning -------------------------------------------------------


def _text(value: Any, out: dict[str, Any], echo: dict[str, Any]) -> None:
    if value is None:
        return
    text = require_mapping(value, "text")
    for name in text:
        if name != "format":
            dropped(f"text.{name}", "no chat meaning")
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
    for name in reasoning:
        if name not in ("effort", "summary", "generate_summary"):
            dropped(f"reasoning.{name}", "no chat meaning")
    effort = reasoning.get("effort")
    if effort in _EFFORTS:
        out["reasoning_effort"] = effort
    elif effort is not None:
        dropped("reasoning.effort", f"{effort!r} is no chat reasoning_effort")
        effort = None
    summary = reasoning.get("summary") or reasoning.get("generate_summary")
    summary = summary if isinstance(summary, str) else None
    echo["reasoning"] = {"effort": effort, "summary": summary}
    echo[SUMMARY] = summary is not None and summary != "none"
