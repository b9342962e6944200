"""Streams over real sockets: every ending and fault has its own test (cancels, no
buffering and the live Response: test_streaming_cancel.py).

The loopback server plays literal frames; the server side is asserted too
(whether and when the client hung up). Nothing sleeps: waits are on events.
"""

from __future__ import annotations

import functools
from typing import Any

import pytest

from llmchat import OpenAICommon
from llmchat.response import Response
from llmchat.templates import ChatML
from llmchat.testing import (
    ChatResponder,
    Drop,
    Reply,
    ScriptedServer,
    Stall,
    Write,
)

from .streaming_support import CLOSED, HI, call_fragment, delta, stream, usage_event

# The `server` fixture (tests/conftest.py) runs this script, fresh for each test.
SERVER_SCRIPT = functools.partial(ChatResponder, "Hello streaming world", chunk_size=3)


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
