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
(`EXPECTED`, from ``fixtures/captures_expected/anthropic.json``); the texts are
also read from the file without the library. A hypothesis property splits every
stream at arbitrary byte offsets through the pure stages (SSE framing, then the
accumulator) and requires identical chunks."""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Iterator
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

from ..support.anthropic import fold, message_events, payloads, sse, sse_reply
from ..support.paths import CAPTURES_DIR
from . import support as shared

CAPTURES = CAPTURES_DIR / "anthropic"
PROVENANCE = CAPTURES / "PROVENANCE.md"
HI = [{"role": "user", "content": "Hi"}]
KEY = "sk-ant-capture-test-key"
WAIT = 60.0


EXPECTED = shared.load_expected("anthropic")


def names_or_skip(names: list[str]) -> list[Any]:
    if names:
        return names
    return [pytest.param(None, marks=pytest.mark.skip(reason=f"{CAPTURES} absent"))]


STREAMS = [n for n in shared.capture_names(CAPTURES) if n.endswith(".sse.txt")]
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


FIELDS = shared.snapshot_fields("anthropic")
"""The Response fields an Anthropic capture decides."""


def test_every_capture_has_an_expectation() -> None:
    if not CAPTURES.is_dir():
        pytest.skip(f"{CAPTURES} absent")
    assert set(EXPECTED) == set(shared.capture_names(CAPTURES))


@pytest.mark.parametrize("name", names_or_skip(shared.capture_names(CAPTURES)))
@pytest.mark.parametrize("stream", [False, True], ids=["blocking", "streamed"])
def test_capture(server: ScriptedServer, name: str, stream: bool) -> None:
    expect = EXPECTED[name]
    response = serve(server, name, stream=stream)
    got = shared.snapshot(response, FIELDS)
    text, reasoning = file_texts(name) if expect.error_class != "http" else ("", "")
    msg = expect.msg
    if isinstance(msg, shared.Long):
        assert msg.cut(text) == msg.astuple(), "the table is wrong about the file"
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
        "provider_finish_reason": expect.provider_finish_reason,
        "msg": text,
        "reasoning": reasoning,
        "error_class": expect.error_class,
        "error_status": expect.error_status,
        "err": expect.err,
        "tool_calls": [list(c) for c in expect.tool_calls],
        "prompt_tokens": expect.prompt_tokens,
        "completion_tokens": expect.completion_tokens,
        "total_tokens": total,
        "cached_tokens": expect.cached_tokens,
        "reasoning_tokens": expect.reasoning_tokens,
        "model": expect.model,
        "id": expect.id,
        "dropped_frames": 0,
    }
    got["tool_calls"] = [list(c) for c in got["tool_calls"]]
    wrong = shared.mismatches(want, got)
    assert not wrong, wrong
    assert len(got["citations"] or []) == expect.citations
    assert [p["type"] for p in got["reasoning_parts"] or []] == list(expect.parts)
    assert all(p["dialect"] == "anthropic" for p in got["reasoning_parts"] or [])
    shared.assert_chunks_replay(response)


@pytest.mark.parametrize("name", names_or_skip(shared.capture_names(CAPTURES)))
def test_blocking_and_streamed_agree(server: ScriptedServer, name: str) -> None:
    blocking = shared.snapshot(serve(server, name, stream=False), FIELDS)
    assert shared.snapshot(serve(server, name, stream=True), FIELDS) == blocking


def test_thinking_signatures_are_kept_whole() -> None:
    if not CAPTURES.is_dir():
        pytest.skip(f"{CAPTURES} absent")
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
    if not CAPTURES.is_dir():
        pytest.skip(f"{CAPTURES} absent")
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
