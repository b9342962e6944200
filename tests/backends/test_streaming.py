"""Streams over real sockets: every ending, fault and cancel has its own test.

The loopback server plays literal frames; the server side is asserted too
(whether and when the client hung up). Nothing sleeps: waits are on events.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from llmchat import OpenAICommon, Settings
from llmchat.response import Response
from llmchat.templates import ChatML
from llmchat.testing import (
    ChatResponder,
    Drop,
    Pause,
    Reply,
    ScriptedServer,
    Stall,
    WaitFor,
    Write,
)

HI = [{"role": "user", "content": "Hi"}]
CLOSED = "Stream closed without [DONE] or a finish reason"


def delta(content: str | None = None, finish: str | None = None, **fields: Any) -> dict[str, Any]:
    """One chat.completion.chunk event."""
    d: dict[str, Any] = dict(fields)
    if content is not None:
        d["content"] = content
    return {
        "id": "chatcmpl-s",
        "object": "chat.completion.chunk",
        "model": "m",
        "choices": [{"index": 0, "delta": d, "finish_reason": finish}],
    }


def usage_event(prompt: int = 7, completion: int = 3, cached: int | None = None) -> dict[str, Any]:
    usage: dict[str, Any] = {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }
    if cached is not None:
        usage["prompt_tokens_details"] = {"cached_tokens": cached}
    return {
        "id": "chatcmpl-s",
        "object": "chat.completion.chunk",
        "model": "m",
        "choices": [],
        "usage": usage,
    }


def call_fragment(
    index: int, *, id: str | None = None, name: str | None = None, arguments: str | None = None
) -> dict[str, Any]:
    fragment: dict[str, Any] = {"index": index, "type": "function", "function": {}}
    if id is not None:
        fragment["id"] = id
    if name is not None:
        fragment["function"]["name"] = name
    if arguments is not None:
        fragment["function"]["arguments"] = arguments
    return fragment


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    srv = ScriptedServer(ChatResponder("Hello streaming world", chunk_size=3))
    with srv:
        yield srv


def stream(server: ScriptedServer, reply: Reply | None = None, **kwargs: Any) -> Response:
    if reply is not None:
        server.push(reply)
    response = OpenAICommon(server.url, **kwargs).chat_completion_stream(HI)
    assert response.wait(10).is_done, "the stream never settled"
    return response


# -- the three endings -----------------------------------------------------------


def test_ok_with_usage_after_the_finish_chunk(server: ScriptedServer) -> None:
    events = [
        delta("", role="assistant"),
        delta("Hel"),
        delta("lo"),
        delta(finish="stop"),
        usage_event(cached=4),
    ]
    response = stream(server, Reply.sse(events))
    assert (response.is_success, response.finish_reason, response.msg) == (True, "stop", "Hello")
    assert (response.prompt_tokens, response.completion_tokens, response.cached_tokens) == (7, 3, 4)
    assert response.error_class is None and response.err is None
    chunks = list(response)
    assert [c.content for c in chunks] == ["Hel", "lo", "", ""]
    assert [c.is_final for c in chunks] == [False, False, True, False]
    assert chunks[-1].usage is not None and chunks[-1].cached_tokens == 4
    assert server.requests[0].json()["stream_options"] == {"include_usage": True}


def test_the_responder_stream_round_trip(server: ScriptedServer) -> None:
    response = stream(server)
    assert response.is_success and response.msg == "Hello streaming world"
    assert response.completion_tokens is not None and response.timing.ttft_seconds is not None
    assert response.timing.total_seconds is not None


@pytest.mark.parametrize(
    ("finish", "err"),
    [
        ("length", "Hit max tokens"),
        ("content_filter", "Blocked by content filter"),
        ("wat", "Unknown finish reason: wat"),
    ],
)
def test_terminal_finish_reasons_fail_but_keep_text_and_usage(
    server: ScriptedServer, finish: str, err: str
) -> None:
    events = [delta("partial"), delta(finish=finish), usage_event(completion=64)]
    response = stream(server, Reply.sse(events))
    assert (response.is_success, response.error_class, response.err) == (False, "response", err)
    assert response.latest == "partial" and response.completion_tokens == 64
    assert response.finish_reason == finish == response.provider_finish_reason


def test_body_just_stops(server: ScriptedServer) -> None:
    response = stream(server, Reply.sse([delta("half")], done=False, framing="close"))
    assert (response.error_class, response.err, response.latest) == ("response", CLOSED, "half")
    assert response.finish_reason is None


def test_body_cut_off_mid_chunked_stream(server: ScriptedServer) -> None:
    reply = Reply(
        headers={"Content-Type": "text/event-stream"},
        framing="chunked",
        steps=[Write(b'data: {"choices":[{"delta":{"content":"a"}}]}\n\n'), Drop()],
    )
    response = stream(server, reply)
    assert (response.error_class, response.err, response.latest) == ("response", CLOSED, "a")


def test_stop_then_close_without_done_is_success(server: ScriptedServer) -> None:
    response = stream(
        server, Reply.sse([delta("x"), delta(finish="stop")], done=False, framing="close")
    )
    assert response.is_success and response.finish_reason == "stop"


def test_stop_then_drop_without_done_is_success(server: ScriptedServer) -> None:
    reply = Reply(
        headers={"Content-Type": "text/event-stream"},
        framing="chunked",
        steps=[
            Write(b'data: {"choices":[{"delta":{"content":"x"},"finish_reason":"stop"}]}\n\n'),
            Drop(rst=True),
        ],
    )
    response = stream(server, reply)
    assert response.is_success and response.msg == "x"


def test_stop_then_stall_settles_after_the_grace_and_hangs_up(server: ScriptedServer) -> None:
    reply = Reply(
        headers={"Content-Type": "text/event-stream"},
        framing="chunked",
        steps=[
            Write(b'data: {"choices":[{"delta":{"content":"x"},"finish_reason":"stop"}]}\n\n'),
            Stall(),
        ],
    )
    response = stream(server, reply, stream_finish_grace=0.3)
    assert response.is_success and response.finish_reason == "stop"
    assert server.requests[0].disconnected.wait(5), "the connection was not dropped"


def test_length_then_stall_settles_as_a_failure_after_the_grace(server: ScriptedServer) -> None:
    reply = Reply(
        headers={"Content-Type": "text/event-stream"},
        framing="chunked",
        steps=[
            Write(b'data: {"choices":[{"delta":{"content":"x"},"finish_reason":"length"}]}\n\n'),
            Stall(),
        ],
    )
    response = stream(server, reply, stream_finish_grace=0.3)
    assert response.err == "Hit max tokens" and response.latest == "x"


def test_done_without_a_finish_reason_is_success(server: ScriptedServer) -> None:
    response = stream(server, Reply.sse([delta("a"), delta("b")]))
    assert response.is_success and response.finish_reason is None and response.msg == "ab"


@pytest.mark.parametrize("spelling", ["", "null"])
def test_empty_and_null_strings_are_no_finish(server: ScriptedServer, spelling: str) -> None:
    response = stream(server, Reply.sse([delta("a", finish=spelling)], done=False, framing="close"))
    assert response.err == CLOSED


def test_unterminated_final_done_still_counts(server: ScriptedServer) -> None:
    """KoboldCpp ends with `data: [DONE]` and no blank line, then closes."""
    response = stream(server, Reply.sse([delta("k")], framing="close", terminate_last=False))
    assert response.is_success and response.msg == "k"


def test_frame_cut_off_mid_json_at_eof_is_dropped(server: ScriptedServer) -> None:
    reply = Reply.sse(
        [delta("a"), delta(finish="stop"), 'data: {"choices": [{"del'], done=False, framing="close"
    )
    response = stream(server, reply)
    assert response.is_success and response.dropped_frames == 1


# -- dropped frames and tool calls ----------------------------------------------------


def test_garbage_frame_in_prose_is_counted_not_fatal(server: ScriptedServer) -> None:
    events = [delta("a"), "data: {garbage\n\n", delta("b"), delta(finish="stop")]
    response = stream(server, Reply.sse(events))
    assert response.is_success and response.msg == "ab" and response.dropped_frames == 1


def test_garbage_frame_with_tool_calls_fails_even_after_done(server: ScriptedServer) -> None:
    events = [
        delta(tool_calls=[call_fragment(0, id="c1", name="f", arguments='{"a":')]),
        "data: {garbage\n\n",
        delta(tool_calls=[call_fragment(0, arguments="1}")]),
        delta(finish="tool_calls"),
    ]
    response = stream(server, Reply.sse(events))
    assert response.error_class == "response" and "dropped" in (response.err or "")
    assert response.dropped_frames == 1


def test_two_parallel_calls_with_split_arguments(server: ScriptedServer) -> None:
    events = [
        delta(tool_calls=[call_fragment(0, id="c1", name="get_weather", arguments='{"ci')]),
        delta(tool_calls=[call_fragment(1, id="c2", name="get_time", arguments='{"tz"')]),
        delta(tool_calls=[call_fragment(0, arguments='ty": "Paris"}')]),
        delta(tool_calls=[call_fragment(1, arguments=': "CET"}')]),
        delta(finish="stop"),
    ]
    response = stream(server, Reply.sse(events))
    assert response.is_success and response.finish_reason == "tool_calls"
    assert response.provider_finish_reason == "stop"
    assert [(c.id, c.name, c.arguments) for c in response.tool_calls] == [
        ("c1", "get_weather", {"city": "Paris"}),
        ("c2", "get_time", {"tz": "CET"}),
    ]
    landed = [c for c in response if c.tool_calls]
    assert len(landed) == 1 and landed[0].is_final and len(landed[0].tool_calls or []) == 2


def test_ollama_style_index_zero_for_every_call(server: ScriptedServer) -> None:
    events = [
        delta(tool_calls=[call_fragment(0, id="a", name="f", arguments='{"n": 1}')]),
        delta(tool_calls=[call_fragment(0, id="b", name="g", arguments='{"n": 2}')]),
        delta(finish="tool_calls"),
    ]
    response = stream(server, Reply.sse(events))
    assert [(c.id, c.name, c.arguments) for c in response.tool_calls] == [
        ("a", "f", {"n": 1}),
        ("b", "g", {"n": 2}),
    ]


def test_unfinished_tool_call_at_the_end_fails(server: ScriptedServer) -> None:
    # The body closes with neither [DONE] nor a finish reason inside a call. (Ending on
    # [DONE] instead hands the call out: spec case 1, test_done_hands_out_a_pending_call.)
    events = [delta(tool_calls=[call_fragment(0, id="c1", name="f", arguments='{"a":')])]
    response = stream(server, Reply.sse(events, done=False))
    assert response.error_class == "response" and "unfinished tool call" in (response.err or "")


def test_done_hands_out_a_pending_call(server: ScriptedServer) -> None:
    events = [delta(tool_calls=[call_fragment(0, id="c1", name="f", arguments='{"a":1}')])]
    response = stream(server, Reply.sse(events))
    assert response.is_success and response.finish_reason is None
    assert [(c.name, c.arguments) for c in response.tool_calls] == [("f", {"a": 1})]


# -- text, reasoning, errors ------------------------------------------------------------


def test_utf8_character_split_one_byte_per_write(server: ScriptedServer) -> None:
    frame = 'data: {"choices":[{"delta":{"content":"18°C — 雨"}}]}\n\n'.encode()
    steps = [Write(frame[i : i + 1]) for i in range(len(frame))]
    steps.append(Write(b"data: [DONE]\n\n"))
    reply = Reply(headers={"Content-Type": "text/event-stream"}, framing="chunked", steps=steps)
    response = stream(server, reply)
    assert response.is_success and response.msg == "18°C — 雨"
    assert response.dropped_frames == 0


def test_reasoning_deltas_never_enter_the_answer(server: ScriptedServer) -> None:
    events = [
        delta(reasoning_content="think "),
        delta(reasoning="more"),
        delta("answer"),
        delta(finish="stop"),
    ]
    response = stream(server, Reply.sse(events))
    assert (response.reasoning_text, response.msg) == ("think more", "answer")
    assert [c.thinking for c in response if c.thinking] == ["think ", "more"]


def test_no_reasoning_is_none(server: ScriptedServer) -> None:
    assert stream(server).reasoning_text is None


@pytest.mark.parametrize(
    "event",
    [
        {"error": {"message": "upstream overloaded", "code": 529}},
        {"choices": [{"index": 0, "delta": {}, "error": {"message": "upstream overloaded"}}]},
    ],
)
def test_in_band_errors_fail_with_the_providers_message(
    server: ScriptedServer, event: dict[str, Any]
) -> None:
    response = stream(server, Reply.sse([delta("so far"), event]))
    assert (response.error_class, response.err) == ("response", "upstream overloaded")
    assert response.latest == "so far"


def test_finish_reason_error_fails(server: ScriptedServer) -> None:
    response = stream(server, Reply.sse([delta("x"), delta(finish="error")]))
    assert response.error_class == "response" and "error" in (response.err or "")


def test_http_error_before_the_stream(server: ScriptedServer) -> None:
    response = stream(server, Reply.error(400, "request exceeds the available context size"))
    assert (response.error_class, response.error_status) == ("http", 400)
    assert response.err == "request exceeds the available context size"


def test_a_server_that_ignores_stream_still_answers(server: ScriptedServer) -> None:
    body = {"choices": [{"message": {"content": "whole"}, "finish_reason": "stop"}]}
    response = stream(server, Reply.json(body))
    assert response.is_success and response.msg == "whole"
    assert [c.content for c in response] == ["whole"]


def test_comment_pings_refresh_activity(server: ScriptedServer) -> None:
    response = stream(server, Reply.sse([": ping\n\n", delta("a"), delta(finish="stop")]))
    assert response.is_success and response.last_activity_at is not None


def test_text_completion_stream(server: ScriptedServer) -> None:
    backend = OpenAICommon(server.url, template=ChatML())
    response = backend.text_completion_stream(HI).wait(10)
    assert response.is_success and response.msg == "Hello streaming world"
    assert server.requests[0].path == "/v1/completions"
    assert server.requests[0].json()["stream"] is True


# -- hooks ---------------------------------------------------------------------------------


def test_reconcile_runs_once_at_settle_after_the_usage_frame(server: ScriptedServer) -> None:
    seen: list[tuple[str, int | None]] = []

    class Kobold(OpenAICommon):
        def _reconcile_finish_reason(self, response: Response, reason: str, request: Any) -> str:
            seen.append((reason, response.completion_tokens))
            response.finish_reason_evidence = "stop sequence matched"
            return "stop"

    server.push(Reply.sse([delta("x"), delta(finish="length"), usage_event(completion=5)]))
    response = Kobold(server.url).chat_completion_stream(HI).wait(10)
    assert seen == [("length", 5)]
    assert response.is_success and response.finish_reason == "stop"
    assert response.provider_finish_reason == "length"


def test_on_stream_complete_runs_before_done(server: ScriptedServer) -> None:
    seen: list[bool] = []

    class Hooked(OpenAICommon):
        def _on_stream_complete(self, response: Response) -> None:
            seen.append(response.is_done)

    assert Hooked(server.url).chat_completion_stream(HI).wait(10).is_success
    assert seen == [False]


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
