"""The Gemini ``generateContent`` request body, built from neutral inputs; pure.

`build_request(messages, settings, tools, tool_choice)` takes normalized
`Message`s, the OpenAI-named settings dict `_get_api_settings` returns,
OpenAI-shaped tools and tool choice, and returns a new body: ``contents``,
``systemInstruction``, ``tools``, ``toolConfig``, ``generationConfig``, then
any other members the settings carried (``extra_body``: ``safetySettings``,
``cachedContent`` …, sent as given). The model is not in the body (it is in
the URL) and neither is the stream flag. Bad input raises
`InvalidArgumentError`/`InvalidTypeError` naming the field.

Settings → ``generationConfig``: temperature, top_p → topP, top_k → topK,
max_tokens → maxOutputTokens, stop → stopSequences, seed, presence_penalty →
presencePenalty, frequency_penalty → frequencyPenalty, logprobs →
responseLogprobs, top_logprobs → logprobs; a JSON-schema ``response_format`` →
``responseMimeType: application/json`` + ``responseJsonSchema`` (JSON Schema
as given, not the OpenAPI subset of ``responseSchema``); ``json_object`` →
the MIME type alone. ``thinkingConfig``: reasoning_budget_tokens →
thinkingBudget (-1: dynamic, 0: off) and reasoning_effort → thinkingLevel
(``none`` → thinkingBudget 0); when both are given the budget wins;
``includeThoughts: true`` whenever thinking is asked for and not turned off.
An ``extra_body`` ``generationConfig`` is merged over these key by key. The
llama.cpp-only samplers (min_p, typical_p, repetition_penalty, logit_bias,
xtc_*, dry_*, id_slot, cache_prompt) and parallel_tool_calls have no Gemini
form and are not sent.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any, Final

from ..errors import InvalidArgumentError, InvalidTypeError
from ..messages import Message
from ..tools import tool_definitions
from .base import LLAMA_CPP_SETTINGS
from .gemini_contents import contents_of
from .request_checks import mapping_at, name_at

__all__ = ["NOT_SENT", "build_request", "function_declarations", "tool_config"]

_GENERATION: Final[Mapping[str, str]] = {
    "temperature": "temperature",
    "top_p": "topP",
    "top_k": "topK",
    "max_tokens": "maxOutputTokens",
    "seed": "seed",
    "presence_penalty": "presencePenalty",
    "frequency_penalty": "frequencyPenalty",
    "logprobs": "responseLogprobs",
    "top_logprobs": "logprobs",
}
NOT_SENT: Final = frozenset(
    {
        "model",
        "min_p",
        "typical_p",
        "repetition_penalty",
        "logit_bias",
        *LLAMA_CPP_SETTINGS,
        "parallel_tool_calls",
        "max_context",
    }
)
"""OpenAI-named settings that have no Gemini form (``model`` goes in the URL)."""
_TRANSLATED: Final = frozenset(
    {*_GENERATION, "stop", "response_format", "reasoning_effort", "reasoning_budget_tokens"}
)
_MODES: Final[Mapping[str, str]] = {"auto": "AUTO", "none": "NONE", "required": "ANY"}


def build_request(
    messages: Sequence[Message],
    settings: Mapping[str, Any],
    tools: Sequence[Mapping[str, Any]] | None = None,
    tool_choice: str | Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The ``generateContent`` body (also ``streamGenerateContent``'s) as a new dict."""
    contents, system = contents_of(messages)
    if not contents:
        raise InvalidArgumentError(
            "messages must hold at least one user, assistant or tool message for Gemini"
        )
    body: dict[str, Any] = {"contents": contents}
    if system is not None:
        body["systemInstruction"] = system
    if tools is not None:
        translated = function_declarations(tools)
        if translated:
            body["tools"] = translated
    if tool_choice is not None:
        body["toolConfig"] = tool_config(tool_choice)
    extra = {
        key: copy.deepcopy(value)
        for key, value in settings.items()
        if key not in _TRANSLATED and key not in NOT_SENT
    }
    config = _generation_config(settings)
    given = extra.pop("generationConfig", None)
    if isinstance(given, Mapping):
        config.update(given)
    elif given is not None:
        raise InvalidTypeError("extra_body generationConfig must be a mapping")
    if config:
        body["generationConfig"] = config
    for key, value in extra.items():
        body.setdefault(key, value)
    return body


