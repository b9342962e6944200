"""Every OpenAI Responses wire capture through `OpenAIResponses`, over real sockets.

`/work/shared/captures/responses/` holds recorded bodies of real servers
(PROVENANCE.md says where each came from). Each is served by the loopback
`ScriptedServer`:

- ``.json``: a blocking body, byte for byte, with the HTTP status PROVENANCE.md
  records (``-> 400``, ``-> 429``), to `chat_completion` and to
  `chat_completion_stream` (a JSON answer to a stream request is read whole);
- ``.sse.txt``: the raw SSE body, one write per event, chunked and
  close-delimited; ``.sse-data.ndjson``: one ``data:`` payload per line, re-framed
  as ``data: <line>\\n\\n`` (the Responses protocol has no ``[DONE]``);
- every stream's final response object (``response.completed``/``failed``) is
  also served as the blocking body it would have been, and must agree.

`EXPECTED` (``fixtures/captures_expected/responses.json``) says, per file, what
its content shows; texts are also rebuilt from the file without the library
(`wire_texts`). A hypothesis test splits every stream's bytes at arbitrary
offsets through the pure stages (SSE decoder, accumulator) and requires the
very same chunks."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from functools import cache
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from llmchat.backends.responses import OpenAIResponses
from llmchat.chunk import Chunk
from llmchat.dialects.responses import ResponsesDialect
from llmchat.pipeline.accumulate import Accumulator
from llmchat.response import Response
from llmchat.sse import SSEDecoder
from llmchat.testing import Reply, ScriptedServer, Write
from llmchat.testing.script import Framing

from ..support.paths import CAPTURES_DIR
from . import support as shared

CAPTURES = CAPTURES_DIR / "responses"
PROVENANCE = CAPTURES / "PROVENANCE.md"
HI = [{"role": "user", "content": "Hi"}]
SETTLE_GUARD = 60.0  # a hang guard only


EXPECTED = shared.load_expected("responses")


# -- the files -------------------------------------------------------------------------


def _params(names: list[str]) -> list[Any]:
    if not CAPTURES.is_dir():
        reason = f"{CAPTURES} absent: no responses capture checked"
        return [pytest.param(None, id="responses-captures", marks=pytest.mark.skip(reason=reason))]
    return [pytest.param(name, id=name) for name in names]


STREAMS = [n for n in shared.capture_names(CAPTURES) if not n.endswith(".json")]


@cache
def recorded_status(name: str) -> int:
    for line in PROVENANCE.read_text(encoding="utf-8").splitlines():
        if line.startswith(f"| `{name}` |"):
            found = re.search(r"-> (\d{3})\]", line) or re.search(r"HTTP (\d{3}) error", line)
            return int(found.group(1)) if found else 200
    raise LookupError(f"{name} has no row in {PROVENANCE}")


def sse_events(name: str) -> list[bytes]:
    data = (CAPTURES / name).read_bytes()
    if name.endswith(".sse-data.ndjson"):
        return [b"data: " + line + b"\n\n" for line in data.split(b"\n") if line.strip()]
    return [event for event in re.split(rb"(?<=\n\n)", data) if event]


def payloads(name: str) -> list[dict[str, Any]]:
    """The JSON objects of a stream capture's data frames, in order (not via the library)."""
    out = []
    for event in sse_events(name):
        lines = event.decode("utf-8").split("\n")
        data = "\n".join(l[5:].removeprefix(" ") for l in lines if l.startswith("data:"))  # noqa: E741
        if data and data != "[DONE]":
            out.append(json.loads(data))
    return out


def final_body(name: str) -> dict[str, Any] | None:
    """A stream's last response object (completed, failed …): its blocking twin."""
    ends = [p["response"] for p in payloads(name) if p.get("type") in _ENDS]
    return dict(ends[-1]) if ends else None


_ENDS = ("response.completed", "response.incomplete", "response.failed")


@cache
def wire_texts(name: str) -> tuple[str, str]:
    """`(answer, reasoning)` as the file says them, read without the library."""
    if name.endswith(".json"):
        body = json.loads((CAPTURES / name).read_text(encoding="utf-8"))
        answer, reasoning = [], []
        for item in body.get("output") or []:
            for part in item.get("content") or []:
                if item["type"] == "message" and part.get("type") == "output_text":
                    answer.append(part["text"])
                elif item["type"] == "reasoning":
                    reasoning.append(part["text"])
        return "".join(answer), "\n\n".join(reasoning)
    answer, reasoning, last = [], [], None
    for p in payloads(name):
        kind = p.get("type", "")
        if kind == "response.output_text.delta":
            answer.append(p["delta"])
        elif kind.startswith("response.reasoning") and kind.endswith("text.delta"):
            segment = (p.get("item_id"), p.get("summary_index"), p.get("content_index"))
            reasoning.append(("\n\n" if last not in (None, segment) else "") + p["delta"])
            last = segment
    return "".join(answer), "".join(reasoning)


