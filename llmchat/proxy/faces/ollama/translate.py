"""Ollama's face of the proxy: pure translation between Ollama and OpenAI bodies.

Requests: `chat_request` (``POST /api/chat``) and `generate_request`
(``POST /api/generate``) turn a decoded Ollama request body into an OpenAI
chat-completions body. The bodies an Ollama client reads (`chat_body`,
`generate_body`, `error_body`, `tags_body`, `ps_body`, `show_body`,
`version_body`) are `shapes`' and importable from here too; the chat
history is `history`'s. No I/O, no clock, no randomness: the same
input always gives the same output.

Null handling. The official ``ollama`` Python client posts
``Request(...).model_dump(exclude_none=True)``, so it never sends nulls, but
it always sends ``stream`` (False unless asked) and ``tools`` (``[]`` when
none), and drops every falsy message field (an empty ``content`` is simply
absent). Other clients do send nulls, so everywhere a JSON ``null`` means
the same as an absent field, and an empty ``tools``/``images``/``stop`` list
means none.

Liberal by design (the rule of every face): a field, option, message field,
role, ``format`` or ``think`` value this face does not know is dropped or
folded into what a chat upstream understands, with one DEBUG line on the
``llmchat.proxy`` logger naming the field path (never its value), and never a
400: Ollama clients add fields with every release. A 400 is left only where
the request cannot be served: a malformed body (a wrong JSON type for a field
the face translates, a tool call without a name, arguments that are not a JSON
object), bad image data, or a feature a chat upstream cannot honour
(``suffix``, ``raw``, image generation). Such mistakes raise
`InvalidArgumentError`/`InvalidTypeError` whose message starts with the field
path as the client wrote it (``messages[2].content``, ``options.num_predict``);
the proxy answers them with a 400 `error_body`.

Decisions worth knowing:

- ``stream`` defaults to **true** when absent, as in Ollama.
- ``format: "json"`` becomes ``response_format: {"type": "json_object"}``; a
  schema object becomes ``{"type": "json_schema", "json_schema": {"name":
  "response", "schema": ...}}`` without ``strict``: OpenAI's strict mode
  rejects the ordinary schemas Ollama clients send (no
  ``additionalProperties: false``), and grammar-based servers enforce the
  schema either way.
- ``format``: any other value is dropped (the answer comes as free text).
- ``think``: ``"low"``/``"medium"``/``"high"`` become ``reasoning_effort``
  (any other value is dropped: the server's default stands);
  ``true`` sends nothing: it names no level, so the server's default stands.
  ``false`` has no portable spelling (``"none"`` is refused by many servers),
  so it sends only the `no_reasoning` members the caller passes for an
  upstream known to take them (the proxy passes ``reasoning_effort: "none"``
  for llama.cpp, which then renders its template with thinking off); the
  proxy also drops any reasoning from the answer.
- ``options``: ``temperature``, ``top_p``, ``top_k``, ``seed``, ``stop``,
  ``min_p``, ``typical_p``, ``presence_penalty``, ``frequency_penalty`` keep
  their names; ``num_predict`` becomes ``max_tokens`` (zero or negative, which
  Ollama reads as unlimited or fill-the-context, sends nothing);
  ``repeat_penalty`` becomes ``repetition_penalty``. Load-time and
  Ollama-runner options (``_IGNORED_OPTIONS``) and any unknown option are
  dropped with one DEBUG line each, as Ollama itself ignores unknown options.
- ``keep_alive``, ``logprobs`` and ``top_logprobs`` are dropped: the response
  faces carry no log probabilities.
- History: assistant ``thinking`` goes upstream as that turn's
  ``reasoning_content`` (llama-server keeps reasoning across tool calls, and
  models that think between calls need it back). A role Ollama lacks is
  folded: ``developer`` to ``system``, any other to ``user``. Tool calls get the
  id they came with, else ``call_{message_index}_{call_index}``. A ``tool``
  message answers the earliest unanswered call with its ``tool_name`` (else
  the earliest unanswered call); when nothing is unanswered it is still sent,
  with the id ``call_{message_index}``, so no tool output is silently lost.
- Images: OpenAI has image parts on ``user`` messages only, so a ``tool``
  result's images follow its run of tool messages as one user turn, and an
  ``assistant`` or ``system`` message's images are dropped.
- ``/api/generate``: ``suffix`` (fill-in-the-middle), ``raw: true`` and the
  image-generation fields ``width``/``height``/``steps`` are refused, since
  a chat upstream cannot honour them and pretending would mislead;
  ``template`` and ``context`` are ignored.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final

from ....errors import InvalidArgumentError, InvalidTypeError
from ...field_checks import (
    integer,
    json_type,
    number,
    optional_list,
    require_bool,
    require_mapping,
    require_str,
)
from .history import ignored, log, with_images
from .history import messages as history
from .shapes import (
    OLLAMA_VERSION,
    SHOW_ARCHITECTURE,
    chat_body,
    error_body,
    generate_body,
    ps_body,
    show_body,
    tags_body,
    version_body,
)

__all__ = [
    "OLLAMA_VERSION",
    "SHOW_ARCHITECTURE",
    "chat_body",
    "chat_request",
    "error_body",
    "generate_body",
    "generate_request",
    "ps_body",
    "show_body",
    "tags_body",
    "version_body",
]

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

_OPTIONS: Final = frozenset({*_FLOAT_OPTIONS, *_INT_OPTIONS, "num_predict", "stop"})
"""The options that reach the upstream; any other is dropped (one DEBUG line)."""
_COMMON_FIELDS: Final = frozenset({"model", "stream", "format", "options", "think"})
_CHAT_FIELDS: Final = _COMMON_FIELDS | {"messages", "tools"}
_GENERATE_FIELDS: Final = _COMMON_FIELDS | {
    "prompt",
    "system",
    "images",
    "suffix",
    "raw",
    "width",
    "height",
    "steps",
}
"""The fields each route translates; any other (``keep_alive``, ``logprobs``,
``template``, ``context``, a field newer than this proxy) is dropped with one
DEBUG line naming it, never a 400."""


# -- requests -------------------------------------------------------------


def chat_request(
    body: Mapping[str, Any], *, no_reasoning: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """Translate an Ollama ``/api/chat`` request body into an OpenAI chat-completions body.

    The result holds ``model``, ``messages`` and ``stream``, plus only the
    fields the request gave (never a None value). `no_reasoning` is what
    ``think: false`` adds: the members that turn reasoning off upstream.
    """
    require_mapping(body, "body")
    ignored(body, _CHAT_FIELDS)
    out: dict[str, Any] = {
        "model": _model(body),
        "messages": history(body.get("messages")),
        "stream": _stream(body),
    }
    tools = _tools(body.get("tools"))
    if tools:
        out["tools"] = tools
    _common(body, out, no_reasoning)
    return out


def generate_request(
    body: Mapping[str, Any], *, no_reasoning: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """Translate an Ollama ``/api/generate`` request body into an OpenAI chat-completions body.

    ``system`` becomes a system message and ``prompt`` (with ``images``) the
    user message after it. An empty prompt still yields a user message with
    empty content: Ollama answers such a request by only loading the model, so
    a proxy that wants that behaviour must check for it before calling this.
    `no_reasoning` is as for `chat_request`.
    """
    require_mapping(body, "body")
    ignored(body, _GENERATE_FIELDS)
    model = _model(body)
    _refuse_if_set(
        body,
        "suffix",
        require_str,
        "fill-in-the-middle is not supported over a chat-completions upstream",
    )
    _refuse_if_set(
        body,
        "raw",
        require_bool,
        "raw prompts are not supported; the upstream applies its own chat template",
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
    messages.append({"role": "user", "content": with_images(prompt, body.get("images"), "images")})
    out: dict[str, Any] = {"model": model, "messages": messages, "stream": _stream(body)}
    _common(body, out, no_reasoning)
    return out


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


def _common(
    body: Mapping[str, Any], out: dict[str, Any], no_reasoning: Mapping[str, Any] | None
) -> None:
    """Add what `/api/chat` and `/api/generate` share: format, options, think."""
    response_format = _format(body.get("format"))
    if response_format is not None:
        out["response_format"] = response_format
    _options(body.get("options"), out)
    think = body.get("think")
    effort = _think(think)
    if effort is not None:
        out["reasoning_effort"] = effort
    elif think is False and no_reasoning:
        out.update(no_reasoning)


def _format(value: Any) -> dict[str, Any] | None:
    if value is None or value == "":
        return None
    if value == "json":
        return {"type": "json_object"}
    if not isinstance(value, Mapping):
        # Not a format Ollama knows: the upstream answers in free text instead.
        log.debug("format dropped (not 'json' or a schema object)")
        return None
    return {"type": "json_schema", "json_schema": {"name": "response", "schema": dict(value)}}


def _think(value: Any) -> str | None:
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, str) and value in _THINK_LEVELS:
        return value
    # A level newer than this proxy: the server's default effort stands.
    log.debug("think dropped (not a boolean or 'low', 'medium', 'high')")
    return None


def _options(options: Any, out: dict[str, Any]) -> None:
    if options is None:
        return
    require_mapping(options, "options")
    ignored(options, _OPTIONS, "options.")
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


def _refuse_if_set(
    body: Mapping[str, Any], name: str, require: Callable[[Any, str], Any], why: str
) -> None:
    """Refuse a field the upstream cannot honour when it is set (non-empty, true); absent or
    empty it changes nothing and passes, once its type is right."""
    value = body.get(name)
    if value is not None and require(value, name):
        raise InvalidArgumentError(f"{name}: {why}")


def _tools(value: Any) -> list[dict[str, Any]]:
    value = optional_list(value, "tools")
    for index, tool in enumerate(value):
        require_mapping(tool, f"tools[{index}]")
    return [dict(tool) for tool in value]
