"""Every Gemini wire capture through the real library, blocking and streamed, over real sockets.

`/work/shared/captures/gemini/` holds recorded bodies of real servers
(PROVENANCE.md says where each came from). Each file is served by the
loopback `ScriptedServer` to the `Gemini` backend in every form the API can
send the same answer:

- blocking: a ``.json`` object byte for byte (``generateContent``); a ``.json``
  array byte for byte (``streamGenerateContent`` without ``alt=sse``); a stream
  file's payloads as such a JSON array.
- streamed: ``.sse.txt`` byte for byte as ``text/event-stream``, one write per
  event; an ``.sse-data.ndjson`` file's lines as ``data:`` frames (no ``[DONE]``:
  Gemini has none); a ``.json`` object or array's payloads as ``data:`` frames;
  and a JSON array byte for byte as the body of a streamed call (what a server
  answers when ``alt=sse`` is dropped).

The error bodies are served with the status they were recorded with, in both
modes. `EXPECTED` is what the file says the Response must be; `BUGS` names
fields a file shows the library getting wrong today (strict xfail).

A pure test splits every stream capture at arbitrary byte offsets
(hypothesis) and requires the same chunks.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cache
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llmchat.backends.gemini import Gemini
from llmchat.chunk import Chunk
from llmchat.dialects.gemini import GeminiContent as GeminiDialect
from llmchat.pipeline.accumulate import Accumulator
from llmchat.response import Response
from llmchat.sse import SSEDecoder
from llmchat.testing import Reply, ScriptedServer, Write

from .capture_support import Long
from .conftest import CAPTURES_DIR

CAPTURES = CAPTURES_DIR / "gemini"
PROVENANCE = CAPTURES / "PROVENANCE.md"
HI = [{"role": "user", "content": "Hi"}]
SETTLE_GUARD = 60.0  # a hang guard only: every body here ends
FILTER = "Blocked by content filter"


@dataclass(frozen=True)
class Expect:
    is_success: bool
    finish_reason: str | None
    provider_finish_reason: str | None = None
    msg: str | Long = ""
    reasoning_text: str | Long | None = None
    error_class: str | None = None
    error_status: int | None = None
    err: str | None = None
    tool_calls: tuple[tuple[str, dict[str, Any], str], ...] = ()
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    total_tokens: int | None = None
    cached_tokens: int | None = None
    reasoning_tokens: int | None = None
    citations: int | None = None  # how many URLs; their values are checked by wire_citations
    model: str | None = None
    id: str | None = None
    signatures_on: tuple[str, ...] = ()  # the `on` of each reasoning part, in order
    status: int = 200  # the HTTP status it was recorded with
    extra: dict[str, Any] = field(default_factory=dict)


EXPECTED: dict[str, Expect] = {
    "fb_citations.sse.txt": Expect(
        True,
        "stop",
        "STOP",
        msg=Long(
            6711,
            "Okay, let's break down quantum mechanics",
            "Good luck on your learning journey!\n",
        ),
        prompt_tokens=15,
        completion_tokens=1381,
        total_tokens=1396,
        citations=1,
        model="gemini-2.0-flash",
    ),
    "fb_error_400_api_key.json": Expect(
        False,
        None,
        error_class="http",
        error_status=400,
        err="API key not valid. Please pass a valid API key.",
        status=400,
    ),
    # SAFETY with the text that came before the block: a content_filter failure, text kept.
    "fb_finish_reason_safety.json": Expect(
        False,
        "content_filter",
        "SAFETY",
        msg="Safety error incoming in 5, 4, 3, 2...",
        error_class="response",
        err=FILTER,
        prompt_tokens=7,
        completion_tokens=20,
        total_tokens=27,
        model="gemini-2.0-flash",
    ),
    "fb_prompt_blocked_safety.sse.txt": Expect(
        False, "content_filter", "blockReason:SAFETY", error_class="response", err=FILTER
    ),
    "fb_recitation_no_content.sse.txt": Expect(
        False,
        "content_filter",
        "RECITATION",
        msg="text1text2text3text4text5text6text7text8",
        error_class="response",
        err=FILTER,
        prompt_tokens=9,
        completion_tokens=261,
        total_tokens=270,
        citations=2,
        model="gemini-2.0-flash",
    ),
    "fb_vertex_error_429_quota.json": Expect(
        False,
        None,
        error_class="http",
        error_status=429,
        err="Quota exceeded for quota metric 'Generate Content API requests per minute' and "
        "limit 'GenerateContent request limit per minute for a region' of service "
        "'generativelanguage.googleapis.com' for consumer 'project_number:348715329010'.",
        status=429,
    ),
    # STOP on every chunk (hand-written upstream): the first one is the finish, "Second "
    # after it does not count. Then a bare JSON error object (no "data:"): the failure.
    "fb_vertex_error_mid_stream.sse.txt": Expect(
        False,
        "stop",
        "STOP",
        msg="First Second ",
        error_class="response",
        err="The operation was cancelled.",
    ),
    "fb_vertex_implicit_caching.json": Expect(
        True,
        "stop",
        "STOP",
        msg="Red Riding Hood is looking for **directions** in the forest.",
        prompt_tokens=12013,
        completion_tokens=15 + 73,
        total_tokens=12101,
        cached_tokens=11243,
        reasoning_tokens=73,
        model="gemini-2.5-flash",
    ),
    "llmgemini_jsonarray_function_call_signature.json": Expect(
        True,
        "tool_calls",
        "STOP",
        tool_calls=(("multiply", {"y": 3, "x": 5}, "gemini-call-0"),),
        prompt_tokens=60,
        completion_tokens=16 + 32,
        total_tokens=108,
        reasoning_tokens=32,
        model="gemini-3-flash-preview",
        id="6XJFadi3PJOx-sAPgJ3S6Qs",
        signatures_on=("functionCall",),
    ),
    "llmgemini_jsonarray_thinking_stream.json": Expect(
        True,
        "stop",
        "STOP",
        msg="Scoop",
        reasoning_text=Long(
            275, "**Considering the Constraint**\n\n", "This constraint is paramount.\n\n\n"
        ),
        prompt_tokens=11,
        completion_tokens=2 + 291,
        total_tokens=304,
        reasoning_tokens=291,
        model="gemini-3.6-flash",
        id="IopyaseNCL-s-8YP7urOoAY",
        signatures_on=("text",),
    ),
    "pyai_function_call.json": Expect(
        True,
        "tool_calls",
        "STOP",
        tool_calls=(
            ("generate_topic", {}, "gemini-call-0"),
            ("generate_topic", {}, "gemini-call-1"),
            ("generate_topic", {}, "gemini-call-2"),
        ),
        prompt_tokens=83,
        completion_tokens=30 + 190,
        total_tokens=303,
        reasoning_tokens=190,
        model="gemini-3-flash-preview",
        id="wOd8abGuO5rgz7IP5tLEGA",
        signatures_on=("functionCall",),
    ),
    # All the budget went to thinking: MAX_TOKENS with no parts is a length failure.
    "pyai_max_tokens_thinking_empty.json": Expect(
        False,
        "length",
        "MAX_TOKENS",
        error_class="response",
        err="Hit max tokens",
        prompt_tokens=15,
        completion_tokens=2,
        total_tokens=17,
        reasoning_tokens=2,
        model="gemini-2.5-pro",
        id="fH8oaunbEbr9qtsPjYGX4A0",
    ),
    "pyai_model_armor_prompt_blocked.json": Expect(
        False,
        "content_filter",
        "blockReason:MODEL_ARMOR",
        error_class="response",
        err=FILTER,
        model="gemini-2.5-flash",
        id="mSEXaseKG-P51PIPwv66qQs",
    ),
    "pyai_safety.json": Expect(
        False,
        "content_filter",
        "SAFETY",
        error_class="response",
        err=FILTER,
        prompt_tokens=14,
        total_tokens=14,
        model="gemini-1.5-flash",
        id="5lpeaLOIBf__698Pv8HGgAg",
    ),
    "pyai_thinking_part.json": Expect(
        True,
        "stop",
        "STOP",
        msg=Long(
            3017,
            "Crossing the street safely is a fundame",
            "ffic lights rather than looking for you.",
        ),
        reasoning_text=Long(
            2238,
            "**A Safe Street-Crossing Guide: My Thoug",
            "ready to produce the final response.\n\n\n",
        ),
        prompt_tokens=29,
        completion_tokens=736 + 1001,
        total_tokens=1766,
        reasoning_tokens=1001,
        model="gemini-3-pro-preview",
        id="ON4gaYT4Gc20qtsP2bSiiQ0",
        signatures_on=("text",),
    ),
    "pyai_tool_call_thought_signature_stream.sse.txt": Expect(
        True,
        "tool_calls",
        "STOP",
        tool_calls=(("get_country", {}, "gemini-call-0"),),
        prompt_tokens=29,
        completion_tokens=10 + 202,
        total_tokens=241,
        reasoning_tokens=202,
        model="gemini-3-pro-preview",
        id="QUVVadTSNJ6_qtsPvN7J8Q0",
        signatures_on=("functionCall",),
    ),
    "pyai_vertex_flex_stream.sse.txt": Expect(
        True,
        "stop",
        "STOP",
        msg="OK",
        prompt_tokens=5,
        completion_tokens=1 + 100,
        total_tokens=106,
        reasoning_tokens=100,
        model="gemini-3-flash-preview",
        id="a9--aa6MOKL4vdIPz7X2iQ4",
        signatures_on=("text",),
    ),
    # google_search grounding (a feature outside the issue): the web URIs are citations.
    "pyai_web_search_grounding_stream.sse.txt": Expect(
        True,
        "stop",
        "STOP",
        msg=Long(
            926,
            "### Weather in San Francisco is Mild and",
            "of rain remains low throughout the day.",
        ),
        prompt_tokens=17,
        completion_tokens=241 + 412,
        total_tokens=772,
        reasoning_tokens=412,
        citations=5,
        model="gemini-2.5-pro",
        id="ftnJaMmAMcm-qtsPwvCCoAo",
    ),
    "vercel_error_429_retry_info.json": Expect(
        False,
        None,
        error_class="http",
        error_status=429,
        err="You exceeded your current quota, please check your plan.",
        status=429,
    ),
    # Vertex streamed function-call arguments (partialArgs), assembled into whole calls.
    "vercel_vertex_stream_function_call_partial_args.sse-data.ndjson": Expect(
        True,
        "tool_calls",
        "STOP",
        tool_calls=(
            ("getWeather", {"location": "Boston"}, "gemini-call-0"),
            ("getWeather", {"location": "San Francisco"}, "gemini-call-1"),
        ),
        prompt_tokens=26,
        completion_tokens=23 + 132,
        total_tokens=181,
        reasoning_tokens=132,
        model="gemini-3.1-pro-preview",
        id="dqHOab6xGLzWodAPkPuViA4",
        signatures_on=("functionCall",),
    ),
}

# (file, form) -> the fields the library gets wrong there today, and why.
BUGS: dict[tuple[str, str], tuple[frozenset[str], str]] = {}


class KnownBug(AssertionError):
    """The Response differs from `EXPECTED` in exactly the fields `BUGS` names (or fewer)."""


# -- the files, in every form ---------------------------------------------------------


def capture_names() -> list[str]:
    return sorted(p.name for p in CAPTURES.iterdir() if p.is_file() and p.name != PROVENANCE.name)


@cache
def stream_payloads(name: str) -> tuple[str, ...]:
    """The payloads of capture `name` in order, as JSON texts: what a stream carries."""
    text = (CAPTURES / name).read_text(encoding="utf-8")
    if name.endswith(".sse-data.ndjson"):
        return tuple(line for line in text.split("\n") if line.strip())
    if name.endswith(".json"):
        value = json.loads(text)
        items = value if isinstance(value, list) else [value]
        return tuple(json.dumps(item, ensure_ascii=False) for item in items)
    out: list[str] = []
    for event in text.split("\n\n"):
        data = [
            line[5:].removeprefix(" ") for line in event.split("\n") if line.startswith("data:")
        ]
        rest = "\n".join(line for line in event.split("\n") if not line.startswith("data:"))
        if data:
            out.append("\n".join(data))
        if rest.strip():  # a bare JSON object between events (an error mid-stream)
            out.append(json.dumps(json.loads(rest)))
    return tuple(out)


def sse_events(name: str) -> list[bytes]:
    """The stream body as events, bytes exact for ``.sse.txt``; their concatenation is the body."""
    data = (CAPTURES / name).read_bytes()
    if name.endswith(".sse.txt"):
        return [event for event in re.split(rb"(?<=\n\n)", data) if event]
    return [b"data: " + p.encode() + b"\n\n" for p in stream_payloads(name)]


def forms(name: str) -> list[str]:
    """The forms a capture is served in: blocking ones first, then the streamed ones."""
    if EXPECTED[name].status >= 400:
        return ["blocking-error", "stream-error"]
    if name.endswith(".json"):
        raw = (CAPTURES / name).read_text(encoding="utf-8").lstrip()
        return ["blocking", "sse", "stream-array"] if raw.startswith("[") else ["blocking", "sse"]
    return ["blocking-array", "sse"]


def reply(name: str, form: str) -> Reply:
    expect = EXPECTED[name]
    raw = (CAPTURES / name).read_bytes()
    if form in ("blocking", "blocking-error", "stream-error", "stream-array"):
        return Reply(expect.status, {"Content-Type": "application/json"}, raw)
    if form == "blocking-array":
        body = ("[" + ",\n".join(stream_payloads(name)) + "]").encode()
        return Reply(200, {"Content-Type": "application/json"}, body)
    steps = [Write(event) for event in sse_events(name)]
    return Reply(200, {"Content-Type": "text/event-stream"}, framing="chunked", steps=steps)


@pytest.fixture(scope="module")
def server() -> Iterator[ScriptedServer]:
    srv = ScriptedServer()
    with srv:
        yield srv


def run(server: ScriptedServer, name: str, form: str) -> Response:
    backend = Gemini(server.url, api_key="test-key", model="gemini-test")
    server.push(reply(name, form))
    if form.startswith("blocking"):
        response = backend.chat_completion(HI)
    else:
        response = backend.chat_completion_stream(HI).wait(SETTLE_GUARD)
    assert response.is_done, f"{name} ({form}): the Response never settled"
    return response


# -- an independent reading of the files -----------------------------------------------


@cache
def wire_texts(name: str) -> tuple[str, str]:
    """`(answer, thoughts)` of candidate 0's parts up to the first finish, read without llmchat."""
    answer: list[str] = []
    thoughts: list[str] = []
    for text in stream_payloads(name):
        for candidate in json.loads(text).get("candidates") or []:
            for part in (candidate.get("content") or {}).get("parts") or []:
                if isinstance(part.get("text"), str):
                    (thoughts if part.get("thought") else answer).append(part["text"])
            if candidate.get("finishReason"):
                return "".join(answer), "".join(thoughts)
    return "".join(answer), "".join(thoughts)


