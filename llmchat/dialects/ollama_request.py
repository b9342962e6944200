"""Ollama request bodies (``/api/chat``, ``/api/generate``) from normalized messages.

Pure, no I/O. Takes `Message`s, the OpenAI-named settings dict a backend's
`_get_api_settings` returns, OpenAI-shaped tools and tool_choice; returns the
body dict. Bad input raises `InvalidArgumentError`/`InvalidTypeError` naming
the field, before anything is sent.

What goes where (decisions: /work/notes/ollama.md):

- Samplers go under ``options`` in Ollama's names (``max_tokens`` →
  ``num_predict``, ``repetition_penalty`` → ``repeat_penalty``, ``max_context``
  → ``num_ctx``); an ``options`` dict in ``extra_body`` is merged over them;
  every other unknown key (``keep_alive`` …) goes on the body as it is.
- ``response_format`` becomes ``format``: ``"json"`` or the bare schema.
- ``reasoning_effort`` becomes ``think``: ``"low"``/``"medium"``/``"high"`` as
  levels, ``"none"`` as false; without it, ``reasoning_budget_tokens`` 0 is
  false and any other budget true (Ollama has no budget).
- ``stream`` is always sent: Ollama streams unless told false.
- Images must be inline (a base64 ``data:`` URL): Ollama takes no URLs, so an
  ``https://`` image raises rather than being dropped.
- ``tool_choice``: ``"auto"`` sends the tools, ``"none"`` leaves them out;
  ``"required"`` and a named function raise, since Ollama cannot force a call.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from .. import fastjson
from ..errors import InvalidArgumentError, InvalidTypeError
from ..messages import Message
from ..tools import tool_definitions
from .request_checks import mapping_at, name_at

__all__ = ["chat_body", "generate_body", "prompt_parts", "tool_names"]

OPTION_NAMES: Final = {
    "temperature": "temperature",
    "top_p": "top_p",
    "top_k": "top_k",
    "min_p": "min_p",
    "typical_p": "typical_p",
    "seed": "seed",
    "stop": "stop",
    "max_tokens": "num_predict",
    "repetition_penalty": "repeat_penalty",
    "presence_penalty": "presence_penalty",
    "frequency_penalty": "frequency_penalty",
    "max_context": "num_ctx",
}
"""OpenAI-named settings → Ollama ``options`` names."""
_TOP_LEVEL: Final = ("logprobs", "top_logprobs")
_HANDLED: Final = frozenset(
    {*OPTION_NAMES, "model", "stream", "options", "response_format"}
    | {"reasoning_effort", "reasoning_budget_tokens"}
)
_LEVELS: Final = ("low", "medium", "high")
_ROLES: Final = {
    "system": "system",
    "developer": "system",
    "user": "user",
    "assistant": "assistant",
    "tool": "tool",
    "function": "tool",
}
_DATA_PREFIX: Final = "data:"


def chat_body(
    messages: Sequence[Message],
    settings: Mapping[str, Any],
    tools: Sequence[Mapping[str, Any]] | None,
    tool_choice: str | Mapping[str, Any] | None,
    model: str | None,
    stream: bool,
) -> dict[str, Any]:
    """The ``/api/chat`` body for `messages` (normalized already)."""
    body: dict[str, Any] = {"model": _model(model), "messages": _messages(messages)}
    offered = _tools(tools, tool_choice)
    if offered:
        body["tools"] = offered
    body.update(_generation(settings))
    body["stream"] = bool(stream)
    return body


def generate_body(
    prompt: str,
    settings: Mapping[str, Any],
    model: str | None,
    stream: bool,
    *,
    system: str | None = None,
    images: Sequence[str] = (),
    raw: bool = False,
) -> dict[str, Any]:
    """The ``/api/generate`` body: `prompt` (rendered already when `raw`), `system`, `images`."""
    body: dict[str, Any] = {"model": _model(model), "prompt": prompt}
    if raw:
        body["raw"] = True
    if system:
        body["system"] = system
    if images:
        body["images"] = list(images)
    body.update(_generation(settings))
    body["stream"] = bool(stream)
    return body


def prompt_parts(messages: Sequence[Message]) -> tuple[str | None, str, list[str]]:
    """`(system, prompt, images)` for ``/api/generate`` without a template.

    The messages must be system (or developer) messages and then one user
    message: a conversation needs the backend's `template` (``raw: true``).
    """
    system: list[str] = []
    for index, message in enumerate(messages):
        role = message.role
        if role in ("system", "developer"):
            system.append(_content(message.content, index)[0])
            continue
        if role != "user" or index != len(messages) - 1:
            raise InvalidArgumentError(
                f"messages[{index}].role: text completions on Ollama without a template take "
                f"system messages and one last user message, not {role!r} here; pass "
                "template=… to the backend for a whole conversation"
            )
        text, images = _content(message.content, index)
        return ("\n\n".join(system) or None), text, images
    raise InvalidArgumentError("messages: text completions need a user message to use as prompt")


def tool_names(messages: Sequence[Message]) -> dict[int, str]:
    """The function name each tool result answers, by message index, where it can be told.

    A result's own `name` wins; else its `tool_call_id` is looked up in the
    nearest assistant turn before it that made a call with that id.
    """
    names: dict[int, str] = {}
    calls: dict[str, str] = {}
    for index, message in enumerate(messages):
        if message.role == "assistant" and message.tool_calls:
            calls = {}
            for call in message.tool_calls:
                function = call.get("function") if isinstance(call, Mapping) else None
                call_id = call.get("id") if isinstance(call, Mapping) else None
                if isinstance(function, Mapping) and isinstance(call_id, str) and call_id:
                    calls[call_id] = str(function.get("name") or "")
        elif _ROLES.get(message.role) == "tool":
            name = message.name or calls.get(message.tool_call_id or "")
            if name:
                names[index] = name
    return names


# -- settings -------------------------------------------------------------------


def _generation(settings: Mapping[str, Any]) -> dict[str, Any]:
    """``options``, ``format``, ``think`` and the passthrough keys of `settings`."""
    out: dict[str, Any] = {}
    options = _options(settings)
    if options:
        out["options"] = options
    format_ = _format(settings.get("response_format"))
    if format_ is not None:
        out["format"] = format_
    think = _think(settings)
    if think is not None:
        out["think"] = think
    for key in _TOP_LEVEL:
        if settings.get(key) is not None:
            out[key] = settings[key]
    for key, value in settings.items():
        if key not in _HANDLED and key not in _TOP_LEVEL:
            out[key] = value  # extra_body: keep_alive, or a member llmchat does not know
    return out


def _options(settings: Mapping[str, Any]) -> dict[str, Any]:
    options: dict[str, Any] = {}
    for name, wire in OPTION_NAMES.items():
        value = settings.get(name)
        if value is not None:
            options[wire] = [value] if wire == "stop" and isinstance(value, str) else value
    extra = settings.get("options")
    if extra is not None:
        if not isinstance(extra, Mapping):
            raise InvalidTypeError(
                f"extra_body.options must be a mapping of Ollama options, got "
                f"{type(extra).__name__}"
            )
        options.update(extra)
    return options


def _format(value: Any) -> Any:
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise InvalidTypeError(f"response_format must be a mapping, got {type(value).__name__}")
    kind = value.get("type")
    if kind == "text":
        return None
    if kind == "json_object":
        return "json"
    schema = value.get("schema")  # llama.cpp's spelling
    wrapper = value.get("json_schema")
    if kind == "json_schema" and isinstance(wrapper, Mapping):
        schema = wrapper.get("schema", schema)
    if kind == "json_schema" and isinstance(schema, Mapping):
        return dict(schema)
    raise InvalidArgumentError(
        f"response_format.type {kind!r} has no Ollama format; use json_object or json_schema "
        "with a schema"
    )


def _think(settings: Mapping[str, Any]) -> bool | str | None:
    effort = settings.get("reasoning_effort")
    if effort is not None:
        if effort == "none":
            return False
        if effort in _LEVELS:
            return str(effort)
        raise InvalidArgumentError(
            f"reasoning_effort {effort!r} has no Ollama think value; use 'none', 'low', "
            "'medium' or 'high'"
        )
    budget = settings.get("reasoning_budget_tokens")
    if budget is None:
        return None
    return bool(budget != 0)


# -- messages -------------------------------------------------------------------


def _model(model: str | None) -> str:
    if not isinstance(model, str) or not model:
        raise InvalidArgumentError(
            "model: Ollama needs a model name; pass model=… to the backend (e.g. 'llama3.2')"
        )
    return model


def _messages(messages: Sequence[Message]) -> list[dict[str, Any]]:
    names = tool_names(messages)
    return [_message(m, index, names.get(index)) for index, m in enumerate(messages)]


def _message(message: Message, index: int, tool_name: str | None) -> dict[str, Any]:
    role = _ROLES.get(message.role)
    if role is None:
        raise InvalidArgumentError(f"messages[{index}].role {message.role!r} has no Ollama role")
    text, images = _content(message.content, index)
    out: dict[str, Any] = {"role": role, "content": text}
    if message.extra:
        out.update(message.extra)
    if images:
        out["images"] = [*out.get("images", []), *images]
    if role == "assistant":
        # An OpenAI-shaped turn's reasoning (what the proxy's faces make of the
        # thinking a client sends back) is Ollama's `thinking`; Ollama would
        # ignore the foreign member, and the model lose its earlier reasoning.
        carried = out.pop("reasoning_content", None)
        thinking = _thinking(message.reasoning_parts) or (
            carried if isinstance(carried, str) else ""
        )
        if thinking:
            out["thinking"] = thinking
        if message.tool_calls:
            out["tool_calls"] = [
                _history_call(call, f"messages[{index}].tool_calls[{position}]")
                for position, call in enumerate(message.tool_calls)
            ]
    elif role == "tool":
        if tool_name:
            out["tool_name"] = tool_name
        if message.tool_call_id:
            out["tool_call_id"] = message.tool_call_id
    return out


def _content(content: Any, index: int) -> tuple[str, list[str]]:
    """A message's content as `(text, base64 images)`; an unknown part raises."""
    if content is None:
        return "", []
    if isinstance(content, str):
        return content, []
    text: list[str] = []
    images: list[str] = []
    for position, part in enumerate(content):
        where = f"messages[{index}].content[{position}]"
        if not isinstance(part, Mapping):
            raise InvalidTypeError(f"{where} must be a content part (a mapping)")
        kind = part.get("type")
        if kind in ("text", "input_text") and isinstance(part.get("text"), str):
            text.append(part["text"])
        elif kind == "image_url":
            images.append(_image(part.get("image_url"), f"{where}.image_url"))
        else:
            raise InvalidArgumentError(
                f"{where}.type {kind!r}: Ollama messages take text and image_url parts only"
            )
    return "".join(text), images


