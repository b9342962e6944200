"""stream_parser: SSE events of an OpenAI-compatible stream into `Chunk`s and stream state.

Golden transcripts (real llama-server bodies, see `test_sse`) are checked
against what the test reads out of them with `json` on its own; crafted
events cover what the captures do not: errors, drops, refusals, other
providers' spellings and parallel tool calls.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from llmchat.chunk import Chunk
from llmchat.pipeline.judge import Ending, judge, judge_reason
from llmchat.sse import SSEEvent
from llmchat.stream_parser import StreamParser
from llmchat.tools import ToolCall

from .test_sse import (
    FIXTURES_DIR,
    SHARED_LLAMACPP,
    decode,
    golden_params,
    read_golden,
    split_outcomes,
)

# -- helpers -------------------------------------------------------------------------


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


# -- what the test reads out of a transcript on its own ---------------------------------


@dataclasses.dataclass
class Reading:
    """A transcript read with `json` alone, without llmchat."""

    kind: str
    payloads: list[dict[str, Any]]
    done: bool
    finish_at: int | None  # index in `payloads` of the first real finish reason
    finish_reason: str | None
    content: str
    thinking: str
    usage_after_finish: list[dict[str, Any]]
    calls: list[dict[str, Any]]  # {"index", "id", "name", "arguments"} in the order begun


def read_transcript(data: bytes) -> Reading:
    payloads, done = [], False
    for line in data.decode("utf-8").split("\n"):
        if line == "data: [DONE]":
            done = True
        elif line.startswith("data: "):
            payloads.append(json.loads(line[len("data: ") :]))
    kind = "text" if any(p.get("object") == "text_completion" for p in payloads) else "chat"
    finish_at, reason = None, None
    text, thinking = [], []
    calls: dict[int, dict[str, Any]] = {}
    for i, payload in enumerate(payloads):
        choice = (payload.get("choices") or [None])[0]
        if choice is None:
            continue
        if kind == "text":
            text.append(choice.get("text") or "")
        else:
            delta = choice["delta"]
            text.append(delta.get("content") or "")
            thinking.append(delta.get("reasoning_content") or "")
            for fragment in delta.get("tool_calls") or []:
                call = calls.setdefault(
                    fragment["index"],
                    {"index": fragment["index"], "id": "", "name": "", "arguments": ""},
                )
                call["id"] = call["id"] or fragment.get("id", "")
                function = fragment.get("function", {})
                call["name"] = call["name"] or function.get("name", "")
                call["arguments"] += function.get("arguments", "")
        if choice.get("finish_reason") not in (None, "", "null"):
            finish_at, reason = i, choice["finish_reason"]
            break
    after = payloads[finish_at + 1 :] if finish_at is not None else []
    return Reading(
        kind=kind,
        payloads=payloads,
        done=done,
        finish_at=finish_at,
        finish_reason=reason,
        content="".join(text),
        thinking="".join(thinking),
        usage_after_finish=[p["usage"] for p in after if isinstance(p.get("usage"), dict)],
        calls=list(calls.values()),
    )


def golden(path: Path) -> tuple[Reading, StreamParser, list[Chunk]]:
    data = read_golden(path)
    reading = read_transcript(data)
    parser, chunks = run(decode([data]), reading.kind)
    return reading, parser, chunks


def named_capture(name: str) -> Path:
    path = SHARED_LLAMACPP / name
    if not path.is_file():
        pytest.skip(f"{path} absent: the shared llama-server captures are not in this checkout")
    return path


GOLDEN = golden_params()


# -- golden transcripts --------------------------------------------------------------


@pytest.mark.parametrize("path", GOLDEN)
def test_golden_chunks_are_the_same_for_a_split_at_every_offset(path: Path) -> None:
    # The parser never sees read boundaries, only the events, so it runs once per
    # distinct event sequence the every-offset splits of `test_sse` produced.
    reading, parser, chunks = golden(path)
    outcomes = split_outcomes(path)
    assert sum(len(offsets) for offsets in outcomes.values()) == len(read_golden(path)) + 1
    for events, offsets in outcomes.items():
        other, other_chunks = run(list(events), reading.kind)
        assert fields(other_chunks) == fields(chunks), f"split at byte {offsets[0]}"
        assert state(other) == state(parser), f"split at byte {offsets[0]}"


@pytest.mark.parametrize("path", GOLDEN)
def test_golden_content_and_thinking_match_an_independent_reading(path: Path) -> None:
    reading, parser, chunks = golden(path)
    assert all(isinstance(c.content, str) for c in chunks)
    assert "".join(c.content for c in chunks) == reading.content
    assert "".join(c.thinking or "" for c in chunks) == reading.thinking
    assert all(c.thinking is None or c.thinking for c in chunks)  # never ""
    assert all(c.raw is not None and c.model == c.raw.get("model") for c in chunks)
    assert parser.dropped == 0 and parser.error is None
    assert parser.done is reading.done


@pytest.mark.parametrize("path", GOLDEN)
def test_golden_exactly_one_final_chunk_carries_the_finish_reason(path: Path) -> None:
    reading, parser, chunks = golden(path)
    finals = [c for c in chunks if c.is_final]
    if reading.finish_at is None:
        assert finals == [] and not parser.finished
        assert all(c.finish_reason is None for c in chunks)
        return
    assert len(finals) == 1
    final = finals[0]
    assert final.raw == reading.payloads[reading.finish_at]
    assert parser.wire_finish_reason == reading.finish_reason
    expected = (
        "tool_calls" if reading.calls and reading.finish_reason == "stop" else reading.finish_reason
    )
    assert final.finish_reason == parser.finish_reason == expected
    before = chunks[: chunks.index(final)]
    assert all(c.finish_reason is None for c in before)


@pytest.mark.parametrize("path", GOLDEN)
def test_golden_usage_lands_where_the_transcript_sent_it(path: Path) -> None:
    reading, _, chunks = golden(path)
    finals = [i for i, c in enumerate(chunks) if c.is_final]
    after = chunks[finals[0] + 1 :] if finals else []
    assert [c.usage for c in after] == reading.usage_after_finish
    for chunk in after:  # the include_usage frame: content-less, not final
        assert chunk.content == "" and not chunk.is_final and chunk.thinking is None
        details = chunk.usage.get("prompt_tokens_details") if chunk.usage else None
        assert chunk.cached_tokens == (details or {}).get("cached_tokens")
    for chunk in chunks:  # usage only where the frame had a usage object (v1: the final)
        assert chunk.raw is not None
        usage = chunk.raw.get("usage")
        assert chunk.usage == (usage if isinstance(usage, dict) else None)


@pytest.mark.parametrize("path", GOLDEN)
def test_golden_tool_calls_match_an_independent_reassembly(path: Path) -> None:
    reading, parser, chunks = golden(path)
    landed = [(i, call) for i, c in enumerate(chunks) for call in c.tool_calls or []]
    assert [
        {"id": call.id, "name": call.name, "arguments": call.arguments_json} for _, call in landed
    ] == [{k: call[k] for k in ("id", "name", "arguments")} for call in reading.calls]
    assert all(chunks[i].is_final for i, _ in landed)
    for _, call in landed:
        try:
            decoded = json.loads(call.arguments_json or "")
        except ValueError:
            decoded = None
        assert call.arguments_undecodable is not isinstance(decoded, dict)
        assert call.arguments == (decoded if isinstance(decoded, dict) else {})
    assert parser.saw_tool_calls is bool(reading.calls)
    assert not parser.assembler.pending


def test_golden_parallel_calls_cut_off_by_length() -> None:
    # A known shape, in case the generic reassembly above went wrong in both places.
    path = FIXTURES_DIR / "tools_prefill_stop_stream.sse.txt"
    _, parser, chunks = golden(path)
    (final,) = [c for c in chunks if c.is_final]
    # Calls landed on a `length` finish: the reason stays `length`, not `tool_calls`.
    assert final.finish_reason == "length" == parser.wire_finish_reason
    first, second = final.tool_calls or []
    assert (first.name, first.arguments, first.arguments_undecodable) == (
        "get_time",
        {"tz": "CET"},
        False,
    )
    assert (second.name, second.arguments_json, second.arguments_undecodable) == (
        "get_time",
        '{"tz":',
        True,
    )
    assert first.id != second.id


def test_golden_include_usage_frame_after_the_finish() -> None:
    path = FIXTURES_DIR / "chat_stream_include_usage.sse.txt"
    _, parser, chunks = golden(path)
    final, usage = chunks[-2:]
    assert final.is_final and final.finish_reason == "length" and final.usage is None
    assert not usage.is_final and usage.content == "" and usage.finish_reason is None
    assert usage.usage is not None and usage.usage["completion_tokens"] == 16
    assert usage.cached_tokens == 21
    assert parser.done


def test_golden_v1_completions_stream_is_text() -> None:
    reading, parser, chunks = golden(named_capture("v1_completions_stream.sse.txt"))
    assert reading.kind == "text"
    assert "".join(c.content for c in chunks) == "esor Jamaicasters Fort"
    final = chunks[-1]
    assert final.is_final and final.finish_reason == "length"
    assert final.usage is not None and final.cached_tokens == 0  # 0 is a real value
    assert parser.done


def test_golden_native_completion_stream_is_not_an_openai_stream() -> None:
    # llama.cpp's native /completion: `{"content", "stop", ...}` frames, no `choices`,
    # no [DONE]. The parser takes nothing from it and counts nothing as dropped:
    # the reader would settle it as "Stream closed without [DONE] or a finish reason".
    data = read_golden(named_capture("completion_stream.sse.txt"))
    for kind in ("chat", "text"):
        parser, chunks = run(decode([data]), kind)
        assert chunks == []
        assert parser.dropped == 0 and parser.error is None
        assert not parser.done and not parser.finished and not parser.saw_tool_calls
        assert parser.payload is not None and parser.payload["stop"] is True


def test_golden_disconnect_has_neither_finish_nor_done() -> None:
    reading, parser, chunks = golden(named_capture("disconnect_received_before_close.sse.txt"))
    assert not parser.finished and not parser.done and parser.dropped == 0
    assert "".join(c.content for c in chunks) == reading.content != ""
    assert not any(c.is_final for c in chunks)


# -- finish and what follows it ---------------------------------------------------------


def test_after_the_finish_only_usage_and_model_are_taken() -> None:
    usage = {"prompt_tokens": 9, "completion_tokens": 2, "total_tokens": 11}
    parser, chunks = run(
        [
            content("Hi"),
            frame({}, "stop"),
            content("late text"),
            frame({"reasoning_content": "late thought", "refusal": "late"}),
            tools_frame(tool_fragment(0, id="c", name="f", arguments="{}")),
            frame({}, "length"),  # a second finish changes nothing
            ev({"choices": [], "model": "m2", "usage": usage}),
            DONE,
        ]
    )
    assert [(c.content, c.is_final, c.finish_reason) for c in chunks] == [
        ("Hi", False, None),
        ("", True, "stop"),
        ("", False, None),
    ]
    assert chunks[-1].usage == usage and chunks[-1].model == "m2"
    assert all(c.thinking is None and c.refusal is None and c.tool_calls is None for c in chunks)
    assert (parser.wire_finish_reason, parser.finish_reason) == ("stop", "stop")
    assert not parser.assembler.pending and parser.done


def test_a_usage_frame_with_a_choice_after_the_finish_is_taken_as_usage_only() -> None:
    usage = {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}
    _, chunks = run([content("a", "stop"), frame({"content": "b"}, usage=usage)])
    assert [(c.content, c.usage) for c in chunks] == [("a", None), ("", usage)]


@pytest.mark.parametrize("reason", ["", "null", None])
def test_empty_and_null_finish_reasons_are_no_finish(reason: Any) -> None:
    parser, chunks = run([content("a", reason), frame({}, reason)])
    assert [c.content for c in chunks] == ["a"]
    assert not chunks[0].is_final and chunks[0].finish_reason is None
    assert not parser.finished and parser.wire_finish_reason is None
    parser, chunks = run([content("a", reason), content("b", "stop")])
    assert [(c.content, c.is_final) for c in chunks] == [("a", False), ("b", True)]
    assert parser.wire_finish_reason == "stop"


def test_content_on_the_finish_frame_counts() -> None:
    _, chunks = run([content("a"), content("b", "length")])
    assert [(c.content, c.is_final, c.finish_reason) for c in chunks] == [
        ("a", False, None),
        ("b", True, "length"),
    ]


def test_usage_null_on_every_frame_is_no_usage() -> None:
    # OpenAI with include_usage sends `"usage": null` on every content frame.
    _, chunks = run([frame({"content": "a"}, usage=None), frame({}, "stop", usage=None)])
    assert [(c.content, c.usage, c.cached_tokens) for c in chunks] == [
        ("a", None, None),
        ("", None, None),
    ]


def test_usage_on_the_finish_frame_with_cached_tokens() -> None:
    usage = {"prompt_tokens": 5, "prompt_tokens_details": {"cached_tokens": 0}}
    _, chunks = run([frame({}, "stop", usage=usage)])
    assert chunks[0].is_final and chunks[0].usage == usage and chunks[0].cached_tokens == 0


# -- [DONE], drops, end of body ------------------------------------------------------


def test_done_sets_done_and_nothing_after_it_is_taken() -> None:
    parser, chunks = run([content("a"), DONE, content("b"), frame({}, "stop")])
    assert parser.done and [c.content for c in chunks] == ["a"]
    assert not parser.finished and parser.payload is not None  # read, not acted on


def test_done_with_surrounding_whitespace() -> None:
    assert run([SSEEvent(data=" [DONE] ")])[0].done


def test_a_garbage_frame_is_one_drop_and_the_stream_goes_on() -> None:
    body = b'data: {"choices":[{"delta":{"content":"a"}}]}\n\ndata: {not json\n\n'
    body += (
        b'data: {"choices":[{"delta":{"content":"b"},"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n'
    )
    parser, chunks = run(decode([body]))
    assert parser.dropped == 1
    assert "".join(c.content for c in chunks) == "ab"
    assert parser.finished and parser.done and parser.error is None


@pytest.mark.parametrize("data", ["42", '"text"', "[1, 2]", "null", "true", " "])
def test_json_that_is_not_an_object_is_a_drop(data: str) -> None:
    parser, chunks = run([SSEEvent(data=data), content("a")])
    assert parser.dropped == 1 and [c.content for c in chunks] == ["a"]


def test_an_event_with_empty_data_is_not_dispatched() -> None:
    # WHATWG SSE: an event whose data buffer is empty is not dispatched (not a drop).
    parser, chunks = run([SSEEvent(data=""), content("a")])
    assert parser.dropped == 0 and [c.content for c in chunks] == ["a"]


def test_a_frame_cut_mid_json_at_end_of_body_is_a_drop() -> None:
    body = b'data: {"choices":[{"delta":{"content":"a"}}]}\n\ndata: {"choices":[{"delta":{"con'
    events = decode([body])
    assert events[-1].terminated is False
    parser, chunks = run(events)
    assert parser.dropped == 1 and [c.content for c in chunks] == ["a"]
    assert not parser.done and not parser.finished


def test_an_unterminated_done_at_end_of_body_still_sets_done() -> None:
    # KoboldCpp ends with `data: [DONE]` and no blank line.
    parser, _ = run(
        decode([b'data: {"choices":[{"delta":{},"finish_reason":"stop"}]}\n\ndata: [DONE]'])
    )
    assert parser.done and parser.finished and parser.dropped == 0


def test_an_unterminated_whole_json_frame_is_still_parsed() -> None:
    parser, chunks = run(
        decode([b'data: {"choices":[{"delta":{"content":"a"},"finish_reason":"stop"}]}'])
    )
    assert [(c.content, c.is_final) for c in chunks] == [("a", True)] and parser.dropped == 0


def test_an_undecodable_event_is_a_drop_and_the_next_one_is_not() -> None:
    parser, chunks = run(
        decode([b'data: \xff\xfe\n\ndata: {"choices":[{"delta":{"content":"a"}}]}\n\n'])
    )
    assert parser.dropped == 1 and [c.content for c in chunks] == ["a"]
    parser2, _ = run([SSEEvent(data='{"choices":[]}', undecodable=True)])
    assert parser2.dropped == 1 and parser2.payload is None


def test_comments_and_field_only_events_are_not_frames() -> None:
    parser, chunks = run(
        [SSEEvent(comment="ping"), SSEEvent(comment=""), SSEEvent(event="ping"), SSEEvent(id="3")]
    )
    assert chunks == [] and parser.comments == 2 and parser.dropped == 0
    assert parser.payload is None and not parser.done


def test_payload_is_the_last_json_object() -> None:
    parser = StreamParser()
    payload = {"choices": [{"delta": {"content": "a"}}]}
    parser.feed(ev(payload))
    assert parser.payload == payload
    for event in (SSEEvent(comment="x"), SSEEvent(data="{bad"), DONE):
        parser.feed(event)
        assert parser.payload is None


# -- in-band errors ---------------------------------------------------------------------


def test_a_top_level_error_object_sets_error() -> None:
    parser, chunks = run(
        [content("a"), ev({"error": {"message": "Upstream overloaded", "code": 502}})]
    )
    assert parser.error == "Upstream overloaded"
    assert [c.content for c in chunks] == ["a"]


def test_a_top_level_error_string_sets_error() -> None:
    assert run([ev({"error": "context exceeded"})])[0].error == "context exceeded"


def test_a_choice_error_sets_error() -> None:
    choice = {"index": 0, "delta": {"content": ""}, "error": {"message": "Provider died"}}
    parser, _ = run([ev({"choices": [choice]})])
    assert parser.error == "Provider died"


def test_finish_reason_error_fails_with_the_providers_reason() -> None:
    # The judge decides it now (after the hook), the same on every path.
    parser, chunks = run([content("a"), frame({}, "error")])
    assert parser.wire_finish_reason == "error" and chunks[-1].is_final
    verdict = judge(Ending("done"), parser)
    assert verdict.finished
    _, verdict = judge_reason("error", False)
    assert verdict.error_class == "response" and "error" in (verdict.err or "")


def test_finish_reason_error_keeps_the_providers_message() -> None:
    # OpenRouter's mid-stream error: a top-level error *and* finish_reason "error".
    openrouter = {
        "error": {"code": "server_error", "message": "Provider disconnected"},
        "choices": [{"index": 0, "delta": {"content": ""}, "finish_reason": "error"}],
    }
    assert run([content("a"), ev(openrouter)])[0].error == "Provider disconnected"
    choice = {"index": 0, "delta": {}, "finish_reason": "error", "error": {"message": "Oops"}}
    assert run([ev({"choices": [choice]})])[0].error == "Oops"


def test_the_first_error_is_kept() -> None:
    parser, _ = run([ev({"error": {"message": "first"}}), ev({"error": {"message": "second"}})])
    assert parser.error == "first"


def test_error_null_is_no_error() -> None:
    parser, chunks = run([frame({"content": "a"}, error=None)])
    assert parser.error is None and [c.content for c in chunks] == ["a"]


# -- deltas ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "delta",
    [
        {"role": "assistant"},
        {"role": "assistant", "content": None},
        {"role": "assistant", "content": ""},
        {},
        {"content": None, "reasoning_content": None, "tool_calls": None},
    ],
)
def test_role_only_and_empty_deltas_produce_no_chunk(delta: dict[str, Any]) -> None:
    parser, chunks = run([frame(delta)])
    assert chunks == [] and parser.dropped == 0


def test_reasoning_content_is_thinking() -> None:
    _, chunks = run([frame({"reasoning_content": "hmm"}), frame({"content": "Hi"})])
    assert [(c.content, c.thinking) for c in chunks] == [("", "hmm"), ("Hi", None)]


def test_openrouter_reasoning_is_thinking_and_not_doubled() -> None:
    _, chunks = run(
        [frame({"reasoning": "hmm"}), frame({"reasoning": "a", "reasoning_content": "a"})]
    )
    assert [c.thinking for c in chunks] == ["hmm", "a"]


def test_list_content_with_thinking_parts() -> None:
    parts = [
        {"type": "thinking", "thinking": "Let me see. "},
        {"type": "thinking", "text": "Yes."},
        {"type": "text", "text": "Hello"},
        {"type": "text", "text": " there"},
        "not a part",
    ]
    _, chunks = run([frame({"content": parts})])
    assert [(c.content, c.thinking) for c in chunks] == [("Hello there", "Let me see. Yes.")]


def test_refusal_fragments() -> None:
    _, chunks = run(
        [frame({"refusal": "I can't"}), frame({"refusal": " help."}), frame({}, "stop")]
    )
    assert "".join(c.refusal or "" for c in chunks) == "I can't help."
    assert all(c.content == "" for c in chunks)
    assert [c.refusal for c in chunks] == ["I can't", " help.", None]


def test_text_kind_reads_choice_text() -> None:
    frames = [
        ev({"choices": [{"index": 0, "text": "Hel", "finish_reason": None}]}),
        ev({"choices": [{"index": 0, "text": "lo", "delta": {"content": "x"}}]}),
        ev({"choices": [{"index": 0, "text": None, "finish_reason": "stop"}]}),
    ]
    _, chunks = run(frames, kind="text")
    assert [(c.content, c.is_final) for c in chunks] == [("Hel", False), ("lo", False), ("", True)]


# -- tool calls ----------------------------------------------------------------------


def _pieces(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


def test_two_parallel_calls_split_across_many_frames_land_whole_on_the_finish_chunk() -> None:
    args0 = json.dumps({"city": "Paris", "unit": "celsius", "note": 'é " }'})
    args1 = json.dumps({"query": "weather", "limit": 3})
    frames = [
        frame({"role": "assistant", "content": None}),
        tools_frame(
            tool_fragment(0, id="call_a", type="function", name="get_weather", arguments="")
        ),
        tools_frame(tool_fragment(1, id="call_b", type="function", name="search")),
    ]
    a, b = _pieces(args0, 3), _pieces(args1, 2)
    for i in range(max(len(a), len(b))):  # interleaved, sometimes both in one frame
        fragments = [tool_fragment(0, arguments=a[i])] if i < len(a) else []
        fragments += [tool_fragment(1, arguments=b[i])] if i < len(b) else []
        frames.append(tools_frame(*fragments))
    frames += [frame({}, "stop"), DONE]
    parser, chunks = run(frames)
    assert len(frames) > 20
    (final,) = chunks
    assert final.is_final and final.content == ""
    assert final.tool_calls == [
        ToolCall("get_weather", json.loads(args0), id="call_a", arguments_json=args0),
        ToolCall("search", json.loads(args1), id="call_b", arguments_json=args1),
    ]
    # The final chunk carries the provider's reason verbatim (it used to say
    # "tool_calls"); the Response's decided reason becomes "tool_calls" in the judge.
    assert (final.finish_reason, parser.finish_reason, parser.wire_finish_reason) == (
        "stop",
        "stop",
        "stop",
    )
    assert judge_reason("stop", bool(parser.tool_calls))[0] == "tool_calls"
    assert parser.saw_tool_calls and not parser.assembler.pending and parser.done


def test_calls_finishing_with_tool_calls_and_fragments_on_the_finish_frame() -> None:
    frames = [
        tools_frame(tool_fragment(0, id="c1", name="f", arguments='{"a"')),
        content("text too"),
        tools_frame(tool_fragment(0, arguments=": 1}"), finish="tool_calls"),
    ]
    parser, chunks = run(frames)
    assert [(c.content, c.is_final) for c in chunks] == [("text too", False), ("", True)]
    assert chunks[-1].tool_calls == [ToolCall("f", {"a": 1}, id="c1", arguments_json='{"a": 1}')]
    assert parser.finish_reason == parser.wire_finish_reason == "tool_calls"


def test_ollama_style_index_zero_for_every_parallel_call() -> None:
    frames = [
        tools_frame(tool_fragment(0, id="call_1", name="f", arguments='{"x": 1}')),
        tools_frame(tool_fragment(0, id="call_2", name="g", arguments='{"y": 2}')),
        frame({}, "stop"),
    ]
    _, chunks = run(frames)
    calls = chunks[-1].tool_calls or []
    assert [(c.id, c.name, c.arguments) for c in calls] == [
        ("call_1", "f", {"x": 1}),
        ("call_2", "g", {"y": 2}),
    ]


def test_calls_without_a_finish_stay_pending_and_land_nowhere() -> None:
    parser, chunks = run([tools_frame(tool_fragment(0, id="c", name="f", arguments="{}"))])
    assert chunks == [] and parser.assembler.pending and parser.saw_tool_calls


def test_done_hands_out_calls_sent_without_a_finish() -> None:
    # Spec case 1: [DONE] with no finish reason is the provider's end; the calls land.
    parser, chunks = run([tools_frame(tool_fragment(0, id="c", name="f", arguments="{}")), DONE])
    (final,) = chunks
    assert final.is_final and final.finish_reason is None
    assert final.tool_calls == [ToolCall("f", {}, id="c", arguments_json="{}")]
    assert not parser.assembler.pending and parser.done


def test_a_finish_without_calls_is_not_turned_into_tool_calls() -> None:
    parser, _ = run([content("a", "stop")])
    assert parser.finish_reason == "stop" and not parser.saw_tool_calls


def test_an_empty_tool_calls_list_is_not_a_tool_call() -> None:
    parser, chunks = run([frame({"content": "a", "tool_calls": []}), content("b", "stop")])
    assert [c.content for c in chunks] == ["a", "b"] and chunks[-1].tool_calls is None
    assert not parser.saw_tool_calls


def test_each_call_lands_exactly_once() -> None:
    frames = [
        tools_frame(tool_fragment(0, id="c", name="f", arguments="{}")),
        frame({}, "stop"),
        frame({}, "stop"),
        ev({"choices": [], "usage": {"total_tokens": 1}}),
    ]
    _, chunks = run(frames)
    assert sum(len(c.tool_calls or []) for c in chunks) == 1
