"""What an Ollama client reads from the proxy: the answer and metadata bodies.

Pure builders, no I/O and no clock (times are passed in): `final_body`
(`chat_body`, `generate_body`), `error_body`, `tags_body`, `ps_body`, `show_body`,
and `version_body` (a tool call's entry is `protocols.ollama.ollama_tool_call`).
Request translation is `translate`'s; what the upstream can tell about its
model is `models`'.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from ....protocols.ollama import ollama_tool_call
from ....tools import ToolCall
from ...error_shapes import ollama_error_body as error_body

__all__ = [
    "OLLAMA_VERSION",
    "SHOW_ARCHITECTURE",
    "chat_body",
    "error_body",
    "final_body",
    "generate_body",
    "ps_body",
    "show_body",
    "tags_body",
    "version_body",
]

OLLAMA_VERSION: Final = "0.12.0"
"""The Ollama server version `version_body` reports.

A real release recent enough that clients which gate features on the
server version (tools, structured outputs, ``think`` levels, tool-call ids,
``/api/embed`` ``dimensions``) enable them all: VS Code Copilot asks for at
least 0.6.4. Plain ``MAJOR.MINOR.PATCH``, as Ollama's own releases are.
"""

SHOW_ARCHITECTURE: Final = "llama"
"""The ``general.architecture`` `/api/show` names. Clients find the context
length under ``<architecture>.context_length``; the real architecture is unknown
behind an OpenAI upstream, and ``llama`` is the one clients assume most."""

_EPOCH: Final = "1970-01-01T00:00:00Z"
# Far future, so /api/ps never shows a model as about to be unloaded.
_NEVER: Final = "9999-12-31T23:59:59Z"


def final_body(
    shape: str,
    *,
    model: str,
    text: str,
    thinking: str | None,
    done_reason: str,
    input_tokens: int | None,
    output_tokens: int | None,
    created_at: str,
    tool_calls: Sequence[ToolCall] = (),
    total_duration_ns: int | None = None,
    cached_tokens: int | None = None,
) -> dict[str, Any]:
    """The non-streaming ``/api/chat`` (`shape` ``"chat"``) or ``/api/generate`` response.

    ``thinking`` and (chat) ``tool_calls`` appear only when non-empty,
    ``total_duration`` and ``prompt_eval_cached_count`` only when given;
    token counts default to 0. Raises `UndecodableArguments` for a call whose
    arguments were not a JSON object: no client may run it with ``{}``.
    A generate body has no ``context``: it is deprecated in Ollama, optional
    in its clients, and the proxy could only ever send back an empty one.
    """
    out: dict[str, Any] = {"model": model, "created_at": created_at}
    if shape == "chat":
        message: dict[str, Any] = {"role": "assistant", "content": text}
        if thinking:
            message["thinking"] = thinking
        if tool_calls:
            message["tool_calls"] = [ollama_tool_call(c, i) for i, c in enumerate(tool_calls)]
        out["message"] = message
    else:
        out["response"] = text
        if thinking:
            out["thinking"] = thinking
    # The closing fields every final chat/generate object carries.
    out["done"] = True
    out["done_reason"] = done_reason
    if total_duration_ns is not None:
        out["total_duration"] = int(total_duration_ns)
    out["prompt_eval_count"] = int(input_tokens or 0)
    if cached_tokens is not None:
        out["prompt_eval_cached_count"] = int(cached_tokens)
    out["eval_count"] = int(output_tokens or 0)
    return out


def chat_body(**fields: Any) -> dict[str, Any]:
    """`final_body` for ``/api/chat``."""
    return final_body("chat", **fields)


def generate_body(**fields: Any) -> dict[str, Any]:
    """`final_body` for ``/api/generate``."""
    return final_body("generate", **fields)


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
                "details": details(),
            }
            for name in models
        ]
    }


def ps_body(models: list[str], context_length: int | None = None) -> dict[str, Any]:
    """The ``/api/ps`` body: `models` shown as loaded, never expiring.

    Current Ollama's shape: name, model, size, digest, details, expires_at,
    size_vram and ``context_length`` (the upstream's window, 0 when unknown,
    as Ollama writes a number there always).
    """
    return {
        "models": [
            {
                "name": name,
                "model": name,
                "size": 0,
                "digest": "",
                "details": details(),
                "expires_at": _NEVER,
                "size_vram": 0,
                "context_length": int(context_length or 0),
            }
            for name in models
        ]
    }


def show_body(
    context_length: int | None, capabilities: Sequence[str] = ("completion", "tools")
) -> dict[str, Any]:
    """The ``/api/show`` body: what a client can learn about the upstream model.

    `context_length` goes under ``model_info["llama.context_length"]`` (beside
    ``general.architecture``) and as ``num_ctx`` in ``parameters``, where Ollama
    clients read the window they may fill; it is left out when unknown.
    `capabilities` are Ollama's words: ``completion``, ``tools``, ``thinking``,
    ``vision``, ``embedding``.
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
        "details": details(),
        "model_info": info,
        "parameters": parameters,
        "capabilities": list(capabilities),
    }


def version_body() -> dict[str, Any]:
    """The ``/api/version`` body: ``{"version": OLLAMA_VERSION}``."""
    return {"version": OLLAMA_VERSION}


def details() -> dict[str, Any]:
    """A model's ``details``: empty, as nothing of it is known behind an OpenAI upstream."""
    return {
        "parent_model": "",
        "format": "",
        "family": "",
        "families": [],
        "parameter_size": "",
        "quantization_level": "",
    }
