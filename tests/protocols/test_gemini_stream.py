"""GeminiStream: an OpenAI chunk stream rewritten as Gemini GenerateContentResponse chunks."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest

from llmchat.protocols import gemini
from llmchat.protocols.gemini import GeminiStream
from llmchat.protocols.gemini_parts import encode_ordered, gemini_status
from llmchat.protocols.translator import MALFORMED

from .test_protocol_templates import _by_delta, _by_parts
from .translator_reference import chunk_sequence

FRAMINGS = ("sse", "array")


class _FixedUuid:
    hex = "f" * 32


@pytest.fixture(autouse=True)
def fixed_response_id(monkeypatch: pytest.MonkeyPatch) -> None:
    """The id a stream makes when the upstream gave none, the same in every run."""
    monkeypatch.setattr(gemini.uuid, "uuid4", _FixedUuid)


def frames(data: bytes, framing: str) -> list[bytes]:
    """Each chunk's JSON as written, checking the framing: SSE events or array elements."""
    if framing == "sse":
        events = data.split(b"\r\n\r\n")
        out = []
        for event in events[:-1]:
            assert event.startswith(b"data: ") and b"\n" not in event
            out.append(event[len(b"data: ") :])
        if events[-1]:  # the bare error object, last, ended by one newline
            assert events[-1].startswith(b'{"error":') and events[-1].endswith(b"}\n")
            out.append(events[-1][:-1])
        return out
    assert data.startswith(b"[") and data.endswith(b"\n]")
    assert isinstance(json.loads(data), list)  # the whole body is one JSON array
    return data[1:-2].split(b"\n,\r\n")


def chunks_of(data: bytes, framing: str) -> list[dict[str, Any]]:
    return [json.loads(frame) for frame in frames(data, framing)]


def run(chunks: list[Any], framing: str = "sse", **kwargs: Any) -> tuple[GeminiStream, bytes]:
    stream = GeminiStream("req-model", framing=framing, **kwargs)
    out = stream.start()
    for chunk in chunks:
        out += stream.delta(chunk)
    return stream, out + stream.finish()


def choice(delta: dict[str, Any], reason: str | None = None, **top: Any) -> dict[str, Any]:
    return {**top, "choices": [{"index": 0, "delta": delta, "finish_reason": reason}]}


def parts(chunk: dict[str, Any]) -> list[dict[str, Any]]:
    (candidate,) = chunk["candidates"]
    assert candidate["index"] == 0 and candidate["content"]["role"] == "model"
    return list(candidate["content"].get("parts", []))


def usage(prompt: int, completion: int, **more: Any) -> dict[str, Any]:
    return {
        "choices": [],
        "usage": {"prompt_tokens": prompt, "completion_tokens": completion, **more},
    }


CALL_PIECES = [
    choice(
        {
            "tool_calls": [
                {"index": 0, "id": "call_a", "function": {"name": "read", "arguments": ""}}
            ]
        }
    ),
    choice({"tool_calls": [{"index": 0, "function": {"arguments": '{"path": "a'}}]}),
    choice(
        {
            "tool_calls": [
                {"index": 1, "id": "call_b", "function": {"name": "ls", "arguments": "{}"}}
            ]
        }
    ),
    choice({"tool_calls": [{"index": 0, "function": {"arguments": '.txt", "n": [1, 2]}'}}]}),
]


@pytest.mark.parametrize("framing", FRAMINGS)
def test_text_and_thoughts_become_parts_and_the_last_chunk_finishes(framing: str) -> None:
    stream, data = run(
        [
            choice(
                {"role": "assistant", "reasoning_content": "let me see"},
                id="chatcmpl-1",
                model="up",
            ),
            choice({"reasoning": "…", "content": "Hi"}),
            choice({"content": ' "there"\n'}),
            choice({}, "stop"),
            usage(7, 12, total_tokens=19, completion_tokens_details={"reasoning_tokens": 4}),
        ],
        framing,
    )
    got = chunks_of(data, framing)
    assert [parts(c) for c in got] == [
        [{"text": "let me see", "thought": True}],
        [{"text": "…", "thought": True}, {"text": "Hi"}],
        [{"text": ' "there"\n'}],
        [{"text": ""}],
    ]
    assert all(c["modelVersion"] == "up" and c["responseId"] == "chatcmpl-1" for c in got)
    assert [list(c) for c in got[:-1]] == [["candidates", "modelVersion", "responseId"]] * 3
    last = got[-1]
    assert list(last) == ["candidates", "usageMetadata", "modelVersion", "responseId"]
    assert last["candidates"][0]["finishReason"] == "STOP"
    # Gemini's candidates count leaves the thoughts out; the total is the same.
    assert last["usageMetadata"] == {
        "promptTokenCount": 7,
        "candidatesTokenCount": 8,
        "totalTokenCount": 19,
        "thoughtsTokenCount": 4,
    }
    assert stream.usage() == (7, 12, len(b' "there"\n') + 2)
    assert not stream.errored


