"""Ollama's face of the proxy: pure translation between Ollama and OpenAI bodies.

Requests: `chat_request` (``POST /api/chat``) and `generate_request`
(``POST /api/generate``) turn a decoded Ollama request body into an OpenAI
chat-completions body. Responses: `chat_body`, `generate_body`, `error_body`,
`tags_body`, `ps_body` and `version_body` build what an Ollama client reads.
No I/O, no clock, no randomness: the same input always gives the same output.

Null handling. The official ``ollama`` Python client posts
``Request(...).model_dump(exclude_none=True)``, so it never sends nulls, but
it always sends ``stream`` (False unless asked) and ``tools`` (``[]`` when
none), and drops every falsy message field (an empty ``content`` is simply
absent). Other clients do send nulls, so everywhere a JSON ``null`` means
the same as an absent field, and an empty ``tools``/``images``/``stop`` list
means none.

Client mistakes raise `InvalidArgumentError`/`InvalidTypeError` whose message
starts with the field path as the client wrote it (``messages[2].content``,
``options.num_predict``); the proxy answers them with a 400 `error_body`.

Decisions worth knowing:

- ``stream`` defaults to **true** when absent, as in Ollama.
- ``format: "json"`` becomes ``response_format: {"type": "json_object"}``; a
  schema object becomes ``{"type": "json_schema", "json_schema": {"name":
  "response", "schema": ...}}`` without ``strict``: OpenAI's strict mode
  rejects the ordinary schemas Ollama clients send (no
  ``additionalProperties: false``), and grammar-based servers enforce the
  schema either way.
- ``think``: ``"low"``/``"medium"``/``"high"`` become ``reasoning_effort``;
  ``true`` and ``false`` send nothing. A bare ``true`` names no level, so the
  server's default stands; ``false`` has no portable spelling (``"none"`` is
  refused by most servers), so the proxy should drop any reasoning from the
  answer instead of asking the upstream for none.
- ``options``: ``temperature``, ``top_p``, ``top_k``, ``seed``, ``stop``,
  ``min_p``, ``typical_p``, ``presence_penalty``, ``frequency_penalty`` keep
  their names; ``num_predict`` becomes ``max_tokens`` (zero or negative, which
  Ollama reads as unlimited or fill-the-context, sends nothing);
  ``repeat_penalty`` becomes ``repetition_penalty``. Load-time and
  Ollama-runner options (``_IGNORED_OPTIONS``) and any unknown option are
  ignored, as Ollama itself ignores unknown options.
- ``keep_alive``, ``logprobs`` and ``top_logprobs`` are ignored: the response
  faces carry no log probabilities.
- History: assistant ``thinking`` is dropped (OpenAI messages have no place
  for it and models are not shown their old reasoning). Tool calls get the
  id they came with, else ``call_{message_index}_{call_index}``. A ``tool``
  message answers the earliest unanswered call with its ``tool_name`` (else
  the earliest unanswered call); when nothing is unanswered it is still sent,
  with the id ``call_{message_index}``, so no tool output is silently lost.
- Images are allowed on ``user`` messages only: OpenAI has no image parts
  for other roles.
- ``/api/generate``: ``suffix`` (fill-in-the-middle), ``raw: true`` and the
  image-generation fields ``width``/``height``/``steps`` are refused, since
  a chat upstream cannot honour them and pretending would mislead;
  ``template`` and ``context`` are ignored.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final

from .. import wire_json
from ..errors import InvalidArgumentError, InvalidTypeError
from ..tools import ToolCall
from .fields import integer, json_type, number, require_bool, require_mapping, require_str
from .images import data_url

__all__ = [
    "OLLAMA_VERSION",
    "chat_body",
    "chat_request",
    "error_body",
    "generate_body",
    "generate_request",
    "ps_body",
    "tags_body",
    "version_body",
]

OLLAMA_VERSION: Final = "0.12.0"
"""The Ollama server version `version_body` reports.