# -- serving and comparing ----------------------------------------------------------------


@pytest.fixture(scope="module")
def server() -> Iterator[ScriptedServer]:
    srv = ScriptedServer()
    with srv:
        yield srv


def run(server: ScriptedServer, reply: Reply, *, stream: bool) -> Response:
    with OpenAIResponses(server.url, api_key="sk-test") as backend:
        server.push(reply)
        if stream:
            response = backend.chat_completion_stream(HI).wait(SETTLE_GUARD)
        else:
            response = backend.chat_completion(HI)
    assert response.is_done, "the Response never settled"
    return response


def stream_reply(name: str, framing: Framing) -> Reply:
    steps = [Write(event) for event in sse_events(name)]
    return Reply(200, {"Content-Type": "text/event-stream"}, framing=framing, steps=steps)


FIELDS = shared.snapshot_fields("responses")
"""The Response fields a Responses capture decides."""


def check(name: str, got: dict[str, Any]) -> None:
    want = EXPECTED[name]
    wire_msg, wire_reasoning = wire_texts(name)
    expected = {
        "is_success": want.is_success,
        "error_class": want.error_class,
        "error_status": want.error_status,
        "err": want.err,
        "finish_reason": want.finish_reason,
        "provider_finish_reason": want.provider_finish_reason,
        "tool_calls": list(want.tool_calls),
        "usage": want.usage,
        "citations": None if want.citations is None else list(want.citations),
        "model": want.model,
        "id": want.id,
        "reasoning_part_count": want.parts,
        "dropped_frames": 0,
    }
    wrong = shared.mismatches(expected, got)
    for key, value, wire in (
        ("msg", want.msg, wire_msg),
        ("reasoning_text", want.reasoning_text, wire_reasoning or None),
    ):
        if isinstance(value, shared.Long):
            ok = value.matches(got[key], wire)
        else:
            ok = got[key] == value and (value or None) == (wire or None)
        if not ok:
            wrong[key] = (value, got[key])
    assert not wrong, f"{name}: {wrong}"


# -- the tests -----------------------------------------------------------------------------


def test_every_capture_has_an_expectation() -> None:
    if not CAPTURES.is_dir():
        pytest.skip(f"{CAPTURES} absent")
    assert set(EXPECTED) == set(shared.capture_names(CAPTURES))


@pytest.mark.parametrize("name", _params(shared.capture_names(CAPTURES)))
def test_capture_decodes_to_what_it_shows(server: ScriptedServer, name: str | None) -> None:
    assert name is not None
    if name.endswith(".json"):
        reply = Reply(recorded_status(name), None, (CAPTURES / name).read_bytes())
        got = [run(server, reply, stream=False), run(server, reply, stream=True)]
    else:
        got = [run(server, stream_reply(name, f), stream=True) for f in ("chunked", "close")]
    for response in got:
        check(name, shared.snapshot(response, FIELDS))
        shared.assert_chunks_replay(response)


@pytest.mark.parametrize("name", _params(STREAMS))
def test_a_stream_and_its_final_object_as_a_body_agree(
    server: ScriptedServer, name: str | None
) -> None:
    assert name is not None
    body = final_body(name)
    assert body is not None, f"{name}: no final response object"
    streamed = shared.snapshot(run(server, stream_reply(name, "chunked"), stream=True), FIELDS)
    blocking = shared.snapshot(run(server, Reply.json(body), stream=False), FIELDS)
    if any(p.get("type") == "error" for p in payloads(name)):
        # The error event ended the stream; the body is the response.failed after it.
        for key in ("finish_reason", "provider_finish_reason"):
            streamed.pop(key), blocking.pop(key)
    assert blocking == streamed


def chunks_of(pieces: list[bytes]) -> list[Chunk]:
    """The chunks the pure stages make of a body delivered in `pieces`."""
    decoder = SSEDecoder()
    acc = Accumulator(ResponsesDialect())
    out: list[Chunk] = []
    for piece in pieces:
        for event in decoder.feed(piece):
            out += acc.feed_event(event)
    for event in decoder.flush():
        out += acc.feed_event(event)
    return out


@pytest.mark.parametrize("name", _params(STREAMS))
@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_any_split_of_a_stream_gives_the_same_chunks(name: str | None, data: st.DataObject) -> None:
    assert name is not None
    body = b"".join(sse_events(name))
    whole = chunks_of([body])
    cuts = sorted(data.draw(st.lists(st.integers(0, len(body)), max_size=12), label="cuts"))
    pieces = [body[a:b] for a, b in zip([0, *cuts], [*cuts, len(body)], strict=True)]
    assert chunks_of(pieces) == whole