def test_sse_framing_is_data_lines_ended_by_crlf_crlf() -> None:
    _, data = run([choice({"content": "a"}, id="r1")])
    assert data == (
        b'data: {"candidates":[{"content":{"parts":[{"text":"a"}],"role":"model"},"index":0}],'
        b'"modelVersion":"req-model","responseId":"r1"}\r\n\r\n'
        b'data: {"candidates":[{"content":{"parts":[{"text":""}],"role":"model"},'
        b'"finishReason":"STOP","index":0}],"modelVersion":"req-model","responseId":"r1"}\r\n\r\n'
    )
    assert GeminiStream("m").content_type == "text/event-stream"


def test_array_framing_is_the_growing_json_array_gemini_writes() -> None:
    stream = GeminiStream("m", framing="array")
    assert stream.content_type == "application/json"
    assert stream.start() == b"["
    first = stream.text_delta("a", chunk_id="r")
    second = stream.text_delta("b")
    assert first.startswith(b'{"candidates"') and second.startswith(b'\n,\r\n{"candidates"')
    assert stream.finish().endswith(b"}\n]")
    # Without start() (a caller that writes no prologue) the first chunk opens the array.
    alone = GeminiStream("m", framing="array")
    assert alone.finish().startswith(b'[{"candidates"')


def test_thinking_false_hides_the_reasoning() -> None:
    _, data = run(
        [choice({"reasoning_content": "secret"}), choice({"content": "ok", "reasoning": "x"})],
        thinking=False,
    )
    assert b"secret" not in data and b'"thought"' not in data
    assert [parts(c) for c in chunks_of(data, "sse")] == [[{"text": "ok"}], [{"text": ""}]]


@pytest.mark.parametrize("framing", FRAMINGS)
def test_tool_calls_in_pieces_go_out_whole_when_the_upstream_finishes(framing: str) -> None:
    _, data = run(
        [choice({"content": "Reading."}), *CALL_PIECES, choice({}, "tool_calls"), usage(3, 5)],
        framing,
    )
    got = chunks_of(data, framing)
    assert [parts(c) for c in got] == [
        [{"text": "Reading."}],
        [
            {"functionCall": {"name": "read", "args": {"path": "a.txt", "n": [1, 2]}}},
            {"functionCall": {"name": "ls", "args": {}}},
        ],
        [{"text": ""}],
    ]
    assert "finishReason" not in got[1]["candidates"][0]
    assert got[-1]["candidates"][0]["finishReason"] == "STOP"  # Gemini has no tool_calls reason
    assert got[-1]["usageMetadata"] == {
        "promptTokenCount": 3,
        "candidatesTokenCount": 5,
        "totalTokenCount": 8,
    }


@pytest.mark.parametrize(
    ("reason", "gemini"),
    [
        ("stop", "STOP"),
        ("length", "MAX_TOKENS"),
        ("content_filter", "SAFETY"),
        ("tool_calls", "STOP"),
        ("function_call", "STOP"),
        ("something_new", "OTHER"),
        (None, "STOP"),
    ],
)
def test_each_finish_reason(reason: str | None, gemini: str) -> None:
    chunks = [choice({"content": "x"})] + ([choice({}, reason)] if reason else [])
    _, data = run(chunks)
    assert chunks_of(data, "sse")[-1]["candidates"][0]["finishReason"] == gemini


def test_finish_arguments_win_and_cached_tokens_are_counted() -> None:
    stream = GeminiStream("m")
    stream.delta(usage(10, 4, prompt_tokens_details={"cached_tokens": 6}))
    last = chunks_of(stream.finish("MAX_TOKENS", 11, 5), "sse")[-1]
    assert last["candidates"][0]["finishReason"] == "MAX_TOKENS"
    assert last["usageMetadata"] == {
        "promptTokenCount": 11,
        "candidatesTokenCount": 5,
        "totalTokenCount": 16,
        "cachedContentTokenCount": 6,
    }
    assert stream.usage() == (11, 5, 0)


def test_usage_in_other_spellings() -> None:
    stream = GeminiStream("m")
    stream.delta(
        {
            "usage": {
                "input_tokens": 2,
                "output_tokens": 9,
                "output_tokens_details": {"reasoning_tokens": 9},
            }
        }
    )
    meta = chunks_of(stream.finish(), "sse")[-1]["usageMetadata"]
    assert meta == {
        "promptTokenCount": 2,
        "candidatesTokenCount": 0,
        "totalTokenCount": 11,
        "thoughtsTokenCount": 9,
    }


def test_no_usage_no_usage_metadata() -> None:
    _, data = run([choice({"content": "x"}, "stop")])
    assert all("usageMetadata" not in c for c in chunks_of(data, "sse"))


