"""Gemini's face of the proxy: a ``generateContent`` body as an OpenAI chat body; pure.

`generate_request` takes the decoded body of ``POST .../models/{model}:generateContent``
(or ``:streamGenerateContent``, or ``:countTokens``), the model named in the
path and the mode, and returns the OpenAI chat-completions body and whether
the client asked to see thoughts. No I/O, no clock; DEBUG lines only.

**The liberal rule**, as on the other faces: a field the face does not know
is left out (Gemini clients add fields often), a tool or part kind a chat
upstream cannot use is dropped with one DEBUG line naming its path, and a
400 (Gemini's ``INVALID_ARGUMENT``, naming the field) is kept for what
cannot be served: a member of the wrong JSON type, no contents, more than
one candidate, media the upstream cannot read.

Decisions worth knowing (history: `history`; schemas: `schema`):

- ``systemInstruction`` (a string, a Content or parts; text joined with
  ``"\\n"``) becomes one system message, first.
- ``tools[].functionDeclarations`` become OpenAI function tools; their
  ``parameters`` (Gemini's OpenAPI ``Schema``, upper-case types) become JSON
  Schema, ``parametersJsonSchema`` goes as given. Every other tool kind
  (``googleSearch``, ``codeExecution``, ``urlContext``, ...) is Google's
  own and is dropped.
- ``toolConfig.functionCallingConfig.mode``: ``AUTO`` (and ``VALIDATED``)
  → ``"auto"``, ``ANY`` → ``"required"``, or the one function when
  ``allowedFunctionNames`` names one (several: the tools are narrowed to
  them), ``NONE`` → ``"none"``.
- ``generationConfig``: temperature, topP, topK, maxOutputTokens,
  stopSequences, seed, presencePenalty, frequencyPenalty under their OpenAI
  names; ``candidateCount`` above 1 is a 400 (one answer is what the face
  writes); ``responseMimeType: application/json`` with ``responseSchema``
  (converted) or ``responseJsonSchema`` (as given) → a ``json_schema``
  ``response_format``, without a schema → ``json_object``;
  ``thinkingConfig.thinkingBudget`` → ``reasoning_effort`` (0: ``"none"``,
  no reasoning; below 4096 ``"low"``, below 16384 ``"medium"``, else
  ``"high"``, the Anthropic face's steps; -1, the server's choice: nothing),
  ``thinkingLevel`` → ``reasoning_effort`` as written (lower case);
  ``includeThoughts`` says whether the answer carries thought parts (Gemini
  sends none unless asked).
- ``safetySettings``, ``cachedContent``, ``labels`` and every other member
  are left out.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, Final, NamedTuple

from ....errors import InvalidArgumentError
from ...field_checks import (
    integer,
    number,
    optional_list,
    require_bool,
    require_mapping,
    require_str,
)
from .history import history_messages, system_text
from .schema import json_schema, json_schema_types
from .spelling import camel_case

__all__ = ["GenerateRequest", "generate_request", "model_name"]

log = logging.getLogger("llmchat.proxy")

_READ: Final = frozenset(
    {"contents", "systemInstruction", "tools", "toolConfig", "generationConfig"}
)
_NUMBERS: Final = (
    ("temperature", "temperature"),
    ("topP", "top_p"),
    ("presencePenalty", "presence_penalty"),
    ("frequencyPenalty", "frequency_penalty"),
)
_INTEGERS: Final = (("topK", "top_k"), ("seed", "seed"))
_CONFIG_READ: Final = frozenset(
    {
        *(name for name, _ in _NUMBERS),
        *(name for name, _ in _INTEGERS),
        "maxOutputTokens",
        "stopSequences",
        "candidateCount",
        "responseMimeType",
        "responseSchema",
        "responseJsonSchema",
        "_responseJsonSchema",
        "thinkingConfig",
    }
)
_EFFORT_LOW_BELOW: Final = 4096
_EFFORT_MEDIUM_BELOW: Final = 16384
_MODES: Final = {"AUTO": "auto", "VALIDATED": "auto", "ANY": "required", "NONE": "none"}


class GenerateRequest(NamedTuple):
    """A translated request: the OpenAI chat body, and whether thoughts are to be shown."""

    body: dict[str, Any]
    thinking: bool


def model_name(path_model: str) -> str:
    """The model as the path names it, without Gemini's ``models/`` resource prefix."""
    name = path_model[len("models/") :] if path_model.startswith("models/") else path_model
    if not name:
        raise InvalidArgumentError("model: the path names no model")
    return name


