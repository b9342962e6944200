"""Crafted SSE events for the stream_parser tests: OpenAI chunk frames, a run, its fields."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from llmchat.chunk import Chunk
from llmchat.sse import SSEEvent
from llmchat.stream_parser import StreamParser


def run(events: list[SSEEvent], kind: str = "chat") -> tuple[StreamParser, list[Chunk]]:
    """A fresh parser fed `events` in order, and every chunk it produced."""
    parser = StreamParser(kind)
    chunks: list[Chunk] = []
    for event in events:
        chunks += parser.feed(event)
    return parser, chunks


def ev(payload: Any) -> SSEEvent:
    return SSEEvent(data=json.dumps(payload))


DONE = SSEEvent(data="[DONE]")


def frame(delta: dict[str, Any] | None = None, finish: Any = None, **extra: Any) -> SSEEvent:
    """One ``chat.completion.chunk`` event with a single choice."""
    choice = {"index": 0, "delta": {} if delta is None else delta, "finish_reason": finish}
    return ev({"object": "chat.completion.chunk", "model": "m", "choices": [choice], **extra})


def content(text: str, finish: Any = None) -> SSEEvent:
    return frame({"content": text}, finish)


def fields(chunks: list[Chunk]) -> list[dict[str, Any]]:
    """Chunks as plain field dicts: compare by value, never by identity."""
    return [dataclasses.asdict(chunk) for chunk in chunks]


def state(parser: StreamParser) -> dict[str, Any]:
    return {
        "finished": parser.finished,
        "wire_finish_reason": parser.wire_finish_reason,
        "finish_reason": parser.finish_reason,
        "done": parser.done,
        "error": parser.error,
        "dropped": parser.dropped,
        "saw_tool_calls": parser.saw_tool_calls,
        "pending": parser.assembler.pending,
    }


def tool_fragment(index: int | None = None, **fields_: Any) -> dict[str, Any]:
    fragment: dict[str, Any] = {} if index is None else {"index": index}
    function = {k: fields_.pop(k) for k in ("name", "arguments") if k in fields_}
    if function:
        fragment["function"] = function
    return {**fragment, **fields_}


def tools_frame(*fragments: dict[str, Any], finish: Any = None) -> SSEEvent:
    return frame({"tool_calls": list(fragments)}, finish)