@pytest.mark.parametrize("framing", FRAMINGS)
@pytest.mark.parametrize("arguments", ['{"path": "a.tx', "[1, 2]", '"text"'])
def test_undecodable_arguments_end_with_the_error_never_with_empty_args(
    framing: str, arguments: str
) -> None:
    stream = GeminiStream("m", framing=framing)
    out = stream.start() + stream.delta(choice({"content": "before"}))
    call = {"index": 0, "id": "c", "function": {"name": "write", "arguments": arguments}}
    out += stream.delta(choice({"content": " same chunk", "tool_calls": [call]}, "tool_calls"))
    assert stream.errored
    assert stream.finish() == b"" and stream.delta(choice({"content": "late"})) == b""
    got = chunks_of(out, framing)
    assert [parts(c) for c in got[:-1]] == [[{"text": "before"}], [{"text": " same chunk"}]]
    assert got[-1] == {"error": {"code": 500, "message": MALFORMED, "status": "INTERNAL"}}
    assert b"functionCall" not in out and b"write" not in out


def test_a_call_without_a_name_is_an_error() -> None:
    stream = GeminiStream("m")
    call = {"index": 0, "function": {"arguments": "{}"}}
    data = stream.delta(choice({"tool_calls": [call]}, "tool_calls"))
    assert stream.errored and chunks_of(data, "sse")[-1]["error"]["message"] == MALFORMED


def test_a_stream_ending_inside_a_tool_call_is_an_error() -> None:
    stream, data = run([CALL_PIECES[0]])
    assert stream.errored
    assert chunks_of(data, "sse")[-1]["error"]["message"].startswith("Upstream stream ended")
    assert b"functionCall" not in data


@pytest.mark.parametrize("framing", FRAMINGS)
def test_error_after_output_is_the_gemini_error_in_band(framing: str) -> None:
    stream = GeminiStream("m", framing=framing)
    out = stream.start() + stream.text_delta("partial")
    end = stream.error_event(503, "The upstream is unavailable")
    assert stream.errored and stream.error_event(500, "again") == b"" and stream.finish() == b""
    if framing == "sse":
        # Bare, as Vertex writes it and js-genai raises it; no blank line after it.
        assert end == (
            b'{"error":{"code":503,"message":"The upstream is unavailable",'
            b'"status":"UNAVAILABLE"}}\n'
        )
    else:
        assert end.startswith(b'\n,\r\n{"error"') and end.endswith(b"}\n]")
    assert chunks_of(out + end, framing)[-1]["error"]["status"] == "UNAVAILABLE"


def test_an_error_as_the_first_thing_still_frames() -> None:
    assert json.loads(GeminiStream("m", framing="array").error_event(502, MALFORMED)) == [
        {"error": {"code": 500, "message": MALFORMED, "status": "INTERNAL"}}
    ]
    assert json.loads(GeminiStream("m").error_event(429, "slow down"))["error"]["code"] == 429


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        (400, (400, "INVALID_ARGUMENT")),
        (413, (400, "INVALID_ARGUMENT")),
        (502, (500, "INTERNAL")),
        (504, (504, "DEADLINE_EXCEEDED")),
        (499, (499, "CANCELLED")),
    ],
)
def test_status_pairs(given: int, expected: tuple[int, str]) -> None:
    assert gemini_status(given) == expected


def test_unreadable_chunks_and_lone_surrogates_end_with_malformed() -> None:
    for bad in (["not a chunk"], [{"choices": "x"}], [choice({"content": "bad \ud800"})]):
        stream, data = run(bad)
        assert stream.errored, bad
        assert chunks_of(data, "sse")[-1]["error"]["message"] == MALFORMED
    stream = GeminiStream("m")
    stream.text_delta("ok")
    assert b"error" in stream.text_delta("bad \udfff") and stream.errored
    # A message UTF-8 cannot carry is replaced by fixed words.
    assert b"Upstream error" in GeminiStream("m").error_event(500, "oops \ud800")


def test_the_response_id_is_fixed_by_the_first_chunk() -> None:
    stream = GeminiStream("m")
    first = json.loads(stream.text_delta("a")[6:])
    later = json.loads(stream.text_delta("b", model="other", chunk_id="chatcmpl-late")[6:])
    assert first["responseId"] == later["responseId"] == "f" * 32
    assert later["modelVersion"] == "other"


@pytest.mark.parametrize("framing", FRAMINGS)
def test_templates_write_what_encoding_the_chunk_writes(framing: str) -> None:
    """Random sequences: `text_delta` writes what `delta` writes, and every chunk is
    the compact encoding, in Gemini's member order, of what it parses to."""
    seen_error = False
    for seed in range(250):
        chunks = chunk_sequence(random.Random(seed))
        results = []
        for send in (_by_delta, _by_parts):
            stream = GeminiStream("m", framing=framing)
            out = stream.start()
            for chunk in chunks:
                out += send(stream, chunk)
            results.append((out + stream.finish(), stream.usage(), stream.errored))
        assert results[0] == results[1], seed
        data, _, errored = results[0]
        seen_error = seen_error or errored
        for frame in frames(data, framing):
            assert encode_ordered(json.loads(frame)) == frame, seed
    assert seen_error
