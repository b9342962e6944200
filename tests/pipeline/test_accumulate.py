"""pipeline.accumulate: deltas into state and Chunks, the same for a stream and a body.

Includes the byte-split property (STYLE rule 5): a golden transcript fed in two
pieces at any offset gives the same chunks and state as fed whole.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llmchat.chunk import Chunk
from llmchat.pipeline.accumulate import Accumulator
from llmchat.sse import SSEDecoder, SSEEvent

from ..support.paths import FIXTURES_DIR

FIXTURES = FIXTURES_DIR / "llamacpp"
GOLDEN = (FIXTURES / "tools_prefill_stop_stream.sse.txt").read_bytes()


def ev(payload: Any) -> SSEEvent:
    return SSEEvent(data=json.dumps(payload))


def feed(acc: Accumulator, pieces: list[bytes]) -> list[Chunk]:
    decoder, chunks = SSEDecoder(), []
    for piece in pieces:
        for event in decoder.feed(piece):
            chunks += acc.feed_event(event)
    for event in decoder.flush():
        chunks += acc.feed_event(event)
    return chunks


def outcome(pieces: list[bytes]) -> tuple[Any, ...]:
    acc = Accumulator("chat", keep_raw=False)
    chunks = feed(acc, pieces)
    return (
        [dataclasses.asdict(c) for c in chunks],
        acc.finish_reason,
        acc.done,
        acc.dropped,
        acc.id,
        acc.tool_calls,
        acc.pending,
    )


WHOLE = outcome([GOLDEN])


@pytest.mark.parametrize("path", sorted(FIXTURES.glob("*.sse.txt")), ids=lambda p: p.name)
def test_every_byte_offset_gives_the_same_result(path: Path) -> None:
    data = path.read_bytes()
    whole = outcome([data])
    for k in range(len(data) + 1):
        assert outcome([data[:k], data[k:]]) == whole, k


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=len(GOLDEN)), max_size=8))
def test_any_set_of_cuts_gives_the_same_result(cuts: list[int]) -> None:
    bounds = [0, *sorted(cuts), len(GOLDEN)]
    pieces = [GOLDEN[a:b] for a, b in itertools.pairwise(bounds)]
    assert outcome(pieces) == WHOLE


def test_the_golden_transcript_lands_its_calls_once_on_the_final_chunk() -> None:
    chunks, reason, done, dropped, _, calls, pending = WHOLE
    finals = [c for c in chunks if c["is_final"]]
    assert len(finals) == 1 and finals[0]["tool_calls"] and done and not pending
    assert finals[0]["finish_reason"] == reason and dropped == 0 and calls


def test_blocking_body_is_a_one_payload_stream() -> None:
    message = {
        "content": [{"type": "thinking", "thinking": "hm"}, {"type": "text", "text": "ok"}],
        "tool_calls": [{"id": "c", "function": {"name": "f", "arguments": "{}"}}],
    }
    payload = {
        "id": "x",
        "citations": ["u"],
        "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
    }
    acc = Accumulator("chat", keep_raw=True)
    (chunk,) = acc.feed_payload(payload, whole=True)
    assert chunk.is_final and chunk.finish_reason == "stop"  # the provider's reason
    assert (chunk.content, chunk.thinking, chunk.citations) == ("ok", "hm", ["u"])
    assert chunk.tool_calls and acc.tool_calls == chunk.tool_calls and acc.id == "x"


def test_stream_takes_the_first_non_empty_id_and_citations() -> None:
    acc = Accumulator()
    acc.feed_event(ev({"id": "", "choices": [], "prompt_filter_results": []}))
    acc.feed_event(ev({"id": "real", "citations": ["a"], "choices": [{"delta": {"content": "x"}}]}))
    chunks = acc.feed_event(ev({"id": "real", "choices": [{"delta": {}, "finish_reason": "stop"}]}))
    assert acc.id == "real" and chunks[-1].citations == ["a"] and acc.citations == ["a"]


def test_after_the_finish_only_usage_counts() -> None:
    acc = Accumulator()
    acc.feed_event(ev({"choices": [{"delta": {"content": "a"}, "finish_reason": "length"}]}))
    assert acc.feed_event(ev({"choices": [{"delta": {"content": "late"}}]})) == []
    (usage,) = acc.feed_event(ev({"choices": [], "usage": {"completion_tokens": 3}}))
    assert usage.usage == {"completion_tokens": 3} and not usage.is_final


def test_empty_data_and_comments_are_not_drops() -> None:
    acc = Accumulator()
    acc.feed_event(SSEEvent(data=""))
    acc.feed_event(SSEEvent(comment="keep-alive"))
    acc.feed_event(SSEEvent(data="{not json"))
    acc.feed_event(SSEEvent(undecodable=True, data="x"))
    assert (acc.dropped, acc.undecodable, acc.comments) == (2, 1, 1)


@pytest.mark.parametrize(
    ("after", "said_more"),
    [
        ([], False),
        (["[DONE]", " [DONE] "], False),  # a repeated end is no more than the end
        ([json.dumps({"usage": {"prompt_tokens": 1}})], True),
        (["not json"], True),
        ([SSEEvent(comment=" ping")], True),
        ([SSEEvent(data=json.dumps({"x": 1}))], True),
        ([SSEEvent(data="[DONE]")], False),
    ],
)
def test_what_comes_after_the_end_is_noted_on_either_path(
    after: list[str | SSEEvent], said_more: bool
) -> None:
    # Keep-alive closes a connection whose body said more after its end: one read
    # may carry both, so the accumulator notes it (`after_end`), however it was fed.
    before: list[str | SSEEvent] = [json.dumps({"choices": [{"delta": {"content": "x"}}]})]
    batch = Accumulator("chat")
    batch.feed_events([*before, "[DONE]", *after])
    single = Accumulator("chat")
    for event in [*before, "[DONE]", *after]:
        single.feed_event(event if isinstance(event, SSEEvent) else SSEEvent(data=event))
    assert (batch.done, batch.after_end) == (single.done, single.after_end) == (True, said_more)