A real release recent enough that clients which gate features on the
server version (tools, structured outputs, ``think``) enable them all.
"""

_EPOCH: Final = "1970-01-01T00:00:00Z"
# Far future, so /api/ps never shows a model as about to be unloaded.
_NEVER: Final = "9999-12-31T23:59:59Z"

_ROLES: Final = frozenset({"system", "user", "assistant", "tool"})
_THINK_LEVELS: Final = ("low", "medium", "high")

# Ollama option name -> OpenAI field name, for the options that are plain numbers.
_FLOAT_OPTIONS: Final = {
    "temperature": "temperature",
    "top_p": "top_p",
    "min_p": "min_p",
    "typical_p": "typical_p",
    "repeat_penalty": "repetition_penalty",
    "presence_penalty": "presence_penalty",
    "frequency_penalty": "frequency_penalty",
}
_INT_OPTIONS: Final = {"top_k": "top_k", "seed": "seed"}

_IGNORED_OPTIONS: Final = frozenset(
    {
        "numa",
        "num_ctx",
        "num_batch",
        "num_gpu",
        "main_gpu",
        "low_vram",
        "f16_kv",
        "logits_all",
        "vocab_only",
        "use_mmap",
        "use_mlock",
        "embedding_only",
        "num_thread",
        "num_keep",
        "tfs_z",
        "repeat_last_n",
        "mirostat",
        "mirostat_tau",
        "mirostat_eta",
        "penalize_newline",
    }
)
"""Options that shape the Ollama runner, not the sampling an OpenAI server exposes."""


# -- requests -------------------------------------------------------------


def chat_request(body: Mapping[str, Any]) -> dict[str, Any]:
    """Translate an Ollama ``/api/chat`` request body into an OpenAI chat-completions body.

    The result holds ``model``, ``messages`` and ``stream``, plus only the
    fields the request gave (never a None value).
    """
    require_mapping(body, "body")
    out: dict[str, Any] = {
        "model": _model(body),
        "messages": _messages(body.get("messages")),
        "stream": _stream(body),
    }
    tools = _tools(body.get("tools"))
    if tools:
        out["tools"] = tools
    _common(body, out)
    return out


def generate_request(body: Mapping[str, Any]) -> dict[str, Any]:
    """Translate an Ollama ``/api/generate`` request body into an OpenAI chat-completions body.

    ``system`` becomes a system message and ``prompt`` (with ``images``) the
    user message after it. An empty prompt still yields a user message with
    empty content: Ollama answers such a request by only loading the model, so
    a proxy that wants that behaviour must check for it before calling this.
    """
    require_mapping(body, "body")
    model = _model(body)
    suffix = body.get("suffix")
    if suffix is not None:
        require_str(suffix, "suffix")
        if suffix:
            raise InvalidArgumentError(
                "suffix: fill-in-the-middle is not supported over a chat-completions upstream"
            )
    raw = body.get("raw")
    if raw is not None:
        require_bool(raw, "raw")
        if raw:
            raise InvalidArgumentError(
                "raw: raw prompts are not supported; the upstream applies its own chat template"
            )
    for name in ("width", "height", "steps"):
        if body.get(name) is not None:
            raise InvalidArgumentError(f"{name}: image generation is not supported")
    messages: list[dict[str, Any]] = []
    system = body.get("system")
    if system is not None:
        require_str(system, "system")
        if system:
            messages.append({"role": "system", "content": system})
    prompt = body.get("prompt")
    if prompt is None:
        prompt = ""
    require_str(prompt, "prompt")
    messages.append({"role": "user", "content": _with_images(prompt, body.get("images"), "images")})
    out: dict[str, Any] = {"model": model, "messages": messages, "stream": _stream(body)}
    _common(body, out)
    return out


# -- responses ------------------------------------------------------------


def chat_body(
    *,
    model: str,
    text: str,
    thinking: str | None,
    tool_calls: list[ToolCall],
    done_reason: str,
    input_tokens: int | None,
    output_tokens: int | None,
    total_duration_ns: int | None = None,
    created_at: str,
) -> dict[str, Any]:
    """The non-streaming ``/api/chat`` response.

    ``thinking`` and ``tool_calls`` appear only when non-empty,
    ``total_duration`` only when given; token counts default to 0.
    """
    message: dict[str, Any] = {"role": "assistant", "content": text}
    if thinking:
        message["thinking"] = thinking
    if tool_calls:
        message["tool_calls"] = [call.to_ollama() for call in tool_calls]
    out: dict[str, Any] = {"model": model, "created_at": created_at, "message": message}
    _finish(out, done_reason, input_tokens, output_tokens, total_duration_ns)
    return out


def generate_body(
    *,
    model: str,
    text: str,
    thinking: str | None,
    done_reason: str,
    input_tokens: int | None,
    output_tokens: int | None,
    total_duration_ns: int | None = None,
    created_at: str,
) -> dict[str, Any]:
    """The non-streaming ``/api/generate`` response.

    No ``context``: it is deprecated in Ollama, optional in its clients, and
    the proxy could only ever send back an empty one.
    """
    out: dict[str, Any] = {"model": model, "created_at": created_at, "response": text}
    if thinking:
        out["thinking"] = thinking
    _finish(out, done_reason, input_tokens, output_tokens, total_duration_ns)
    return out


def error_body(message: str) -> dict[str, Any]:
    """Ollama's error body: ``{"error": message}``."""
    return {"error": message}