@cache
def wire_citations(name: str) -> tuple[str, ...]:
    seen: list[str] = []
    for text in stream_payloads(name):
        for candidate in json.loads(text).get("candidates") or []:
            sources = (candidate.get("citationMetadata") or {}).get("citationSources") or []
            chunks = (candidate.get("groundingMetadata") or {}).get("groundingChunks") or []
            uris = [s.get("uri") for s in sources] + [c.get("web", {}).get("uri") for c in chunks]
            seen += [u for u in uris if u and u not in seen]
    return tuple(seen)


def snapshot(response: Response) -> dict[str, Any]:
    return {
        "is_success": response.is_success,
        "error_class": response.error_class,
        "error_status": response.error_status,
        "err": response.err,
        "msg": response.msg,
        "reasoning_text": response.reasoning_text,
        "tool_calls": [(c.name, c.arguments, c.id) for c in response.tool_calls],
        "finish_reason": response.finish_reason,
        "provider_finish_reason": response.provider_finish_reason,
        "prompt_tokens": response.prompt_tokens,
        "completion_tokens": response.completion_tokens,
        "total_tokens": response.total_tokens,
        "cached_tokens": response.cached_tokens,
        "reasoning_tokens": response.reasoning_tokens,
        "citations": response.citations,
        "model": response.model,
        "id": response.id,
        "signatures_on": [p["on"] for p in response.reasoning_parts or []],
        "dropped_frames": response.dropped_frames,
    }


