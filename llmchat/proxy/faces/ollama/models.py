"""What the upstream can tell about its model, for Ollama's ``/api/show`` and ``/api/ps``.

A llama.cpp ``llama-server`` answers ``GET /props`` with its chat template's
capabilities (``chat_template_caps``), the template itself, its input
``modalities`` and the slot's context size; its ``GET /v1/models`` entry adds
``architecture.input_modalities`` and ``meta.n_ctx``. Other servers say less:
vLLM's model entry has ``max_model_len``, OpenRouter's ``context_length`` and
``supported_parameters``. `model_info` reads whatever is there, in one bounded
side request each (never raises).

When the upstream cannot tell (a hosted API, a server without ``/props``):
``completion`` and ``tools`` are claimed, as almost every chat-completions
server takes tools and clients such as VS Code Copilot only offer a model for
agent work when ``tools`` is listed; ``thinking`` and ``vision`` are not
claimed, since a client that believes them sends requests that then fail.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from ...upstream import Upstream

__all__ = ["ModelInfo", "model_info", "speaks_llama_cpp"]

log = logging.getLogger("llmchat.proxy")

# Words in a chat template that only a reasoning template uses (the Qwen3 and
# DeepSeek families' <think>, their enable_thinking switch, the reasoning
# field of past turns, gpt-oss's effort levels).
_THINKING_MARKERS: Final = ("<think>", "enable_thinking", "reasoning_content", "reasoning_effort")


@dataclass(frozen=True)
class ModelInfo:
    """What `model_info` learnt: the window, Ollama capability words, the server kind."""

    context_length: int | None
    capabilities: tuple[str, ...]
    llama_cpp: bool
    """True when the upstream answered ``GET /props`` as llama-server does."""


def model_info(upstream: Upstream, model: str) -> ModelInfo:
    """What `upstream` says about `model` (its ``/models`` entry of that id, else the only one)."""
    limits = upstream.limits()
    context = limits.get("context_length")
    context_length = context if _count(context) else None
    props = _props(upstream)
    entry = _model_entry(upstream, model)
    if context_length is None:
        context_length = _entry_context(entry)
    return ModelInfo(context_length, _capabilities(props, entry), props is not None)


def speaks_llama_cpp(upstream: Upstream) -> bool:
    """True when the upstream answers ``GET /props`` as llama-server does (one side request)."""
    return _props(upstream) is not None


def _props(upstream: Upstream) -> Mapping[str, Any] | None:
    payload, note = upstream.probe_json("/props")
    if note is not None or not isinstance(payload, Mapping):
        return None
    if not isinstance(payload.get("chat_template_caps"), Mapping) and not isinstance(
        payload.get("default_generation_settings"), Mapping
    ):
        return None  # some other server's /props
    return payload


def _model_entry(upstream: Upstream, model: str) -> Mapping[str, Any] | None:
    _, payload, note = upstream.get_json("/models")
    data = payload.get("data") if isinstance(payload, Mapping) else None
    if note is not None or not isinstance(data, list):
        return None
    entries = [item for item in data if isinstance(item, Mapping)]
    for item in entries:
        if item.get("id") == model:
            return item
    return entries[0] if len(entries) == 1 else None


def _entry_context(entry: Mapping[str, Any] | None) -> int | None:
    if entry is None:
        return None
    meta = entry.get("meta")
    candidates = [
        meta.get("n_ctx") if isinstance(meta, Mapping) else None,
        entry.get("max_model_len"),
        entry.get("context_length"),
    ]
    return next((value for value in candidates if _count(value)), None)


def _capabilities(
    props: Mapping[str, Any] | None, entry: Mapping[str, Any] | None
) -> tuple[str, ...]:
    tools, thinking, vision = True, False, False
    if props is not None:
        caps = props.get("chat_template_caps")
        if isinstance(caps, Mapping):
            tools = bool(caps.get("supports_tools") or caps.get("supports_tool_calls"))
            thinking = bool(caps.get("supports_reasoning_effort"))
        template = props.get("chat_template")
        if isinstance(template, str) and any(mark in template for mark in _THINKING_MARKERS):
            thinking = True
        modalities = props.get("modalities")
        vision = isinstance(modalities, Mapping) and modalities.get("vision") is True
    if entry is not None:
        architecture = entry.get("architecture")
        inputs = architecture.get("input_modalities") if isinstance(architecture, Mapping) else None
        if isinstance(inputs, list) and "image" in inputs:
            vision = True
        parameters = entry.get("supported_parameters")
        if props is None and isinstance(parameters, list):  # OpenRouter says what it takes
            tools = "tools" in parameters
            thinking = thinking or "reasoning" in parameters
    words = ["completion"]
    words += ["tools"] if tools else []
    words += ["thinking"] if thinking else []
    words += ["vision"] if vision else []
    return tuple(words)


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0
