"""A parsed llmchat `Chunk` as the decoded OpenAI chunk the faces' stream translators take."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..chunk import Chunk

__all__ = ["openai_chunk"]


def openai_chunk(
    chunk: Chunk, *, thinking: bool = True, response_id: str | None = None
) -> dict[str, Any]:
    """One llmchat `Chunk` as the decoded OpenAI chunk a stream translator takes.

    Built from the parsed fields rather than `chunk.raw`: the upstream's
    parser has already assembled tool calls, so each lands whole on the
    finish chunk (as one fragment per call), and no fragment is seen twice.
    `thinking=False` leaves reasoning out (a client that asked not to see it).
    The id is `response_id` (the Response's, as streamed Chunks keep no `raw`
    by default), else one a kept `raw` carries.
    """
    delta: dict[str, Any] = {}
    if chunk.content:
        delta["content"] = chunk.content
    if thinking and chunk.thinking:
        delta["reasoning_content"] = chunk.thinking
    if chunk.tool_calls:
        delta["tool_calls"] = [
            {"index": i, **call.to_openai()} for i, call in enumerate(chunk.tool_calls)
        ]
    out: dict[str, Any] = {}
    raw = chunk.raw
    if response_id is not None:
        out["id"] = response_id
    elif raw is not None and type(raw.get("id")) is str:
        out["id"] = raw["id"]
    if chunk.model:
        out["model"] = chunk.model
    if delta or chunk.is_final:
        out["choices"] = [
            {
                "index": 0,
                "delta": delta,
                "finish_reason": chunk.finish_reason if chunk.is_final else None,
            }
        ]
    else:
        out["choices"] = []
    if chunk.usage is not None:
        out["usage"] = _usage(chunk.usage, chunk.cached_tokens)
    return out


def _usage(usage: Mapping[str, Any], cached: int | None) -> dict[str, Any]:
    """`usage` with the parsed cache count where OpenAI keeps it.

    Another dialect's usage block (Anthropic's ``cache_read_input_tokens``,
    Gemini's ``cachedContentTokenCount``, Ollama's) says it in its own words,
    which the translators, reading OpenAI's, would miss.
    """
    out = dict(usage)
    if cached is not None:
        details = out.get("prompt_tokens_details")
        details = dict(details) if isinstance(details, Mapping) else {}
        details.setdefault("cached_tokens", cached)
        out["prompt_tokens_details"] = details
    return out