def _image(value: Any, where: str) -> str:
    url = value.get("url") if isinstance(value, Mapping) else value
    if not isinstance(url, str):
        raise InvalidTypeError(f"{where}.url must be a string")
    if not url.startswith(_DATA_PREFIX):
        raise InvalidArgumentError(
            f"{where}.url: Ollama takes images inline only; fetch the image and pass it as a "
            "base64 data: URL"
        )
    meta, _, data = url.partition(",")
    if not meta.endswith(";base64") or not data:
        raise InvalidArgumentError(
            f"{where}.url: a data: URL must be base64 (data:<type>;base64,…)"
        )
    return data


def _thinking(parts: list[dict[str, Any]] | None) -> str:
    """Ollama's own reasoning parts (``thinking``), joined; other dialects' are left out."""
    if not parts:
        return ""
    return "".join(
        part["thinking"]
        for part in parts
        if part.get("dialect") == "ollama" and isinstance(part.get("thinking"), str)
    )


def _history_call(call: Any, where: str) -> dict[str, Any]:
    """An OpenAI-shaped history tool call as Ollama's, arguments as an object."""
    call = mapping_at(call, where)
    function = mapping_at(call.get("function"), f"{where}.function")
    name = name_at(function, f"{where}.function", noun="string")
    out: dict[str, Any] = {
        "function": {"name": name, "arguments": _arguments(function.get("arguments"), where)}
    }
    call_id = call.get("id")
    if isinstance(call_id, str) and call_id:
        out["id"] = call_id
    return out