def tags_body(models: list[str]) -> dict[str, Any]:
    """The ``/api/tags`` body listing `models`, in the order given.

    Size, digest and details are unknown behind an OpenAI upstream, so they
    are zero or empty, and ``modified_at`` is the epoch (deterministic).
    """
    return {
        "models": [
            {
                "name": name,
                "model": name,
                "modified_at": _EPOCH,
                "size": 0,
                "digest": "",
                "details": _details(),
            }
            for name in models
        ]
    }


def ps_body(models: list[str]) -> dict[str, Any]:
    """The ``/api/ps`` body: `models` shown as loaded, never expiring."""
    return {
        "models": [
            {
                "name": name,
                "model": name,
                "size": 0,
                "digest": "",
                "details": _details(),
                "expires_at": _NEVER,
                "size_vram": 0,
            }
            for name in models
        ]
    }


SHOW_ARCHITECTURE: Final = "llama"
"""The ``general.architecture`` `/api/show` names. Clients find the context
length under ``<architecture>.context_length``; the real architecture is unknown
behind an OpenAI upstream, and ``llama`` is the one clients assume most."""


def show_body(context_length: int | None) -> dict[str, Any]:
    """The ``/api/show`` body: what a client can learn about the upstream model.

    `context_length` (from the upstream's probe) goes under
    ``model_info["llama.context_length"]`` and as ``num_ctx`` in
    ``parameters``, where Ollama clients read the window they may fill; it is
    left out when unknown. Capabilities are ``completion`` and ``tools``.
    """
    info: dict[str, Any] = {"general.architecture": SHOW_ARCHITECTURE}
    parameters = ""
    if context_length is not None:
        info[f"{SHOW_ARCHITECTURE}.context_length"] = int(context_length)
        parameters = f"num_ctx {int(context_length)}"
    return {
        "modified_at": _EPOCH,
        "template": "",
        "modelfile": "",
        "license": "",
        "details": _details(),
        "model_info": info,
        "parameters": parameters,
        "capabilities": ["completion", "tools"],
    }


def version_body() -> dict[str, Any]:
    """The ``/api/version`` body: ``{"version": OLLAMA_VERSION}``."""
    return {"version": OLLAMA_VERSION}


def _details() -> dict[str, Any]:
    return {
        "parent_model": "",
        "format": "",
        "family": "",
        "families": [],
        "parameter_size": "",
        "quantization_level": "",
    }


def _finish(
    out: dict[str, Any],
    done_reason: str,
    input_tokens: int | None,
    output_tokens: int | None,
    total_duration_ns: int | None,
) -> None:
    out["done"] = True
    out["done_reason"] = done_reason
    if total_duration_ns is not None:
        out["total_duration"] = int(total_duration_ns)
    out["prompt_eval_count"] = int(input_tokens or 0)
    out["eval_count"] = int(output_tokens or 0)