def _text_ok(want: str | Long | None, got: Any, wire: str) -> bool:
    if not isinstance(want, Long):
        return bool(got == want)
    return want.matches(got, wire)


def mismatches(name: str, got: dict[str, Any]) -> dict[str, tuple[Any, Any]]:
    e = EXPECTED[name]
    cited = wire_citations(name)
    want: dict[str, Any] = {
        "is_success": e.is_success,
        "error_class": e.error_class,
        "error_status": e.error_status,
        "err": e.err,
        "tool_calls": [list(c) for c in e.tool_calls],
        "finish_reason": e.finish_reason,
        "provider_finish_reason": e.provider_finish_reason,
        "prompt_tokens": e.prompt_tokens,
        "completion_tokens": e.completion_tokens,
        "total_tokens": e.total_tokens,
        "cached_tokens": e.cached_tokens,
        "reasoning_tokens": e.reasoning_tokens,
        "citations": None if e.citations is None else list(cited),
        "model": e.model,
        "id": e.id,
        "signatures_on": list(e.signatures_on),
        "dropped_frames": 0,
    }
    got = {**got, "tool_calls": [list(c) for c in got["tool_calls"]]}
    out = {k: (v, got[k]) for k, v in want.items() if got[k] != v}
    if e.citations is not None and len(cited) != e.citations:
        out["citations (count)"] = (e.citations, len(cited))
    wire_msg, wire_thoughts = wire_texts(name)
    if not _text_ok(e.msg, got["msg"], wire_msg):
        out["msg"] = (e.msg, got["msg"])
    if not _text_ok(e.reasoning_text, got["reasoning_text"], wire_thoughts):
        out["reasoning_text"] = (e.reasoning_text, got["reasoning_text"])
    return out


