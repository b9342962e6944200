"""Shared helpers for the Ollama tests: native lines, NDJSON replies, a pure stream run."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from llmchat.chunk import Chunk
from llmchat.dialects.base import Dialect
from llmchat.dialects.ollama import OllamaChat
from llmchat.ndjson import NDJSONDecoder
from llmchat.pipeline.accumulate import Accumulator
from llmchat.testing import Reply, Write
from llmchat.testing.script import Framing, dumps

NDJSON = {"Content-Type": "application/x-ndjson"}
HI = [{"role": "user", "content": "Hi"}]


def chat_line(
    content: str = "",
    *,
    thinking: str | None = None,
    calls: list[dict[str, Any]] | None = None,
    done: bool = False,
    **top: Any,
) -> dict[str, Any]:
    """One ``/api/chat`` line (``done: true`` lines add what `top` gives: counts, reason)."""
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if thinking is not None:
        message["thinking"] = thinking
    if calls is not None:
        message["tool_calls"] = calls
    return {
        "model": "m",
        "created_at": "2025-01-01T00:00:00Z",
        "message": message,
        "done": done,
        **top,
    }


def final(
    reason: str | None = "stop", prompt: int = 7, completion: int = 3, **top: Any
) -> dict[str, Any]:
    """The ``done: true`` line with counts and durations."""
    extra: dict[str, Any] = {} if reason is None else {"done_reason": reason}
    return chat_line(
        done=True,
        **extra,
        total_duration=2_000_000_000,
        load_duration=500_000_000,
        prompt_eval_count=prompt,
        prompt_eval_duration=250_000_000,
        eval_count=completion,
        eval_duration=1_000_000_000,
        **top,
    )


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"function": {"name": name, "arguments": arguments}}


def ndjson(lines: Iterable[dict[str, Any] | bytes | str]) -> list[bytes]:
    """Each line as NDJSON bytes (a dict encoded, bytes/str as given plus a newline)."""
    out = []
    for line in lines:
        if isinstance(line, dict):
            out.append(dumps(line).encode("utf-8") + b"\n")
        else:
            data = line.encode("utf-8") if isinstance(line, str) else line
            out.append(data)
    return out


def ndjson_reply(
    lines: Iterable[dict[str, Any] | bytes | str],
    framing: Framing = "chunked",
    *,
    extra_steps: Sequence[Any] = (),
) -> Reply:
    steps: list[Any] = [Write(data) for data in ndjson(lines)]
    return Reply(200, NDJSON, framing=framing, steps=[*steps, *extra_steps])


def run_pieces(
    pieces: Iterable[bytes], dialect: Dialect | None = None
) -> tuple[list[Chunk], Accumulator]:
    """A stream's bytes, in these pieces, through NDJSON framing and the accumulator."""
    acc = Accumulator(dialect or OllamaChat(), keep_raw=False)
    decoder = NDJSONDecoder(1 << 20)
    chunks: list[Chunk] = []
    for piece in pieces:
        for event in decoder.feed(piece):
            if not acc.done:
                chunks += acc.feed_event(event)
    for event in decoder.flush():
        if not acc.done:
            chunks += acc.feed_event(event)
    return chunks, acc