def generate_request(body: Mapping[str, Any], model: str, *, stream: bool) -> GenerateRequest:
    """Translate a ``generateContent`` `body` for `model` (from the path) into an OpenAI chat
    body that streams when `stream`; field paths as the client wrote them in every error
    (in camelCase: snake_case field names are read as their camelCase spelling)."""
    body = camel_case(require_mapping(body, "body"))
    for name in body:
        if name not in _READ and body[name] is not None:
            log.debug("%s dropped", name)
    messages: list[dict[str, Any]] = []
    system = system_text(body.get("systemInstruction"))
    if system:
        messages.append({"role": "system", "content": system})
    messages.extend(history_messages(body.get("contents")))
    out: dict[str, Any] = {"model": model, "messages": messages, "stream": stream}
    tools = _tools(body.get("tools"))
    choice = _tool_choice(body.get("toolConfig"), tools)
    if tools:
        out["tools"] = tools
        if choice is not None:
            out["tool_choice"] = choice
    thinking = _generation_config(body.get("generationConfig"), out)
    return GenerateRequest(out, thinking)


# -- tools --------------------------------------------------------------------------


def _tools(value: Any) -> list[dict[str, Any]]:
    tools: list[dict[str, Any]] = []
    for i, tool in enumerate(optional_list(value, "tools", "a list of Tool objects")):
        where = f"tools[{i}]"
        require_mapping(tool, where)
        for kind in tool:
            if kind not in ("functionDeclarations", "function_declarations"):
                log.debug("%s.%s dropped (Google's own tool)", where, kind)
        declarations = tool.get("functionDeclarations", tool.get("function_declarations"))
        for j, declaration in enumerate(
            optional_list(declarations, f"{where}.functionDeclarations")
        ):
            tools.append(_function(declaration, f"{where}.functionDeclarations[{j}]"))
    return tools


def _function(value: Any, where: str) -> dict[str, Any]:
    declaration = require_mapping(value, where)
    name = require_str(declaration.get("name"), f"{where}.name")
    if not name:
        raise InvalidArgumentError(f"{where}.name: must not be empty")
    function: dict[str, Any] = {"name": name}
    description = declaration.get("description")
    if description is not None:
        function["description"] = require_str(description, f"{where}.description")
    given = declaration.get("parametersJsonSchema")
    if given is not None:
        function["parameters"] = json_schema_types(
            require_mapping(given, f"{where}.parametersJsonSchema")
        )
    elif declaration.get("parameters") is not None:
        function["parameters"] = json_schema(declaration["parameters"], f"{where}.parameters")
    else:
        function["parameters"] = {"type": "object", "properties": {}}
    return {"type": "function", "function": function}


def _tool_choice(value: Any, tools: list[dict[str, Any]]) -> Any:
    """OpenAI's ``tool_choice`` for ``toolConfig``; narrows `tools` to the allowed names."""
    if value is None:
        return None
    config = require_mapping(value, "toolConfig").get("functionCallingConfig")
    if config is None:
        return None
    config = require_mapping(config, "toolConfig.functionCallingConfig")
    where = "toolConfig.functionCallingConfig"
    mode = config.get("mode")
    if mode is None or mode == "MODE_UNSPECIFIED":
        return None
    choice = _MODES.get(require_str(mode, f"{where}.mode").upper())
    if choice is None:
        log.debug("%s.mode %r dropped", where, mode)
        return None
    names = optional_list(config.get("allowedFunctionNames"), f"{where}.allowedFunctionNames")
    if choice != "required" or not names:
        return choice
    allowed = {require_str(n, f"{where}.allowedFunctionNames[{i}]") for i, n in enumerate(names)}
    tools[:] = [tool for tool in tools if tool["function"]["name"] in allowed]
    if len(tools) == 1:
        return {"type": "function", "function": {"name": tools[0]["function"]["name"]}}
    return choice


