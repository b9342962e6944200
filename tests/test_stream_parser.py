"""stream_parser: SSE events of an OpenAI-compatible stream into `Chunk`s and stream state.

Golden transcripts (real llama-server bodies, see `test_sse`) are checked
against what the test reads out of them with `json` on its own, then the
finish and what follows it; crafted events (test_stream_parser_events.py) cover
what the captures do not: errors, drops, refusals, other providers' spellings
and parallel tool calls.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from llmchat.chunk import Chunk
from llmchat.stream_parser import StreamParser

from .support.golden_sse import (
    FIXTURES_DIR,
    SHARED_LLAMACPP,
    decode,
    golden_params,
    read_golden,
    split_outcomes,
)
from .support.stream_events import (
    DONE,
    content,
    ev,
    fields,
    frame,
    run,
    state,
    tool_fragment,
    tools_frame,
)

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
