"""Every Anthropic wire capture through the real library, blocking and streamed, over sockets.

`/work/shared/captures/anthropic/` holds recorded bodies of real servers
(PROVENANCE.md says where each came from). Each one is served by the loopback
`ScriptedServer` to `Anthropic` in both modes:

- a ``.json`` body: as recorded to `chat_completion` (with the status PROVENANCE
  records), and to `chat_completion_stream` as the event stream of the same
  message (`message_events`; an error body is served as it is);
- an ``.sse.txt`` stream: as recorded to `chat_completion_stream` (one write per
  event), and to `chat_completion` as the message its events fold into (`fold`).

Both modes must give the same Response, and it must be what the file shows
(`EXPECTED`); the texts are also read from the file without the library. A
hypothesis property splits every stream at arbitrary byte offsets through the
pure stages (SSE framing, then the accumulator) and requires identical chunks.
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from llmchat.backends.anthropic import Anthropic
from llmchat.chunk import Chunk
from llmchat.dialects.anthropic import AnthropicMessages
from llmchat.pipeline.accumulate import Accumulator
from llmchat.response import Response
from llmchat.sse import SSEDecoder
from llmchat.testing import Reply, ScriptedServer

from .anthropic_support import fold, message_events, payloads, sse, sse_reply
from .conftest import CAPTURES_DIR

CAPTURES = CAPTURES_DIR / "anthropic"
PROVENANCE = CAPTURES / "PROVENANCE.md"
HI = [{"role": "user", "content": "Hi"}]
KEY = "sk-ant-capture-test-key"
WAIT = 60.0


@dataclass(frozen=True)
class Text:
    """A text too long to quote: its length, head and tail (the whole is read from the file)."""

    length: int
    head: str
    tail: str


@dataclass(frozen=True)
class Expect:
    is_success: bool = True
    finish_reason: str | None = "stop"
    provider_reason: str | None = "end_turn"
    msg: str | Text = ""
    reasoning_length: int = 0
    error_class: str | None = None
    error_status: int | None = None
    err: str | None = None
    calls: tuple[tuple[str, dict[str, Any], str], ...] = ()
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cached_tokens: int | None = 0
    reasoning_tokens: int | None = None
    model: str | None = None
    id: str | None = None
    citations: int = 0
    parts: tuple[str, ...] = ()


def http_error(status: int, err: str) -> Expect:
    return Expect(
        is_success=False,
        finish_reason=None,
        provider_reason=None,
        error_class="http",
        error_status=status,
        err=err,
        cached_tokens=None,
    )


FILTERED = {"is_success": False, "error_class": "response", "err": "Blocked by content filter"}
FILTERED |= {"finish_reason": "content_filter", "provider_reason": "refusal"}
TOOLS = {"finish_reason": "tool_calls", "provider_reason": "tool_use"}

EXPECTED: dict[str, Expect] = {
    "llmanthropic_prefill_stop_sequence.sse.txt": Expect(
        provider_reason="stop_sequence",
        msg=Text(
            102,
            '\ndef pelican():\n    return "A large wate',
            ' and a throat pouch for catching fish."\n',
        ),
        prompt_tokens=16,
        completion_tokens=28,
        model="claude-haiku-4-5-20251001",
        id="msg_01KozUDYHvRtgs3NLgG7jzN9",
    ),
    "openllmetry_thinking_nonstream.json": Expect(
        msg="The letter 'r' appears 3 times in the word \"strawberry\".",
        reasoning_length=429,
        prompt_tokens=52,
        completion_tokens=215,
        model="claude-3-7-sonnet-20250219",
        id="msg_01Ayp2LhrapBJLPf22sskg4c",
        parts=("thinking",),
    ),
    "openllmetry_thinking_stream.sse.txt": Expect(
        msg="The letter 'r' appears 3 times in the word \"strawberry\".",
        reasoning_length=422,
        prompt_tokens=52,
        completion_tokens=216,
        model="claude-3-7-sonnet-20250219",
        id="msg_01SZKz6DEhWnfZcxPQDQz49Y",
        parts=("thinking",),
    ),
    # A thinking block with only a signature; the advisor server tool's blocks add no text.
    "pyai_advisor_tool_stream.sse.txt": Expect(
        msg=Text(
            190,
            'The task asks "What\'s 2+2?" — a trivial ',
            "d before finalizing.The answer is **4**.",
        ),
        prompt_tokens=2411,
        completion_tokens=145,
        reasoning_tokens=47,
        model="claude-sonnet-5",
        id="msg_011CdD8kd2BCHcbXAHcYxvaf",
        parts=("thinking",),
    ),
    "pyai_code_execution_stream.sse.txt": Expect(
        msg=Text(
            501,
            "I'll calculate that expression for you r",
            "# ✅ Final Answer: **-428,330,955.97745**",
        ),
        reasoning_length=46,
        prompt_tokens=4714,
        completion_tokens=304,
        model="claude-sonnet-4-6",
        id="msg_01Js8aWE7YbmiaUPneGiCskE",
        parts=("thinking",),
    ),
    "pyai_error_400_effort.json": http_error(
        400,
        "This model does not support effort level 'xhigh'. "
        "Supported levels: high, low, max, medium.",
    ),
    "pyai_parallel_tool_calls.json": Expect(
        **TOOLS,
        msg=Text(
            156,
            "I'll help you find out who is the younge",
            "ntity information to compare their ages.",
        ),
        calls=(
            ("retrieve_entity_info", {"name": "Alice"}, "toolu_0167cfEnoQaPviGdVXA95zcu"),
            ("retrieve_entity_info", {"name": "Bob"}, "toolu_01EEe2V5HD1Ac4rKiUR4HD2T"),
            ("retrieve_entity_info", {"name": "Charlie"}, "toolu_01XFyAjstT3966qvRynZyVPo"),
            ("retrieve_entity_info", {"name": "Daisy"}, "toolu_013mnQZbgtK2oe3Mo3XKJsx3"),
        ),
        prompt_tokens=423,
        completion_tokens=202,
        model="claude-haiku-4-5-20251001",
        id="msg_011S3wxtqL5CVescWqS3zeg2",
    ),
    # pause_turn is not a finished answer: an unknown reason (the issue says so).
    "pyai_pause_turn_web_search_stream.sse.txt": Expect(
        is_success=False,
        finish_reason="pause_turn",
        provider_reason="pause_turn",
        error_class="response",
        err="Unknown finish reason: pause_turn",
        msg=Text(
            166,
            "I'll run these searches one at a time as",
            " continuing with the remaining searches:",
        ),
        reasoning_length=1051,
        prompt_tokens=404500,
        completion_tokens=943,
        reasoning_tokens=261,
        model="claude-sonnet-4-5-20250929",
        id="msg_01SC6GnkBDsmEDqyXQpQ2ipm",
        parts=("thinking",),
    ),
    "pyai_redacted_thinking_stream.sse.txt": Expect(
        msg=Text(
            359,
            "I notice that you've sent what appears t",
            "oday with a legitimate task or question?",
        ),
        prompt_tokens=92,
        completion_tokens=189,
        model="claude-sonnet-4-5-20250929",
        id="msg_018XZkwvj9asBiffg3fXt88s",
        parts=("redacted_thinking", "redacted_thinking"),
    ),
    "pyai_tool_with_thinking.json": Expect(
        **TOOLS,
        msg=Text(
            103,
            "I'll help you find the largest city in y",
            " me determine which country you're from.",
        ),
        reasoning_length=376,
        calls=(("get_user_country", {}, "toolu_01YGzqpRE16Vricda3Aqcejo"),),
        prompt_tokens=398,
        completion_tokens=155,
        model="claude-sonnet-4-20250514",
        id="msg_01WvueFjZVbHcj4H4zUzeGv2",
        parts=("thinking",),
    ),
    "pyai_web_search_citations_stream.sse.txt": Expect(
        msg=Text(
            1335,
            "Based on the search results, I can see t",
            "p to be a pleasant day in San Francisco!",
        ),
        reasoning_length=405,
        prompt_tokens=22397,
        completion_tokens=637,
        model="claude-sonnet-4-20250514",
        id="msg_01QmxBSdEbD9ZeBWDVgFDoQ5",
        citations=7,
        parts=("thinking",),
    ),
    "sdkpy_fable_stream_a_refusal.sse.txt": Expect(
        **FILTERED,
        msg="Hi",
        reasoning_length=212,
        prompt_tokens=28,
        completion_tokens=106,
        reasoning_tokens=67,
        model="claude-fable-5",
        id="msg_fixture_a_0001",
        parts=("thinking",),
    ),
    "sdkpy_fable_stream_a_toolrefusal.sse.txt": Expect(
        **FILTERED,
        msg="Here's a summary of this year's solar eclipses and how",
        prompt_tokens=28,
        completion_tokens=106,
        reasoning_tokens=67,
        model="claude-fable-5",
        id="msg_fixture_atool_0001",
    ),
    "sdkpy_refusal_response.sse.txt": Expect(
        **FILTERED,
        prompt_tokens=20,
        completion_tokens=0,
        cached_tokens=None,
        model="claude-opus-4-7",
        id="msg_01RefusalTestMessage123456789",
    ),
    "sdkpy_snap_error_400_invalid_request.json": http_error(
        400,
        "messages.0.content.1: unexpected `tool_use_id` found in `tool_result` blocks: "
        "toolu_01GHndag5wQmbzNihYmV2UBj. Each `tool_result` block must have a corresponding "
        "`tool_use` block in the previous message.",
    ),
    "sdkpy_snap_server_tool_use.json": Expect(
        msg=Text(
            289,
            "Today in San Francisco, there are shower",
            " poor drainage areas with a low of 45°F.",
        ),
        prompt_tokens=11306,
        completion_tokens=163,
        model="claude-haiku-4-5-20251001",
        id="msg_011Y4sbfjCq85yJrUA13Dxb3",
        citations=2,
    ),
    "sdkpy_snap_structured_output_stream.sse.txt": Expect(
        msg="[12345,67890]",
        prompt_tokens=135,
        completion_tokens=10,
        model="claude-sonnet-4-5-20250929",
        id="msg_01LtFpmR8SbmiK2kRA5sWXNi",
    ),
    "sdkpy_snap_tool_use.json": Expect(
        **TOOLS,
        calls=(
            (
                "get_weather",
                {"location": "New York, NY", "units": "c"},
                "toolu_01RXQDRjwv5Un7n98xFahjo8",
            ),
        ),
        prompt_tokens=0,
        completion_tokens=0,
        cached_tokens=None,
        model="claude-opus-4-5-20251101",
        id="msg_0147NV7w8PyZ6bSUsNY79cYj",
    ),
    "sdkpy_tool_use_response.sse.txt": Expect(
        **TOOLS,
        msg="I'll check the current weather in Paris for you.",
        calls=(("get_weather", {"location": "Paris"}, "toolu_01NRLabsLyVHZPKxbKvkfSMn"),),
        prompt_tokens=377,
        completion_tokens=65,
        model="claude-sonnet-4-20250514",
        id="msg_019Q1hrJbZG26Fb9BQhrkHEr",
    ),
    # 529 overloaded: an http failure with that status, the provider's message.
    "vecsum_error_529_overloaded.json": http_error(529, "Overloaded"),
}


def capture_names() -> list[str]:
    if not CAPTURES.is_dir():
        return []
    return sorted(p.name for p in CAPTURES.iterdir() if p.is_file() and p.name != PROVENANCE.name)


def names_or_skip(names: list[str]) -> list[Any]:
    if names:
        return names
    return [pytest.param(None, marks=pytest.mark.skip(reason=f"{CAPTURES} absent"))]


STREAMS = [n for n in capture_names() if n.endswith(".sse.txt")]
SMALL_STREAMS = [n for n in STREAMS if (CAPTURES / n).stat().st_size <= 6000]
"""Split at every single offset (the larger ones are covered by the hypothesis property)."""


@cache
def recorded_status(name: str) -> int:
    """The status PROVENANCE.md records for `name` (``-> 400``, ``status 400``, ``Error: 529``)."""
    for line in PROVENANCE.read_text(encoding="utf-8").splitlines():
        if line.startswith(f"| `{name}` |"):
            found = re.search(r"(?:-> |status |Error: )(\d{3})", line)
            return int(found.group(1)) if found else 200
    raise LookupError(f"{name} has no row in {PROVENANCE}")


@pytest.fixture(scope="module")
def server() -> Iterator[ScriptedServer]:
    srv = ScriptedServer()
    with srv:
        yield srv


def serve(server: ScriptedServer, name: str, *, stream: bool) -> Response:
    """Capture `name` served once to a call of the given mode; the settled Response."""
    data = (CAPTURES / name).read_bytes()
    status = recorded_status(name)
    if status != 200:
        reply = Reply(status, None, data)
    elif name.endswith(".json"):
        reply = (
            sse_reply(sse(message_events(json.loads(data)))) if stream else Reply(200, None, data)
        )
    else:
        reply = sse_reply(data) if stream else Reply.json(fold(payloads(data)))
    server.push(reply)
    backend = Anthropic(server.url, api_key=KEY)
    response = (
        backend.chat_completion_stream(HI).wait(WAIT) if stream else backend.chat_completion(HI)
    )
    assert response.is_done, f"{name}: never settled"
    return response


def file_texts(name: str) -> tuple[str, str]:
    """`(answer, reasoning)` read from the file without the library (text, thinking blocks)."""
    data = (CAPTURES / name).read_bytes()
    message = json.loads(data) if name.endswith(".json") else fold(payloads(data))
    blocks = message.get("content") or []
    text = "".join(b["text"] for b in blocks if b.get("type") == "text")
    return text, "".join(b.get("thinking", "") for b in blocks if b.get("type") == "thinking")


def snapshot(r: Response) -> dict[str, Any]:
    return {
        "is_success": r.is_success,
        "finish_reason": r.finish_reason,
        "provider_reason": r.provider_finish_reason,
        "msg": r.msg,
        "reasoning": r.reasoning_text or "",
        "error_class": r.error_class,
        "error_status": r.error_status,
        "err": r.err,
        "calls": [(c.name, c.arguments, c.id) for c in r.tool_calls],
        "prompt_tokens": r.prompt_tokens,
        "completion_tokens": r.completion_tokens,
        "total_tokens": r.total_tokens,
        "cached_tokens": r.cached_tokens,
        "reasoning_tokens": r.reasoning_tokens,
        "model": r.model,
        "id": r.id,
        "citations": r.citations,
        "parts": r.reasoning_parts,
        "dropped": r.dropped_frames,
    }


def test_every_capture_has_an_expectation() -> None:
    if not CAPTURES.is_dir():
        pytest.skip(f"{CAPTURES} absent")
    assert set(EXPECTED) == set(capture_names())


@pytest.mark.parametrize("name", names_or_skip(capture_names()))
@pytest.mark.parametrize("stream", [False, True], ids=["blocking", "streamed"])
def test_capture(server: ScriptedServer, name: str, stream: bool) -> None:
    expect = EXPECTED[name]
    response = serve(server, name, stream=stream)
    got = snapshot(response)
    text, reasoning = file_texts(name) if expect.error_class != "http" else ("", "")
    msg = expect.msg
    if isinstance(msg, Text):
        assert (len(text), text[: len(msg.head)], text[-len(msg.tail) :]) == (
            msg.length,
            msg.head,
            msg.tail,
        ), "the table is wrong about the file"
    else:
        assert text == msg, "the table is wrong about the file"
    assert len(reasoning) == expect.reasoning_length, "the table is wrong about the file"
    total = (
        None
        if expect.prompt_tokens is None or expect.completion_tokens is None
        else expect.prompt_tokens + expect.completion_tokens
    )
    want = {
        "is_success": expect.is_success,
        "finish_reason": expect.finish_reason,
        "provider_reason": expect.provider_reason,
        "msg": text,
        "reasoning": reasoning,
        "error_class": expect.error_class,
        "error_status": expect.error_status,
        "err": expect.err,
        "calls": [list(c) for c in expect.calls],
        "prompt_tokens": expect.prompt_tokens,
        "completion_tokens": expect.completion_tokens,
        "total_tokens": total,
        "cached_tokens": expect.cached_tokens,
        "reasoning_tokens": expect.reasoning_tokens,
        "model": expect.model,
        "id": expect.id,
        "dropped": 0,
    }
    got["calls"] = [list(c) for c in got["calls"]]
    wrong = {k: (v, got[k]) for k, v in want.items() if got[k] != v}
    assert not wrong, wrong
    assert len(got["citations"] or []) == expect.citations
    assert [p["type"] for p in got["parts"] or []] == list(expect.parts)
    assert all(p["dialect"] == "anthropic" for p in got["parts"] or [])
    # What the chunks replay is what the Response says.
    chunks = list(response)
    assert "".join(c.content for c in chunks) == response.msg
    assert "".join(c.thinking or "" for c in chunks) == (response.reasoning_text or "")
    assert [c for chunk in chunks for c in chunk.tool_calls or []] == response.tool_calls


@pytest.mark.parametrize("name", names_or_skip(capture_names()))
def test_blocking_and_streamed_agree(server: ScriptedServer, name: str) -> None:
    blocking = snapshot(serve(server, name, stream=False))
    assert snapshot(serve(server, name, stream=True)) == blocking


def test_thinking_signatures_are_kept_whole() -> None:
    name = "openllmetry_thinking_stream.sse.txt"
    folded = fold(payloads((CAPTURES / name).read_bytes()))
    (block,) = [b for b in folded["content"] if b["type"] == "thinking"]
    acc = run_stages(name, [])
    assert acc.parts == [
        {
            "dialect": "anthropic",
            "type": "thinking",
            "thinking": block["thinking"],
            "signature": block["signature"],
        }
    ]


def test_the_web_search_citations_are_the_provider_s_objects() -> None:
    acc = run_stages("pyai_web_search_citations_stream.sse.txt", [])
    assert acc.citations is not None and len(acc.citations) == 7
    assert all(c["type"] == "web_search_result_location" and c["url"] for c in acc.citations)


# -- split anywhere: the pure stages ---------------------------------------------------------


def run_stages(name: str, cuts: list[int]) -> Accumulator:
    """Capture `name`'s bytes, cut at `cuts`, through SSE framing and the accumulator."""
    data = (CAPTURES / name).read_bytes()
    bounds = sorted({0, len(data), *(c for c in cuts if 0 < c < len(data))})
    decoder = SSEDecoder()
    acc = Accumulator(AnthropicMessages())
    chunks: list[Chunk] = []
    for a, b in itertools.pairwise(bounds):
        for event in decoder.feed(data[a:b]):
            chunks += acc.feed_event(event)
    for event in decoder.flush():
        chunks += acc.feed_event(event)
    acc.chunks = chunks  # type: ignore[attr-defined]
    return acc


def chunk_list(acc: Accumulator) -> list[Any]:
    return [
        (c.content, c.thinking, c.finish_reason, c.tool_calls, c.citations, c.usage, c.is_final)
        for c in acc.chunks  # type: ignore[attr-defined]
    ]


@pytest.mark.parametrize("name", names_or_skip(STREAMS))
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_any_split_gives_identical_chunks(name: str, data: st.DataObject) -> None:
    size = len((CAPTURES / name).read_bytes())
    cuts = data.draw(st.lists(st.integers(1, max(1, size - 1)), max_size=40), label="cuts")
    whole = run_stages(name, [])
    split = run_stages(name, cuts)
    assert chunk_list(split) == chunk_list(whole)
    assert (split.finish_reason, split.done, split.parts, split.tool_calls) == (
        whole.finish_reason,
        whole.done,
        whole.parts,
        whole.tool_calls,
    )


@pytest.mark.parametrize("name", names_or_skip(SMALL_STREAMS))
def test_every_byte_offset_of_a_small_stream(name: str) -> None:
    data = (CAPTURES / name).read_bytes()
    whole = chunk_list(run_stages(name, []))
    for offset in range(1, len(data)):
        assert chunk_list(run_stages(name, [offset])) == whole, offset