# -- generationConfig --------------------------------------------------------------


def _generation_config(value: Any, out: dict[str, Any]) -> bool:
    """Put ``generationConfig``'s members into `out`; whether thoughts are to be shown."""
    if value is None:
        return False
    where = "generationConfig"
    config = require_mapping(value, where)
    for name in config:
        if name not in _CONFIG_READ and config[name] is not None:
            log.debug("%s.%s dropped", where, name)
    for name, field in _NUMBERS:
        if config.get(name) is not None:
            out[field] = number(config[name], f"{where}.{name}")
    for name, field in _INTEGERS:
        if config.get(name) is not None:
            out[field] = integer(config[name], f"{where}.{name}")
    if config.get("maxOutputTokens") is not None:
        limit = integer(config["maxOutputTokens"], f"{where}.maxOutputTokens")
        if limit < 1:
            raise InvalidArgumentError(f"{where}.maxOutputTokens: must be at least 1")
        out["max_tokens"] = limit
    stop = optional_list(config.get("stopSequences"), f"{where}.stopSequences")
    if stop:
        out["stop"] = [require_str(s, f"{where}.stopSequences[{i}]") for i, s in enumerate(stop)]
    if config.get("candidateCount") is not None:
        count = integer(config["candidateCount"], f"{where}.candidateCount")
        if count > 1:
            raise InvalidArgumentError(
                f"{where}.candidateCount: this proxy answers one candidate, not {count}"
            )
    response_format = _response_format(config, where)
    if response_format is not None:
        out["response_format"] = response_format
    return _thinking(config.get("thinkingConfig"), f"{where}.thinkingConfig", out)


def _response_format(config: Mapping[str, Any], where: str) -> dict[str, Any] | None:
    mime = config.get("responseMimeType")
    if mime is None:
        return None
    mime = require_str(mime, f"{where}.responseMimeType")
    if mime not in ("application/json", "text/x.enum"):
        return None  # text/plain, the default
    schema: Any = None
    for name in ("responseJsonSchema", "_responseJsonSchema"):
        if config.get(name) is not None:
            schema = json_schema_types(require_mapping(config[name], f"{where}.{name}"))
    if schema is None and config.get("responseSchema") is not None:
        schema = json_schema(config["responseSchema"], f"{where}.responseSchema")
    if schema is None:
        return {"type": "json_object"}
    return {"type": "json_schema", "json_schema": {"name": "response", "schema": schema}}


def _effort(budget: int) -> str | None:
    """A thinking budget as ``reasoning_effort``, the one knob chat servers share (the
    Anthropic face's thresholds); -1 (the server decides) sends nothing."""
    if budget < 0:
        return None
    if budget == 0:
        return "none"
    if budget < _EFFORT_LOW_BELOW:
        return "low"
    return "medium" if budget < _EFFORT_MEDIUM_BELOW else "high"


def _thinking(value: Any, where: str, out: dict[str, Any]) -> bool:
    if value is None:
        return False
    config = require_mapping(value, where)
    budget = config.get("thinkingBudget")
    if budget is not None:
        budget = integer(budget, f"{where}.thinkingBudget")
        if budget < -1:
            raise InvalidArgumentError(f"{where}.thinkingBudget: must be -1 or more")
        effort = _effort(budget)
        if effort is not None:
            out["reasoning_effort"] = effort
    level = config.get("thinkingLevel")
    if level is not None and budget is None:
        level = require_str(level, f"{where}.thinkingLevel").lower()
        if level not in ("", "thinking_level_unspecified"):
            out["reasoning_effort"] = level
    shown = config.get("includeThoughts")
    if shown is None:
        return False
    return require_bool(shown, f"{where}.includeThoughts") and budget != 0
