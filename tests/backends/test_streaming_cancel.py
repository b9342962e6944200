"""Streams over real sockets, continued: no buffering, cancellation, the Response as a live
object, and aborts that are never the provider's end (endings and faults: test_streaming.py).

Nothing sleeps: waits are on events.
"""

from __future__ import annotations

import functools
import threading
import time
from typing import Any

import pytest

from llmchat import OpenAICommon, Settings
from llmchat.response import Response
from llmchat.testing import (
    ChatResponder,
    Pause,
    Reply,
    ScriptedServer,
    Stall,
    WaitFor,
    Write,
)

from .streaming_support import HI, call_fragment, delta, stream

# The `server` fixture (tests/conftest.py) runs this script, fresh for each test.
SERVER_SCRIPT = functools.partial(ChatResponder, "Hello streaming world", chunk_size=3)


# -- no buffering --------------------------------------------------------------------


@pytest.mark.parametrize("framing", ["chunked", "close"])
def test_each_frame_reaches_the_consumer_before_the_next_is_written(
    server: ScriptedServer, framing: str
) -> None:
    """The server holds frame 2 until the consumer saw frame 1: a buffering reader
    (waiting for 128 bytes, or for EOF) would get nothing until the gate times out."""
    gates = [threading.Event() for _ in range(3)]
    steps: list[Any] = []
    for i, gate in enumerate(gates):
        steps += [
            Write(f'data: {{"choices":[{{"delta":{{"content":"{i}"}}}}]}}\n\n'),
            WaitFor(gate, timeout=5),
        ]
    steps.append(Write(b"data: [DONE]\n\n"))
    server.push(Reply(headers={"Content-Type": "text/event-stream"}, framing=framing, steps=steps))
    response = OpenAICommon(server.url).chat_completion_stream(HI)
    writes_when_seen = []
    for chunk, gate in zip(response, gates, strict=False):
        writes_when_seen.append(len(server.requests[0].writes))
        assert chunk.content == str(len(writes_when_seen) - 1)
        gate.set()
    assert response.wait(10).is_success
    # When chunk i arrived the server could not yet have written frame i + 1 (it
    # waits on gate i); the server's own count may lag its send, hence <=.
    assert all(seen <= i + 1 for i, seen in enumerate(writes_when_seen)), writes_when_seen


# -- cancellation ----------------------------------------------------------------------


def test_cancel_during_prefill_closes_the_socket_at_once(server: ScriptedServer) -> None:
    server.push(Reply(before_headers=[Stall()]))
    response = OpenAICommon(server.url).chat_completion_stream(HI)
    assert server.wait_for_requests(1, timeout=5)
    response.cancel()
    assert response.is_done and response.is_cancelled  # synchronously, before any I/O
    assert (response.err, response.error_class, response.is_success) == (
        "Cancelled by user",
        None,
        False,
    )
    assert server.requests[0].disconnected.wait(5), "the server never saw the hang-up"
    assert server.requests[0].headers_sent_at is None  # it was still in prefill


def test_cancel_mid_stream_keeps_the_text_and_hangs_up(server: ScriptedServer) -> None:
    reply = Reply(
        headers={"Content-Type": "text/event-stream"},
        framing="chunked",
        steps=[
            Write(b'data: {"choices":[{"delta":{"content":"so far"}}]}\n\n'),
            Stall(),
        ],
    )
    server.push(reply)
    backend = OpenAICommon(server.url)
    response = backend.chat_completion_stream(HI)
    first = next(iter(response))
    assert first.content == "so far"
    backend.cancel(response)
    assert response.is_cancelled and response.latest == "so far" and response.error_class is None
    assert server.requests[0].disconnected.wait(5)
    assert [c.content for c in response] == ["so far"]  # iteration ends after a cancel


def test_cancel_between_finish_chunk_and_end(server: ScriptedServer) -> None:
    reply = Reply(
        headers={"Content-Type": "text/event-stream"},
        framing="chunked",
        steps=[
            Write(b'data: {"choices":[{"delta":{"content":"x"},"finish_reason":"length"}]}\n\n'),
            Stall(),
        ],
    )
    server.push(reply)
    response = OpenAICommon(server.url, stream_finish_grace=30).chat_completion_stream(HI)
    final = next(c for c in response if c.is_final)
    assert final.finish_reason == "length"
    response.cancel()
    assert response.is_cancelled and response.err == "Cancelled by user"
    assert response.finish_reason == "length"  # it still names the reason that arrived
    assert server.requests[0].disconnected.wait(5)


def test_cancel_after_done_is_a_no_op(server: ScriptedServer) -> None:
    response = stream(server)
    response.cancel()
    # A late cancel changes nothing, not even cancel_requested (it used to set it).
    assert response.is_success and not response.is_cancelled and not response.cancel_requested


def test_context_manager_cancels_a_live_stream(server: ScriptedServer) -> None:
    server.push(Reply(before_headers=[Stall()]))
    with OpenAICommon(server.url).chat_completion_stream(HI) as response:
        assert server.wait_for_requests(1, timeout=5)
    assert response.is_cancelled
    assert server.requests[0].disconnected.wait(5)


