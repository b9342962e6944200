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
modes. `EXPECTED` (``fixtures/captures_expected/gemini.json``) is what the
file says the Response must be; `BUGS` names fields a file shows the library
getting wrong today (strict xfail).

A pure test splits every stream capture at arbitrary byte offsets
(hypothesis) and requires the same chunks.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
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

from ..support.paths import CAPTURES_DIR
from . import support as shared

CAPTURES = CAPTURES_DIR / "gemini"
HI = [{"role": "user", "content": "Hi"}]
SETTLE_GUARD = 60.0  # a hang guard only: every body here ends


EXPECTED = shared.load_expected("gemini")

# (file, form) -> the fields the library gets wrong there today, and why.
BUGS: dict[tuple[str, str], tuple[frozenset[str], str]] = {}


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


FIELDS = shared.snapshot_fields("gemini")
"""The Response fields a Gemini capture decides."""


def wrong_fields(name: str, got: dict[str, Any]) -> dict[str, tuple[Any, Any]]:
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
    out = shared.mismatches(want, got)
    if e.citations is not None and len(cited) != e.citations:
        out["citations (count)"] = (e.citations, len(cited))
    wire_msg, wire_thoughts = wire_texts(name)
    if not shared.text_ok(e.msg, got["msg"], wire_msg):
        out["msg"] = (e.msg, got["msg"])
    if not shared.text_ok(e.reasoning_text, got["reasoning_text"], wire_thoughts):
        out["reasoning_text"] = (e.reasoning_text, got["reasoning_text"])
    return out


# -- the tests ------------------------------------------------------------------------


def test_every_capture_has_an_expectation() -> None:
    assert CAPTURES.is_dir(), f"{CAPTURES} is missing: the Gemini captures are not checked"
    assert set(EXPECTED) == set(shared.capture_names(CAPTURES))
    assert {name for name, _ in BUGS} <= set(EXPECTED)


def test_long_expectations_match_the_wire() -> None:
    """Every `Long` is the file's own text (read without llmchat): a wrong entry fails here."""
    for name, expect in EXPECTED.items():
        for want, wire in zip((expect.msg, expect.reasoning_text), wire_texts(name), strict=True):
            if isinstance(want, shared.Long):
                assert want.cut(wire) == want.astuple(), name


def _params() -> list[Any]:
    params = []
    for name in shared.capture_names(CAPTURES):
        for form in forms(name):
            bug = BUGS.get((name, form))
            marks = (
                [pytest.mark.xfail(strict=True, raises=shared.KnownBug, reason=bug[1])]
                if bug
                else []
            )
            params.append(pytest.param(name, form, id=f"{name}-{form}", marks=marks))
    return params


@pytest.mark.parametrize(("name", "form"), _params())
def test_capture(server: ScriptedServer, name: str, form: str) -> None:
    response = run(server, name, form)
    got = shared.snapshot(response, FIELDS)
    shared.assert_chunks_replay(response)
    bug = BUGS.get((name, form))
    shared.fail_or_known_bug(
        f"{name} ({form})", wrong_fields(name, got), None if bug is None else bug[0]
    )


@pytest.mark.parametrize(
    "name", [n for n in shared.capture_names(CAPTURES) if n.endswith(".sse.txt")]
)
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


STREAMS = [n for n in shared.capture_names(CAPTURES) if not n.endswith(".json")]


@pytest.mark.parametrize("name", STREAMS)
@settings(max_examples=40)
@given(data=st.data())
def test_any_byte_split_gives_the_same_chunks(name: str, data: st.DataObject) -> None:
    body = b"".join(sse_events(name))
    cuts = sorted(data.draw(st.lists(st.integers(0, len(body)), max_size=12)))
    pieces = [body[a:b] for a, b in zip([0, *cuts], [*cuts, len(body)], strict=True)]
    assert _chunks(pieces) == _chunks([body])
