"""The per-read path: `feed_data` + `Accumulator.feed_events` give what one event at a time gives.

The runner decodes each read's bytes with the decoders' `feed_data` (a plain
event as its data `str`) and hands the whole batch to `feed_events`, which
reads the common frame in line and skips `_lift_usage` for a plain frame when
the default hook would only have set the model. The reference is the path
one event at a time: `feed` + `feed_event`, every payload lifted. Both must
give the same chunks, the same state and the same lifted fields, however the
body is cut into reads (one frame a read, all of it in one, a frame split
across two).
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llmchat.chunk import Chunk
from llmchat.dialects.anthropic import AnthropicMessages
from llmchat.dialects.base import Dialect
from llmchat.dialects.ollama import OllamaChat
from llmchat.dialects.openai_chat import OpenAIChat
from llmchat.dialects.responses import ResponsesDialect
from llmchat.ndjson import NDJSONDecoder
from llmchat.pipeline.accumulate import Accumulator
from llmchat.pipeline.think_tags import ThinkTags
from llmchat.sse import SSEDecoder

from ..support.paths import FIXTURES_DIR

LLAMACPP = FIXTURES_DIR / "llamacpp"


def sse(*events: Any, name: str | None = None) -> bytes:
    head = f"event: {name}\n" if name else ""
    return b"".join(
        (head + "data: " + (e if isinstance(e, str) else json.dumps(e)) + "\n\n").encode()
        for e in events
    )


def content(text: str, **extra: Any) -> dict[str, Any]:
    return {
        "id": "c1",
        "model": "m-1",
        "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": None}],
        **extra,
    }


# An OpenAI stream with every kind of event the batch must hand on unchanged.
ODD_OPENAI = b"".join(
    [
        b"\xef\xbb\xbf: a comment first\n\n",
        sse({"id": "", "model": "m-0", "choices": [{"index": 0, "delta": {"role": "assistant"}}]}),
        sse(content("Hel"), content("lo <thi"), content("nk>hmm</think> there")),
        b"data: {not json\n\n",
        b"data: \xff\xfe\n\n",
        b": keep-alive\n\n",
        b'data: {"id": "c1",\ndata: "model": "m-2", "choices": []}\n\n',
        sse(content("!", model="m-3")),
        sse(
            {
                "id": "c1",
                "choices": [
                    {
                        "index": 0,
                        "delta": {
                            "tool_calls": [
                                {
                                    "index": 0,
                                    "id": "t1",
                                    "function": {"name": "f", "arguments": '{"a":'},
                                }
                            ]
                        },
                    }
                ],
            }
        ),
        sse(content("", model=""), content("x", citations=["u"])),
        sse(
            {
                "id": "c1",
                "choices": [
                    {
                        "index": 0,
                        "delta": {"tool_calls": [{"index": 0, "function": {"arguments": "1}"}}]},
                        "finish_reason": "tool_calls",
                    }
                ],
            }
        ),
        sse(content("late")),
        sse({"id": "c1", "model": "m-4", "choices": [], "usage": {"prompt_tokens": 3}}),
        sse("[DONE]"),
        sse(content("after the end")),
        b'data: {"cut": ',
    ]
)

ANTHROPIC = b"".join(
    [
        sse(
            {
                "type": "message_start",
                "message": {"id": "msg_1", "model": "claude", "usage": {"input_tokens": 5}},
            },
            name="message_start",
        ),
        sse(
            {"type": "content_block_start", "index": 0, "content_block": {"type": "text"}},
            name="content_block_start",
        ),
        *[
            sse(
                {
                    "type": "content_block_delta",
                    "index": 0,
                    "delta": {"type": "text_delta", "text": t},
                },
                name="content_block_delta",
            )
            for t in ("Hi", " the", "re")
        ],
        sse({"type": "content_block_stop", "index": 0}, name="content_block_stop"),
        sse(
            {
                "type": "message_delta",
                "delta": {"stop_reason": "end_turn"},
                "usage": {"output_tokens": 3},
            },
            name="message_delta",
        ),
        sse({"type": "message_stop"}, name="message_stop"),
    ]
)

RESPONSES = b"".join(
    [
        sse({"type": "response.created", "response": {"id": "r1", "model": "gpt"}}),
        *[sse({"type": "response.output_text.delta", "delta": t}) for t in ("a", "b", "c")],
        sse(
            {
                "type": "response.completed",
                "response": {
                    "id": "r1",
                    "model": "gpt",
                    "status": "completed",
                    "usage": {"input_tokens": 2, "output_tokens": 3, "total_tokens": 5},
                },
            }
        ),
    ]
)

OLLAMA = b"".join(
    (json.dumps(line) + "\n").encode()
    for line in [
        {"model": "llama", "message": {"role": "assistant", "content": "Hi"}, "done": False},
        {"model": "llama", "message": {"role": "assistant", "content": " there"}, "done": False},
        {"model": "llama2", "message": {"role": "assistant", "content": "!"}, "done": False},
        {
            "model": "llama",
            "done": True,
            "done_reason": "stop",
            "prompt_eval_count": 4,
            "eval_count": 3,
        },
    ]
)


@dataclass
class Case:
    dialect: Callable[[], Dialect]
    body: bytes
    think_tags: bool = False

    def decoder(self) -> SSEDecoder | NDJSONDecoder:
        if self.dialect().framing == "ndjson":
            return NDJSONDecoder()
        return SSEDecoder()


CASES = {
    "openai-odd": Case(OpenAIChat, ODD_OPENAI),
    "openai-odd-think-tags": Case(OpenAIChat, ODD_OPENAI, think_tags=True),
    "llamacpp-tools": Case(
        OpenAIChat, (LLAMACPP / "tools_prefill_stop_stream.sse.txt").read_bytes()
    ),
    "llamacpp-usage": Case(
        OpenAIChat, (LLAMACPP / "chat_stream_include_usage.sse.txt").read_bytes()
    ),
    "llamacpp-reasoning": Case(
        OpenAIChat, (LLAMACPP / "reasoning_budget_4_stream.sse.txt").read_bytes(), think_tags=True
    ),
    "anthropic": Case(AnthropicMessages, ANTHROPIC),
    "responses": Case(ResponsesDialect, RESPONSES),
    "ollama": Case(OllamaChat, OLLAMA),
}


class Target:
    """What `_lift_usage` writes: the Response's usage fields and model."""

    def __init__(self) -> None:
        self.model: str | None = None
        self.fields: dict[str, Any] = {}