def test_deadline_mid_stream_is_a_timeout_and_hangs_up(server: ScriptedServer) -> None:
    reply = Reply(
        headers={"Content-Type": "text/event-stream"},
        framing="chunked",
        steps=[
            Write(b'data: {"choices":[{"delta":{"content":"slow"}}]}\n\n'),
            Stall(),
        ],
    )
    response = stream(server, reply, request_timeout=0.4)
    assert (response.error_class, response.err) == (
        "timeout",
        "No complete response within request_timeout (0.4s)",
    )
    assert response.latest == "slow"
    assert server.requests[0].disconnected.wait(5)


def test_silent_body_past_the_read_gap_is_a_timeout(server: ScriptedServer) -> None:
    reply = Reply(
        headers={"Content-Type": "text/event-stream"},
        framing="chunked",
        steps=[
            Write(b'data: {"choices":[{"delta":{"content":"a"}}]}\n\n'),
            Stall(),
        ],
    )
    response = stream(server, reply, headers_timeout=0.3)
    assert response.error_class == "timeout" and "silent" in (response.err or "")


# -- the Response as a live object ------------------------------------------------


def test_settles_without_anyone_iterating(server: ScriptedServer) -> None:
    response = OpenAICommon(server.url).chat_completion_stream(HI)
    assert response.wait(10).is_success


def test_two_readers_each_get_every_chunk(server: ScriptedServer) -> None:
    response = OpenAICommon(server.url).chat_completion_stream(HI)
    results: list[list[str]] = [[], []]

    def read(slot: int) -> None:
        results[slot] = [c.content for c in response]

    threads = [threading.Thread(target=read, args=(i,)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert results[0] == results[1] and "".join(results[0]) == "Hello streaming world"
    assert list(response.iter_text()) == [c for c in results[0] if c]


def test_settings_reach_the_stream_body(server: ScriptedServer) -> None:
    response = OpenAICommon(server.url, settings=Settings(max_tokens=5)).chat_completion_stream(HI)
    assert response.wait(10).is_success
    assert server.requests[0].json()["max_tokens"] == 5


def test_empty_error_values_are_not_errors(server: ScriptedServer) -> None:
    events = [
        {"error": "", "choices": [{"index": 0, "delta": {"content": "a"}}]},
        {"error": None, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
    ]
    response = stream(server, Reply.sse(events))
    assert response.is_success and response.msg == "a"


def test_only_choice_zero_is_read(server: ScriptedServer) -> None:
    events = [
        {
            "choices": [
                {"index": 1, "delta": {"content": "other"}},
                {"index": 0, "delta": {"content": "mine"}},
            ]
        },
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
    ]
    response = stream(server, Reply.sse(events))
    assert response.is_success and response.msg == "mine"


# -- aborts are never the provider's end (step 2) ------------------------------------


class _Watching(OpenAICommon):
    """Records whether the finish-reason hook and the completion hook ran."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.seen: list[str] = []

    def _reconcile_finish_reason(self, response: Response, reason: str, request: Any) -> str:
        self.seen.append(f"reconcile {reason}")
        return reason

    def _on_stream_complete(self, response: Response) -> None:
        self.seen.append("complete")


def _finish_then_hold(framing: str) -> Reply:
    frame = 'data: {"choices":[{"delta":{"content":"a"},"finish_reason":"stop"}]}\n\n'
    steps = [Write(frame), Pause(5.0)]
    return Reply(headers={"Content-Type": "text/event-stream"}, framing=framing, steps=steps)  # type: ignore[arg-type]


@pytest.mark.parametrize("framing", ["close", "chunked"])
def test_cancel_after_the_finish_chunk_reconciles_nothing(
    server: ScriptedServer, framing: str
) -> None:
    server.push(_finish_then_hold(framing))
    backend = _Watching(server.url)
    response = backend.chat_completion_stream(HI)
    for chunk in response:
        if chunk.is_final:
            response.cancel()
    assert response.wait(5).is_cancelled and response.finish_reason == "stop"
    assert server.requests[0].disconnected.wait(5)
    time.sleep(0.1)  # the reader thread has ended by now
    assert backend.seen == []


def test_a_deadline_after_the_finish_chunk_is_a_timeout(server: ScriptedServer) -> None:
    server.push(_finish_then_hold("close"))
    backend = _Watching(server.url, request_timeout=0.3, stream_finish_grace=None)
    response = backend.chat_completion_stream(HI)
    assert response.wait(5).is_done
    assert response.error_class == "timeout" and backend.seen == []


def test_stop_with_calls_is_tool_calls_after_the_hook_on_both_paths(
    server: ScriptedServer,
) -> None:
    call = [call_fragment(0, id="c1", name="f", arguments="{}")]
    server.push(Reply.sse([delta(tool_calls=call), delta(finish="stop")]))
    backend = _Watching(server.url)
    streamed = backend.chat_completion_stream(HI).wait(5)
    final = [c for c in streamed if c.is_final]
    message = {"role": "assistant", "tool_calls": [{"id": "c1", "function": {"name": "f"}}]}
    body = {"choices": [{"index": 0, "message": message, "finish_reason": "stop"}]}
    server.push(Reply.json(body))
    blocking = backend.chat_completion(HI)
    for response in (streamed, blocking):
        assert response.is_success and response.finish_reason == "tool_calls"
        assert response.provider_finish_reason == "stop"
    assert final[0].finish_reason == "stop" and next(iter(blocking)).finish_reason == "stop"
    assert backend.seen == ["reconcile stop", "complete", "reconcile stop"]
