"""The OpenAI relay's failure rule: a relayed stream the upstream ends early is never a clean end.

Every way a relayed answer can end early, scripted on a misbehaving loopback
upstream and read through the real proxy by the Python ``openai`` SDK: the
client sees the whole frames that arrived, then raises with the proxy's
fixed words (never half a frame, never the upstream's text), and the body is
cut. The JavaScript clients' side is in `test_js_clients_openai`.
"""

from __future__ import annotations

import json
import threading
import zlib
from collections.abc import Callable
from typing import Any

import openai
import pytest
import requests

from llmchat import OpenAICommon
from llmchat.proxy.faces.openai.relay_end import FrameGate, error_frame
from llmchat.proxy.failures import client_message
from llmchat.testing import Drop, Reply, ScriptedServer, Stall, Step, WaitFor, Write

from ..support.chat_frames import chunk
from ..support.proxy import UsageSink, running_proxy
from ..support.proxy_servers import serve_proxy

WAIT = 10.0
MESSAGES = [{"role": "user", "content": "say hi"}]


def _frame(event: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(event).encode() + b"\n\n"


FIRST = _frame(chunk({"role": "assistant", "content": "partial "}))


def _stream(*steps: Step, **options: Any) -> Reply:
    return Reply(
        200,
        {"Content-Type": "text/event-stream", **options.pop("headers", {})},
        framing=options.pop("framing", "chunked"),
        steps=[Write(FIRST), *steps],
        **options,
    )


# name -> (the upstream's reply, backend options, the failure's class)
ENDINGS: dict[str, tuple[Callable[[], Reply], dict[str, Any], str]] = {
    "drop-mid-frame": (lambda: _stream(Write(b'data: {"choi'), Drop()), {}, "response"),
    "reset": (lambda: _stream(Write(b'data: {"choi'), Drop(rst=True)), {}, "response"),
    "clean-eof-no-done": (lambda: _stream(framing="close"), {}, "response"),
    "timeout": (lambda: _stream(Stall()), {"request_timeout": 0.5}, "timeout"),
    "oversized-event": (
        lambda: _stream(Write(b"data: " + b"z" * 5000), Stall()),
        {"max_event_bytes": 1000},
        "response",
    ),
    "undecodable": (
        lambda: Reply(
            200,
            {"Content-Type": "text/event-stream", "Content-Encoding": "deflate"},
            framing="chunked",
            steps=[Write(zlib.compress(FIRST)[:-4] + b"\xff\x00garbage"), Drop()],
        ),
        {},
        None,
    ),
}


@pytest.mark.parametrize("name", list(ENDINGS))
def test_a_relayed_stream_ended_early_raises_in_the_openai_sdk(name: str) -> None:
    make_reply, backend_options, error_class = ENDINGS[name]
    sink = UsageSink()
    with ScriptedServer(make_reply()) as upstream_url:
        with OpenAICommon(upstream_url, **backend_options) as backend:
            with running_proxy(backend, usage_log=sink) as url:
                client = openai.OpenAI(base_url=url + "/v1", api_key="k", max_retries=0)
                seen: list[str] = []
                with client, pytest.raises(openai.APIError) as info:
                    stream = client.chat.completions.create(
                        model="m", messages=MESSAGES, stream=True, timeout=WAIT
                    )
                    for piece in stream:
                        seen.append(piece.choices[0].delta.content or "")
                [event] = sink.wait(1)
    # Not a JSON error on half a frame, not a bare connection error: the proxy's own words.
    assert type(info.value) is openai.APIError, repr(info.value)
    if error_class is not None:
        assert info.value.message == client_message(error_class, None)
        assert event["error_type"] == error_class
        assert seen == ["partial "]
    assert event["ok"] is False


def test_the_body_after_the_error_frame_is_cut() -> None:
    """The error frame is the last thing on the wire; no terminating chunk, no [DONE]."""
    reply = _stream(Write(b'data: {"choi'), Drop())
    with ScriptedServer(reply) as upstream_url, OpenAICommon(upstream_url) as backend:
        with running_proxy(backend) as url:
            assert _read_cut(url) == FIRST + error_frame("response")


def _read_cut(url: str) -> bytes:
    """A relayed stream's body up to its end, which must be a cut (no terminating chunk)."""
    answer = requests.post(
        url + "/v1/chat/completions",
        json={"model": "m", "messages": MESSAGES, "stream": True},
        timeout=WAIT,
        stream=True,
    )
    pieces: list[bytes] = []
    with pytest.raises(requests.exceptions.ChunkedEncodingError):
        pieces.extend(answer.iter_content(None))
    return b"".join(pieces)


def test_a_relayed_whole_body_cut_short_is_cut_for_the_client() -> None:
    """A non-streamed answer has no place for an error frame: its body is cut."""
    whole = json.dumps({"choices": [{"index": 0, "message": {"content": "x" * 200}}]}).encode()
    reply = Reply(200, steps=[Write(whole[:100]), Drop()], framing="chunked")
    with ScriptedServer(reply) as upstream_url, OpenAICommon(upstream_url) as backend:
        with running_proxy(backend) as url:
            client = openai.OpenAI(base_url=url + "/v1", api_key="k", max_retries=0)
            with client, pytest.raises(openai.APIConnectionError):
                client.chat.completions.create(model="m", messages=MESSAGES, timeout=WAIT)


@pytest.mark.parametrize("server", ["embedded", "gunicorn"])
def test_the_rule_holds_under_both_servers(server: str, tmp_path: Any) -> None:
    reply = _stream(Write(b'data: {"choi'), Drop())
    with ScriptedServer([reply]) as upstream_url:
        with serve_proxy(server, upstream_url, tmp_path) as proxy:
            assert _read_cut(proxy.url) == FIRST + error_frame("response")


# -- FrameGate on its own -------------------------------------------------------

BODY = FIRST + b"event: x\r\ndata: a\r\n\r\n" + b"data: b\r\rdata: c\n\n"


def test_frame_gate_passes_whole_frames_at_every_split() -> None:
    for cut in range(len(BODY) + 1):
        gate = FrameGate()
        out = gate.feed(BODY[:cut]) + gate.feed(BODY[cut:])
        assert out + gate.flush() == BODY, f"split at byte {cut}"
        assert out == BODY, f"split at byte {cut}"


def test_frame_gate_holds_half_a_frame_and_drops_it() -> None:
    gate = FrameGate()
    assert gate.feed(FIRST + b'data: {"choi') == FIRST
    assert gate.feed(b"ces") == b""
    assert gate.drop() == len(b'data: {"choices')
    assert gate.flush() == b""


def test_frame_gate_a_lone_crlf_ends_no_frame() -> None:
    gate = FrameGate()
    assert gate.feed(b"data: a\r\n") == b""
    assert gate.feed(b"\r\n") == b"data: a\r\n\r\n"


@pytest.mark.parametrize("done", [True, False], ids=["done-unterminated", "finish-unterminated"])
def test_a_stream_that_ended_well_stays_byte_for_byte(done: bool) -> None:
    """KoboldCpp ends its last frame with one LF: held by the gate, then passed on at the end."""
    reply = Reply.sse(
        [chunk({"content": "hi"}), chunk({}, "stop")], terminate_last=False, done=done
    )
    wire = b"".join(step.data for step in reply.body_steps if isinstance(step, Write))
    with ScriptedServer(reply) as upstream_url, OpenAICommon(upstream_url) as backend:
        with running_proxy(backend) as url:
            answer = requests.post(
                url + "/v1/chat/completions",
                json={"model": "m", "messages": MESSAGES, "stream": True},
                timeout=WAIT,
            )
    assert answer.content == wire and wire.endswith(b"}\n" if not done else b"[DONE]\n")


# -- after [DONE] the client has its whole answer ------------------------------------

DONE_FRAMES = (FIRST, _frame(chunk({}, "stop")), b"data: [DONE]\n\n")


def test_a_client_that_leaves_at_done_is_answered_not_aborted() -> None:
    """The OpenAI SDK closes its response at ``[DONE]``, before the upstream's body
    ends: the request is recorded as answered (200, ok), not as a client abort."""
    release = threading.Event()
    reply = _stream(*(Write(frame) for frame in DONE_FRAMES[1:]), WaitFor(release, WAIT))
    sink = UsageSink()
    try:
        with ScriptedServer(reply) as upstream_url, OpenAICommon(upstream_url) as backend:
            with running_proxy(backend, usage_log=sink) as url:
                client = openai.OpenAI(base_url=url + "/v1", api_key="k", max_retries=0)
                with client:
                    stream = client.chat.completions.create(
                        model="m", messages=MESSAGES, stream=True, timeout=WAIT
                    )
                    text = "".join(piece.choices[0].delta.content or "" for piece in stream)
                # Recorded while the upstream still holds its body open: the hang-up
                # ended the relay, and it was no abort.
                [event] = sink.wait(1)
    finally:
        release.set()
    assert text == "partial "
    assert (event["status"], event["ok"], event["error_type"]) == (200, True, None)


def test_an_upstream_that_breaks_off_after_done_cuts_nothing() -> None:
    """The answer was whole at ``[DONE]``: a broken tail is neither an error frame nor a cut."""
    reply = _stream(*(Write(frame) for frame in DONE_FRAMES[1:]), Drop())
    sink = UsageSink()
    with ScriptedServer(reply) as upstream_url, OpenAICommon(upstream_url) as backend:
        with running_proxy(backend, usage_log=sink) as url:
            answer = requests.post(
                url + "/v1/chat/completions",
                json={"model": "m", "messages": MESSAGES, "stream": True},
                timeout=WAIT,
            )
            [event] = sink.wait(1)
    assert answer.content == b"".join(DONE_FRAMES)
    assert (event["status"], event["ok"], event["error_type"]) == (200, True, None)


def test_frame_gate_keeps_the_frames_a_read_held_before_an_oversized_one() -> None:
    # One read may carry whole frames and then the start of an event past the limit
    # (the chunked reader hands over every chunk received): those frames are the client's.
    big = b"data: " + b"z" * len(FIRST)
    gate = FrameGate()
    assert (
        gate.feed_within(FIRST + b"data: b\n\n" + big, limit=len(FIRST)) == FIRST + b"data: b\n\n"
    )
    assert gate.drop() == 0
    gate = FrameGate()
    assert gate.feed(FIRST[:5]) == b""
    assert gate.feed_within(FIRST[5:] + big + b"\n\n" + b"data: c\n\n", limit=len(FIRST)) == FIRST
    assert gate.feed_within(big + b"\n\n", limit=None) == big + b"\n\n"