def default_lift(acc: Accumulator, target: Target) -> Callable[[dict[str, Any]], None]:
    """What the default `_lift_usage` does with one payload, onto `target`."""

    def lift(payload: dict[str, Any]) -> None:
        for name, value in acc.dialect.usage_fields(payload).items():
            if name == "model":
                target.model = value
            else:
                target.fields[name] = value

    return lift


def new_acc(case: Case) -> Accumulator:
    return Accumulator(
        case.dialect(), keep_raw=True, think_tags=ThinkTags() if case.think_tags else None
    )


def state(acc: Accumulator, chunks: list[Chunk], target: Target) -> dict[str, Any]:
    return {
        "chunks": chunks,
        "finish": (acc.finish_reason, acc.provider_reason, acc.done, acc.error),
        "counts": (acc.dropped, acc.undecodable, acc.comments),
        "calls": acc.tool_calls,
        "id": acc.id,
        "citations": acc.citations,
        "parts": acc.parts,
        "model": target.model,
        "usage": target.fields,
    }


def one_by_one(case: Case) -> dict[str, Any]:
    """The reference: every byte of the body in one read, each event alone, each payload lifted."""
    acc, target = new_acc(case), Target()
    lift = default_lift(acc, target)
    decoder, chunks = case.decoder(), []
    for event in [*decoder.feed(case.body), *decoder.flush()]:
        chunks += acc.feed_event(event)
        if acc.payload is not None:
            lift(acc.payload)
    return state(acc, chunks, target)


def batched(case: Case, reads: list[bytes], *, named: bool) -> dict[str, Any]:
    """The runner's path: each read's events as one batch (`feed_data` + `feed_events`)."""
    acc, target = new_acc(case), Target()
    lift = default_lift(acc, target)
    decoder, chunks = case.decoder(), []
    for data in reads:
        chunks += acc.feed_events(decoder.feed_data(data), lift, target if named else None)
    chunks += acc.feed_events(decoder.flush(), lift, target if named else None)
    return state(acc, chunks, target)


def frames_of(body: bytes, framing_ndjson: bool) -> list[bytes]:
    sep = b"\n" if framing_ndjson else b"\n\n"
    parts = body.split(sep)
    return [part + sep for part in parts[:-1]] + ([parts[-1]] if parts[-1] else [])


@pytest.mark.parametrize("named", [False, True], ids=["lift-all", "plain-model-set"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_a_batch_gives_what_one_event_at_a_time_gives(name: str, named: bool) -> None:
    case = CASES[name]
    expected = one_by_one(case)
    ndjson = case.dialect().framing == "ndjson"
    assert batched(case, [case.body], named=named) == expected  # every frame in one read
    assert batched(case, frames_of(case.body, ndjson), named=named) == expected  # one a read
    assert expected["chunks"], "the case makes chunks"


@settings(max_examples=60, deadline=None)
@given(name=st.sampled_from(sorted(CASES)), cuts=st.lists(st.floats(0, 1), max_size=4))
def test_reads_that_split_frames_anywhere_give_the_same(name: str, cuts: list[float]) -> None:
    case = CASES[name]
    offsets = sorted({int(c * len(case.body)) for c in cuts} | {0, len(case.body)})
    reads = [case.body[a:b] for a, b in itertools.pairwise(offsets) if b > a]
    assert batched(case, reads, named=True) == one_by_one(case)


def test_a_plain_frame_is_not_lifted_when_its_model_is_all_it_reports() -> None:
    acc, target = Accumulator(OpenAIChat()), Target()
    lifted: list[dict[str, Any]] = []
    events = [content("a"), content("b", model="m-2"), content("c", usage={"prompt_tokens": 1})]
    chunks = acc.feed_events([json.dumps(e) for e in events], lifted.append, target)
    assert [c.content for c in chunks] == ["a", "b", "c"]
    assert target.model == "m-2"  # set directly by the two plain frames, in order
    assert [p["choices"][0]["delta"]["content"] for p in lifted] == ["c"]  # usage: lifted


def test_feed_data_gives_a_plain_frames_data_and_any_other_event_whole() -> None:
    decoder = SSEDecoder()
    assert decoder.feed_data(b": hi\n\n")[0].comment == "hi"  # type: ignore[union-attr]
    assert decoder.feed_data(b"data: x\n\n") == ["x"]
    assert decoder.feed_data(b"event: e\ndata: y\n\n") == ["y"]
    assert decoder.feed_data(b"data: a\n\ndata: b\n\nda") == ["a", "b"]
    (rest,) = decoder.feed_data(b"ta: c\n\n")  # read by the line rules: an SSEEvent
    assert rest == "c" or (not isinstance(rest, str) and rest.data == "c")
    (bad,) = decoder.feed_data(b"data: \xff\n\n")
    assert not isinstance(bad, str) and bad.undecodable
    (cut,) = decoder.flush() or [None]
    assert cut is None
    assert NDJSONDecoder().feed_data(b'{"a": 1}\n\n{"b"') == ['{"a": 1}']