# -- the tests ------------------------------------------------------------------------


def test_every_capture_has_an_expectation() -> None:
    assert CAPTURES.is_dir(), f"{CAPTURES} is missing: the Gemini captures are not checked"
    assert set(EXPECTED) == set(capture_names())
    assert {name for name, _ in BUGS} <= set(EXPECTED)


def test_long_expectations_match_the_wire() -> None:
    """Every `Long` is the file's own text (read without llmchat): a wrong entry fails here."""
    for name, expect in EXPECTED.items():
        for want, wire in zip((expect.msg, expect.reasoning_text), wire_texts(name), strict=True):
            if isinstance(want, Long):
                got = (len(wire), wire[: len(want.head)], wire[-len(want.tail) :])
                assert got == (want.length, want.head, want.tail), name


def _params() -> list[Any]:
    params = []
    for name in capture_names() if CAPTURES.is_dir() else []:
        for form in forms(name):
            bug = BUGS.get((name, form))
            marks = [pytest.mark.xfail(strict=True, raises=KnownBug, reason=bug[1])] if bug else []
            params.append(pytest.param(name, form, id=f"{name}-{form}", marks=marks))
    return params


@pytest.mark.parametrize(("name", "form"), _params())
def test_capture(server: ScriptedServer, name: str, form: str) -> None:
    response = run(server, name, form)
    got = snapshot(response)
    chunks = list(response)
    assert "".join(c.content for c in chunks) == got["msg"]
    assert "".join(c.thinking or "" for c in chunks) == (got["reasoning_text"] or "")
    assert [c for chunk in chunks for c in chunk.tool_calls or []] == response.tool_calls
    wrong = mismatches(name, got)
    if not wrong:
        return
    report = "\n".join(f"  {k}: expected {w!r}, got {g!r}" for k, (w, g) in wrong.items())
    bug = BUGS.get((name, form))
    if bug is not None and wrong.keys() <= bug[0]:
        raise KnownBug(f"{name} ({form}): the known bug, still there:\n{report}")
    pytest.fail(f"{name} ({form}): the Response is not what the capture says:\n{report}")