# -- request pieces -------------------------------------------------------


def _model(body: Mapping[str, Any]) -> str:
    model = body.get("model")
    if model is None:
        raise InvalidArgumentError("model: is required")
    model = require_str(model, "model")
    if not model:
        raise InvalidArgumentError("model: must not be empty")
    return model


def _stream(body: Mapping[str, Any]) -> bool:
    stream = body.get("stream")
    if stream is None:
        return True
    return require_bool(stream, "stream")


def _common(body: Mapping[str, Any], out: dict[str, Any]) -> None:
    """Add what `/api/chat` and `/api/generate` share: format, options, think."""
    response_format = _format(body.get("format"))
    if response_format is not None:
        out["response_format"] = response_format
    _options(body.get("options"), out)
    effort = _think(body.get("think"))
    if effort is not None:
        out["reasoning_effort"] = effort


def _format(value: Any) -> dict[str, Any] | None:
    if value is None or value == "":
        return None
    if value == "json":
        return {"type": "json_object"}
    if isinstance(value, str):
        raise InvalidArgumentError(f"format: must be 'json' or a JSON schema object, not {value!r}")
    if not isinstance(value, Mapping):
        raise InvalidTypeError(
            f"format: must be 'json' or a JSON schema object, not {json_type(value)}"
        )
    return {"type": "json_schema", "json_schema": {"name": "response", "schema": dict(value)}}


def _think(value: Any) -> str | None:
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, str):
        if value in _THINK_LEVELS:
            return value
        raise InvalidArgumentError(
            f"think: must be true, false, 'low', 'medium' or 'high', not {value!r}"
        )
    raise InvalidTypeError(f"think: must be a boolean or a level string, not {json_type(value)}")


def _options(options: Any, out: dict[str, Any]) -> None:
    if options is None:
        return
    require_mapping(options, "options")
    for name, target in _FLOAT_OPTIONS.items():
        value = options.get(name)
        if value is not None:
            out[target] = number(value, f"options.{name}")
    for name, target in _INT_OPTIONS.items():
        value = options.get(name)
        if value is not None:
            out[target] = integer(value, f"options.{name}")
    num_predict = options.get("num_predict")
    if num_predict is not None:
        limit = integer(num_predict, "options.num_predict")
        if limit > 0:
            out["max_tokens"] = limit
    stop = _stop(options.get("stop"))
    if stop is not None:
        out["stop"] = stop


def _stop(value: Any) -> str | list[str] | None:
    if value is None:
        return None
    if isinstance(value, str):
        return value if value else None
    if not isinstance(value, list):
        raise InvalidTypeError(
            f"options.stop: must be a string or a list of strings, not {json_type(value)}"
        )
    for index, item in enumerate(value):
        require_str(item, f"options.stop[{index}]")
    return list(value) if value else None


def _tools(value: Any) -> list[dict[str, Any]]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise InvalidTypeError(f"tools: must be a list, not {json_type(value)}")
    for index, tool in enumerate(value):
        require_mapping(tool, f"tools[{index}]")
    return [dict(tool) for tool in value]


def _messages(value: Any) -> list[dict[str, Any]]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise InvalidTypeError(f"messages: must be a list, not {json_type(value)}")
    out: list[dict[str, Any]] = []
    # (id, name) of every assistant tool call not yet answered, oldest first.
    unanswered: list[tuple[str, str]] = []
    for index, message in enumerate(value):
        where = f"messages[{index}]"
        require_mapping(message, where)
        role = message.get("role")
        if role is None:
            raise InvalidArgumentError(f"{where}.role: is required")
        require_str(role, f"{where}.role")
        if role not in _ROLES:
            raise InvalidArgumentError(
                f"{where}.role: must be 'system', 'user', 'assistant' or 'tool', not {role!r}"
            )
        content = message.get("content")
        if content is None:
            content = ""
        require_str(content, f"{where}.content")
        images = message.get("images")
        if images and role != "user":
            raise InvalidArgumentError(f"{where}.images: only user messages may carry images")
        item: dict[str, Any] = {"role": role, "content": content}
        if role == "user":
            item["content"] = _with_images(content, images, f"{where}.images")
        elif role == "assistant":
            calls = _tool_calls(message.get("tool_calls"), index)
            if calls:
                item["tool_calls"] = calls
                unanswered.extend((call["id"], call["function"]["name"]) for call in calls)
        elif role == "tool":
            item["tool_call_id"] = _answered_id(message, index, unanswered)
        out.append(item)
    return out