def _generation_config(settings: Mapping[str, Any]) -> dict[str, Any]:
    config: dict[str, Any] = {
        wire: copy.deepcopy(settings[name])
        for name, wire in _GENERATION.items()
        if name in settings
    }
    stop = settings.get("stop")
    if stop is not None:
        config["stopSequences"] = [stop] if isinstance(stop, str) else list(stop)
    config.update(_response_format(settings.get("response_format")))
    thinking = _thinking(settings.get("reasoning_budget_tokens"), settings.get("reasoning_effort"))
    if thinking:
        config["thinkingConfig"] = thinking
    return config


def _response_format(value: Any) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise InvalidTypeError("response_format must be a mapping")
    kind = value.get("type")
    if kind == "json_object":
        return {"responseMimeType": "application/json"}
    if kind == "json_schema":
        wrapper = value.get("json_schema")
        schema = wrapper.get("schema") if isinstance(wrapper, Mapping) else None
        if not isinstance(schema, Mapping):
            raise InvalidArgumentError("response_format.json_schema.schema must be a JSON Schema")
        return {"responseMimeType": "application/json", "responseJsonSchema": copy.deepcopy(schema)}
    if kind == "text":
        return {}
    raise InvalidArgumentError(f"response_format.type {kind!r} has no Gemini form")


def _thinking(budget: Any, effort: Any) -> dict[str, Any]:
    if budget is not None:
        if budget == 0:
            return {"thinkingBudget": 0}
        return {"thinkingBudget": budget, "includeThoughts": True}
    if effort is None:
        return {}
    if not isinstance(effort, str) or not effort:
        raise InvalidTypeError("reasoning_effort must be a non-empty str")
    if effort == "none":
        return {"thinkingBudget": 0}
    return {"thinkingLevel": effort, "includeThoughts": True}


def function_declarations(tools: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """OpenAI ``function`` tools as one ``{functionDeclarations: [...]}`` tool.

    The schema goes as ``parametersJsonSchema`` (JSON Schema, where
    ``parameters`` takes an OpenAPI subset that rejects keywords such as
    ``additionalProperties`` or ``$ref``). A tool without ``type: function``
    (``{"googleSearch": {}}``, ``{"functionDeclarations": [...]}``) is Gemini's
    own and is sent as given, after the declarations.
    """
    declarations: list[dict[str, Any]] = []
    own: list[dict[str, Any]] = []
    for index, tool in enumerate(tool_definitions(tools)):
        if not isinstance(tool, Mapping):
            raise InvalidTypeError(f"tools[{index}] must be a mapping, got {type(tool).__name__}")
        if tool.get("type") != "function":
            own.append(copy.deepcopy(dict(tool)))
            continue
        declarations.append(_declaration(tool.get("function"), f"tools[{index}].function"))
    return ([{"functionDeclarations": declarations}] if declarations else []) + own


def _declaration(function: Any, where: str) -> dict[str, Any]:
    function = mapping_at(function, where)
    name = name_at(function, where)
    out: dict[str, Any] = {"name": name}
    if isinstance(function.get("description"), str):
        out["description"] = function["description"]
    parameters = function.get("parameters")
    if parameters is not None:
        if not isinstance(parameters, Mapping):
            raise InvalidTypeError(f"{where}.parameters must be a JSON Schema object")
        out["parametersJsonSchema"] = copy.deepcopy(dict(parameters))
    return out


def tool_config(choice: str | Mapping[str, Any]) -> dict[str, Any]:
    """OpenAI's ``tool_choice`` as ``toolConfig.functionCallingConfig``.

    ``auto`` → AUTO, ``none`` → NONE, ``required`` → ANY, a named function →
    ANY with ``allowedFunctionNames``; a mapping with ``functionCallingConfig``
    is Gemini's own ``toolConfig`` and is sent as given.
    """
    if isinstance(choice, str):
        mode = _MODES.get(choice)
        if mode is None:
            raise InvalidArgumentError(
                f"tool_choice must be 'auto', 'none', 'required' or a function, got {choice!r}"
            )
        return {"functionCallingConfig": {"mode": mode}}
    if not isinstance(choice, Mapping):
        raise InvalidTypeError("tool_choice must be a str, a mapping or None")
    if "functionCallingConfig" in choice:
        return copy.deepcopy(dict(choice))
    function = choice.get("function")
    name = function.get("name") if isinstance(function, Mapping) else None
    if choice.get("type") != "function" or not isinstance(name, str) or not name:
        raise InvalidArgumentError(
            "tool_choice must be {'type': 'function', 'function': {'name': ...}} "
            "or a Gemini toolConfig"
        )
    return {"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": [name]}}