@pytest.mark.parametrize("name", [n for n in capture_names() if n.endswith(".sse.txt")])
def test_signatures_go_back_on_the_next_request(server: ScriptedServer, name: str) -> None:
    """The answer appended to the conversation builds a valid next request, signatures included."""
    response = run(server, name, "sse")
    sent = [p["thoughtSignature"] for p in response.reasoning_parts or []]
    history = [*HI, response.to_message().to_dict()]
    history += [
        {"role": "tool", "tool_call_id": c.id, "content": '{"ok": true}'}
        for c in response.tool_calls
    ]
    history.append({"role": "user", "content": "Go on"})
    body = Gemini(model="m", api_key="k").prepare_chat_request(history).body
    model_turns = [c for c in body["contents"] if c["role"] == "model"]
    back = [
        p["thoughtSignature"] for c in model_turns for p in c["parts"] if "thoughtSignature" in p
    ]
    assert back == sent
    calls = [
        p["functionCall"]["name"] for c in model_turns for p in c["parts"] if "functionCall" in p
    ]
    assert calls == [c.name for c in response.tool_calls]


# -- any byte split gives the same chunks (pure: decoder + accumulator) -----------------


def _chunks(pieces: list[bytes]) -> list[Chunk]:
    decoder = SSEDecoder()
    acc = Accumulator(GeminiDialect())
    out: list[Chunk] = []
    for piece in pieces:
        for event in decoder.feed(piece):
            out += acc.feed_event(event)
    for event in decoder.flush():
        out += acc.feed_event(event)
    return out


STREAMS = [n for n in capture_names() if not n.endswith(".json")] if CAPTURES.is_dir() else []


@pytest.mark.parametrize("name", STREAMS)
@settings(max_examples=40)
@given(data=st.data())
def test_any_byte_split_gives_the_same_chunks(name: str, data: st.DataObject) -> None:
    body = b"".join(sse_events(name))
    cuts = sorted(data.draw(st.lists(st.integers(0, len(body)), max_size=12)))
    pieces = [body[a:b] for a, b in zip([0, *cuts], [*cuts, len(body)], strict=True)]
    assert _chunks(pieces) == _chunks([body])