def _with_images(content: str, images: Any, where: str) -> str | list[dict[str, Any]]:
    """`content` alone, or text and image parts when there are images."""
    if images is None:
        return content
    if not isinstance(images, list):
        raise InvalidTypeError(f"{where}: must be a list of base64 strings")
    if not images:
        return content
    parts: list[dict[str, Any]] = []
    if content:
        parts.append({"type": "text", "text": content})
    for position, image in enumerate(images):
        url = data_url(image, field=f"{where}[{position}]")
        parts.append({"type": "image_url", "image_url": {"url": url}})
    return parts


def _tool_calls(value: Any, message_index: int) -> list[dict[str, Any]]:
    where = f"messages[{message_index}].tool_calls"
    if value is None:
        return []
    if not isinstance(value, list):
        raise InvalidTypeError(f"{where}: must be a list, not {json_type(value)}")
    calls: list[dict[str, Any]] = []
    for position, call in enumerate(value):
        at = f"{where}[{position}]"
        require_mapping(call, at)
        function = call.get("function")
        if function is None:
            raise InvalidArgumentError(f"{at}.function: is required")
        require_mapping(function, f"{at}.function")
        name = function.get("name")
        if name is None:
            raise InvalidArgumentError(f"{at}.function.name: is required")
        require_str(name, f"{at}.function.name")
        if not name:
            raise InvalidArgumentError(f"{at}.function.name: must not be empty")
        call_id = call.get("id")
        if call_id is not None:
            require_str(call_id, f"{at}.id")
        calls.append(
            {
                "id": call_id or f"call_{message_index}_{position}",
                "type": "function",
                "function": {
                    "name": name,
                    "arguments": _arguments(function.get("arguments"), f"{at}.function.arguments"),
                },
            }
        )
    return calls


def _arguments(value: Any, where: str) -> str:
    """Compact, key-sorted JSON text of a call's arguments object."""
    if value is None:
        value = {}
    elif isinstance(value, str):
        # Some clients echo the OpenAI spelling back; accept it if it holds an object.
        value = _decode_object(value, where)
    if not isinstance(value, Mapping):
        raise InvalidTypeError(f"{where}: must be a JSON object, not {json_type(value)}")
    try:
        return wire_json.encode_data(value).decode("utf-8")
    except (InvalidArgumentError, InvalidTypeError) as exc:
        raise type(exc)(f"{where}: {exc}") from None


def _decode_object(text: str, where: str) -> Any:
    try:
        decoded = json.loads(text) if text.strip() else {}
    except ValueError:
        raise InvalidArgumentError(f"{where}: is not valid JSON") from None
    if not isinstance(decoded, dict):
        raise InvalidArgumentError(f"{where}: must be a JSON object")
    return decoded


def _answered_id(message: Mapping[str, Any], index: int, unanswered: list[tuple[str, str]]) -> str:
    """The id of the call a ``tool`` message answers; removes it from `unanswered`."""
    where = f"messages[{index}]"
    explicit = message.get("tool_call_id")
    if explicit is not None:
        explicit = require_str(explicit, f"{where}.tool_call_id")
    tool_name = message.get("tool_name")
    if tool_name is not None:
        require_str(tool_name, f"{where}.tool_name")
    if explicit:
        unanswered[:] = [entry for entry in unanswered if entry[0] != explicit]
        return explicit
    for position, (call_id, name) in enumerate(unanswered):
        if tool_name and name == tool_name:
            del unanswered[position]
            return call_id
    if unanswered:
        return unanswered.pop(0)[0]
    return f"call_{index}"