def _arguments(raw: Any, where: str) -> dict[str, Any]:
    if raw is None or raw == "":
        return {}
    if isinstance(raw, Mapping):
        return dict(raw)
    if isinstance(raw, str):
        try:
            value = fastjson.loads(raw)
        except ValueError:
            value = None
        if isinstance(value, dict):
            return value
    raise InvalidArgumentError(
        f"{where}.function.arguments must be a JSON object (Ollama sends arguments as objects)"
    )


def _tools(
    tools: Sequence[Mapping[str, Any]] | None, tool_choice: str | Mapping[str, Any] | None
) -> list[dict[str, Any]]:
    if tool_choice is not None and tool_choice != "auto":
        if tool_choice == "none":
            return []
        raise InvalidArgumentError(
            f"tool_choice {tool_choice!r}: Ollama cannot force a tool call; use 'auto' or 'none'"
        )
    if tools is None:
        return []
    return [_tool(tool, f"tools[{index}]") for index, tool in enumerate(tool_definitions(tools))]


def _tool(tool: Any, where: str) -> dict[str, Any]:
    tool = mapping_at(tool, where)
    if tool.get("type", "function") != "function":
        raise InvalidArgumentError(f"{where}.type {tool.get('type')!r}: Ollama tools are functions")
    function = mapping_at(tool.get("function"), f"{where}.function")
    name_at(function, f"{where}.function", noun="string")
    return {"type": "function", "function": dict(function)}
