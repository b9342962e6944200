"""MockBackend: scripted replies, real request pipeline, real settle rules, no sockets."""

from __future__ import annotations

import threading

import pytest

from llmchat.backends.mock import MockBackend, RecordedCall
from llmchat.chunk import Chunk
from llmchat.errors import InvalidArgumentError
from llmchat.messages import Message
from llmchat.response import Response
from llmchat.settings import Settings
from llmchat.templates.chatml import ChatML
from llmchat.tools import ToolCall

HI = [{"role": "user", "content": "Hi"}]
USAGE = {
    "prompt_tokens": 7,
    "completion_tokens": 5,
    "total_tokens": 12,
    "prompt_tokens_details": {"cached_tokens": 3},
    "completion_tokens_details": {"reasoning_tokens": 2},
}
CALL = {"id": "c1", "type": "function", "function": {"name": "add", "arguments": '{"a": 1}'}}
WAIT = 5.0


def finished(response: Response) -> Response:
    assert response.wait(WAIT).is_done
    return response


# -- blocking ----------------------------------------------------------------


def test_blocking_text_usage_and_model() -> None:
    backend = MockBackend([{"text": "Hello there.", "usage": USAGE}])
    r = backend.chat_completion(HI)
    assert r.is_done and r.is_success
    assert r.msg == "Hello there."
    assert r.finish_reason == "stop" and r.provider_finish_reason == "stop"
    assert (r.prompt_tokens, r.completion_tokens, r.total_tokens) == (7, 5, 12)
    assert (r.cached_tokens, r.reasoning_tokens) == (3, 2)
    assert r.usage == USAGE
    assert r.model == "mock"
    assert r.reasoning_text is None and r.tool_calls == []
    chunks = list(r)
    assert len(chunks) == 1 and chunks[0].is_final and chunks[0].content == "Hello there."


def test_blocking_reasoning_and_tool_calls() -> None:
    tc = ToolCall(name="mul", arguments={"x": 2}, id="c2")
    backend = MockBackend([{"reasoning": "Think.", "tool_calls": [CALL, tc]}], model="m1")
    r = backend.chat_completion(HI)
    assert r.is_success
    assert r.reasoning_text == "Think."
    assert r.msg == ""
    assert r.finish_reason == "tool_calls"
    assert r.tool_calls == [ToolCall.from_openai(CALL), tc]
    assert r.tool_calls[0].arguments == {"a": 1}
    assert r.model == "m1"


def test_length_is_a_failure_with_text_kept() -> None:
    backend = MockBackend([{"text": "Cut o", "finish_reason": "length"}])
    r = backend.chat_completion(HI)
    assert r.is_done and not r.is_success
    assert r.error_class == "response"
    assert "Hit max tokens" in (r.err or "")
    assert r.msg == "Cut o"
    assert r.finish_reason == "length"


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        (
            {"error_class": "http", "error_status": 503, "err": "overloaded"},
            ("http", 503, "overloaded"),
        ),
        # Played on the wire, so the real classifier names them; a scripted
        # err is what the Response says (issue 25: it was lost, in both modes).
        ({"error_class": "timeout", "err": "too slow"}, ("timeout", None, "too slow")),
        (
            {"error_class": "connection", "err": "Service Unavailable"},
            ("connection", None, "Service Unavailable"),
        ),
        ({"error_class": "timeout"}, ("timeout", None, "No response headers within 60s")),
        ({"error_class": "connection"}, ("connection", None, "Connection refused")),
        ({"error_status": 429}, ("http", 429, "HTTP 429")),
        ({"error_class": "response", "err": "bad"}, ("response", None, "bad")),
        ({"error_class": "unknown", "err": "boom"}, ("unknown", None, "RuntimeError: boom")),
    ],
)
def test_error_replies(reply: dict, expected: tuple) -> None:
    backend = MockBackend([reply, reply])
    for r in (backend.chat_completion(HI), finished(backend.chat_completion_stream(HI))):
        assert r.is_done and not r.is_success and not r.is_cancelled
        assert (r.error_class, r.error_status, r.err) == expected
        assert r.msg == ""


def test_queue_order_and_running_out() -> None:
    backend = MockBackend([{"text": "one"}, {"text": "two"}])
    assert backend.remaining_replies == 2
    assert backend.chat_completion(HI).msg == "one"
    assert finished(backend.chat_completion_stream(HI)).msg == "two"
    assert backend.remaining_replies == 0
    r = backend.chat_completion(HI)
    assert not r.is_success
    # The mock server answers 500, as ScriptedServer does past its script.
    assert (r.error_class, r.error_status) == ("http", 500)
    assert r.err == "MockBackend has no scripted reply for call 3"
    s = finished(backend.chat_completion_stream(HI))
    assert s.err == "MockBackend has no scripted reply for call 4"
    assert len(backend.recorded_calls) == 4


def test_recorded_calls_show_normalization_and_settings() -> None:
    backend = MockBackend(
        [{"text": "a"}, {"text": "b"}],
        message_normalization="alternate-roles",
        settings=Settings(temperature=0.5),
    )
    messages = [{"role": "user", "content": "one"}, {"role": "user", "content": "two"}]
    tools = [{"type": "function", "function": {"name": "add", "parameters": {}}}]
    backend.chat_completion(messages, tools=tools, settings=Settings(max_tokens=9))
    finished(backend.chat_completion_stream(messages))
    first, second = backend.recorded_calls
    assert isinstance(first, RecordedCall)
    assert first.method == "chat_completion"
    assert first.body == dict(
        backend.prepare_chat_request(messages, tools, None, Settings(max_tokens=9)).body
    )
    assert first.body["messages"] == backend.wire_message_hashes(messages)
    assert first.body["messages"] != messages  # normalization is visible
    assert first.body["temperature"] == 0.5 and first.body["max_tokens"] == 9
    assert first.body["model"] == "mock"
    assert first.body["tools"] == tools and first.tools == tools
    assert first.messages == [
        Message(role="user", content="one"),
        Message(role="user", content="two"),
    ]
    assert second.method == "chat_completion_stream"
    assert second.body["stream"] is True
    assert second.body["stream_options"] == {"include_usage": True}
    assert "max_tokens" not in second.body


def test_bad_input_raises_before_consuming_a_reply() -> None:
    backend = MockBackend([{"text": "a"}])
    with pytest.raises(TypeError):
        backend.chat_completion(None)  # type: ignore[arg-type]
    assert backend.recorded_calls == [] and backend.remaining_replies == 1


def test_text_completions_with_and_without_template() -> None:
    plain = MockBackend([{"text": "x"}, {"text": "y z"}])
    r = plain.text_completion(HI)
    assert r.is_success and r.msg == "x"
    assert plain.recorded_calls[0].method == "text_completion"
    assert "prompt" not in plain.recorded_calls[0].body
    s = finished(plain.text_completion_stream(HI, continuation=True))
    assert s.is_success and "".join(c.content for c in s) == "y z"
    assert plain.recorded_calls[1].continuation is True
    assert plain.recorded_calls[1].body["stream"] is True

    templated = MockBackend([{"text": "ok"}], template=ChatML())
    assert templated.text_completion(HI).msg == "ok"
    body = templated.recorded_calls[0].body
    assert body["prompt"] == templated.prepare_text_request(HI).body["prompt"]
    assert "Hi" in body["prompt"]


def test_unknown_reply_keys_raise() -> None:
    with pytest.raises(ValueError, match="txt"):
        MockBackend([{"text": "ok"}, {"txt": "oops", "tool_call": []}])
    with pytest.raises(InvalidArgumentError, match="tool_call"):
        MockBackend([{"txt": "oops", "tool_call": []}])


@pytest.mark.parametrize(
    "reply",
    [
        {"text": 3},
        {"tool_calls": "add"},
        {"tool_calls": [3]},
        {"usage": [1]},
        {"finish_reason": 5},
        {"error_class": "nope"},
        {"error_class": "http", "text": "x"},
        {"error_status": "503"},
        "text",
    ],
)
def test_bad_replies_raise(reply: object) -> None:
    with pytest.raises((ValueError, TypeError)):
        MockBackend([reply])  # type: ignore[list-item]


def test_bad_delays_raise() -> None:
    with pytest.raises(ValueError, match="chunk_delay"):
        MockBackend([], chunk_delay=-1)
    with pytest.raises(ValueError, match="initial_delay"):
        MockBackend([], initial_delay="1")  # type: ignore[arg-type]


def test_reconcile_and_completion_hooks_run() -> None:
    seen: list[str] = []

    class Hooked(MockBackend):
        def _reconcile_finish_reason(self, response, reason, request):  # type: ignore[no-untyped-def]
            seen.append(f"reconcile {reason}")
            return "length" if reason == "eos" else reason

        def _on_blocking_complete(self, response):  # type: ignore[no-untyped-def]
            seen.append("blocking")

        def _on_stream_complete(self, response):  # type: ignore[no-untyped-def]
            seen.append("stream")

    backend = Hooked([{"text": "a"}, {"text": "b"}, {"text": "c", "finish_reason": "eos"}])
    assert backend.chat_completion(HI).is_success
    assert finished(backend.chat_completion_stream(HI)).is_success
    r = backend.chat_completion(HI)
    assert r.error_class == "response" and r.provider_finish_reason == "eos"
    assert seen == ["reconcile stop", "blocking", "reconcile stop", "stream", "reconcile eos"]


def test_clone_keeps_unused_replies_and_options() -> None:
    backend = MockBackend([{"text": "a"}, {"tool_calls": [CALL]}], chunk_delay=0.01, model="m")
    backend.chat_completion(HI)
    twin = backend.clone()
    assert isinstance(twin, MockBackend)
    assert twin.chunk_delay == 0.01 and twin.model == "m" and twin.remaining_replies == 1
    assert twin.recorded_calls == []
    assert twin.chat_completion(HI).tool_calls == [ToolCall.from_openai(CALL)]
    assert backend.probe_server_limits()["source"] == "mock"


# -- streaming ---------------------------------------------------------------


def test_stream_chunks_in_order() -> None:
    text = "The quick brown fox  jumps over\nthe lazy dog."
    backend = MockBackend(
        [{"text": text, "reasoning": "Let me think.", "tool_calls": [CALL], "usage": USAGE}]
    )
    r = backend.chat_completion_stream(HI)
    assert isinstance(r, Response)
    chunks = list(finished(r))
    assert r.is_success and not r.is_cancelled
    kinds = [
        "usage" if c.usage else "final" if c.is_final else "thinking" if c.thinking else "content"
        for c in chunks
    ]
    # reasoning first, then content, then one final chunk, then usage
    assert kinds == sorted(kinds, key=["thinking", "content", "final", "usage"].index)
    assert kinds.count("final") == 1 and kinds[-2:] == ["final", "usage"]
    assert "".join(c.thinking or "" for c in chunks) == "Let me think."
    assert "".join(c.content for c in chunks) == text
    assert sum(1 for c in chunks if c.content) > 5  # small pieces, not one blob
    final = next(c for c in chunks if c.is_final)
    assert final.finish_reason == "tool_calls"
    assert final.tool_calls == [ToolCall.from_openai(CALL)]
    assert all(c.tool_calls is None for c in chunks if not c.is_final)
    assert chunks[-1].usage == USAGE and chunks[-1].cached_tokens == 3
    assert r.msg == text and r.reasoning_text == "Let me think."
    assert r.tool_calls == [ToolCall.from_openai(CALL)]
    assert r.total_tokens == 12 and r.model == "mock"
    assert r.finish_reason == "tool_calls"
    assert r.timing.ttft_seconds is not None


def test_stream_without_usage_has_no_usage_chunk() -> None:
    r = finished(MockBackend([{"text": "a b"}]).chat_completion_stream(HI))
    chunks = list(r)
    assert chunks[-1].is_final and chunks[-1].finish_reason == "stop"
    assert r.usage is None and r.total_tokens is None


def test_stream_length_is_a_failure() -> None:
    r = finished(
        MockBackend([{"text": "a b c", "finish_reason": "length"}]).chat_completion_stream(HI)
    )
    assert not r.is_success and r.error_class == "response"
    assert "Hit max tokens" in (r.err or "")
    assert r.msg == "a b c"


def test_two_iterators_see_every_chunk() -> None:
    text = " ".join(f"w{i}" for i in range(30))
    backend = MockBackend([{"text": text, "usage": USAGE}], chunk_delay=0.001)
    r = backend.chat_completion_stream(HI)
    seen: list[list[Chunk]] = [[], []]

    def read(index: int) -> None:
        seen[index].extend(r)

    threads = [threading.Thread(target=read, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(WAIT)
    assert not any(t.is_alive() for t in threads)
    assert r.is_success
    assert seen[0] == seen[1] == list(r)
    assert "".join(c.content for c in seen[0]) == text


def test_cancel_mid_stream_stops_the_thread() -> None:
    text = " ".join(f"token{i}" for i in range(50))
    backend = MockBackend([{"text": text}], chunk_delay=0.05)
    r = backend.chat_completion_stream(HI)
    first = next(iter(r))
    assert first.content == "token0"
    r.cancel()
    assert r.is_done and r.is_cancelled and not r.is_success
    assert r.err == "Cancelled by user" and r.error_class is None
    assert r.wait(WAIT).is_done
    count, latest = len(list(r)), r.latest
    assert text.startswith(latest) and len(latest) < len(text)
    # The worker thread stops promptly (the cancel interrupts its wait) ...
    for t in threading.enumerate():
        if t.name == "llmchat-stream":  # the real stream reader
            t.join(WAIT)
            assert not t.is_alive()
    # ... and nothing more arrived after the cancel.
    assert len(list(r)) == count and r.latest == latest


def test_cancel_during_initial_delay() -> None:
    backend = MockBackend([{"text": "never"}], initial_delay=30.0)
    r = backend.chat_completion_stream(HI)
    assert not r.is_done
    backend.cancel(r)
    assert r.is_cancelled and r.latest == "" and list(r) == []


def test_context_manager_cancels_a_live_stream() -> None:
    backend = MockBackend([{"text": "a b c d e f g"}], initial_delay=30.0)
    with backend.chat_completion_stream(HI) as r:
        assert not r.is_done
    assert r.is_done and r.is_cancelled


def test_context_manager_keeps_a_finished_stream() -> None:
    backend = MockBackend([{"text": "a b"}])
    with backend.chat_completion_stream(HI) as r:
        r.wait(WAIT)
    assert r.is_success and not r.is_cancelled


# -- on the wire -------------------------------------------------------------


def test_replies_go_over_a_mock_transport() -> None:
    from llmchat.transport import MockTransport

    backend = MockBackend([{"text": "a"}, {"text": "b c"}])
    assert isinstance(backend.transport, MockTransport)
    backend.chat_completion(HI)
    finished(backend.chat_completion_stream(HI))
    blocking, streamed = backend.transport.requests
    assert (
        blocking.path == "/v1/chat/completions" and blocking.json == backend.recorded_calls[0].body
    )
    assert streamed.json["stream"] is True
    with pytest.raises(ValueError, match="transport"):
        MockBackend([], transport=MockTransport(lambda request: None))  # type: ignore[arg-type,return-value]


def test_streams_started_together_get_their_replies_in_call_order() -> None:
    backend = MockBackend([{"text": f"reply {i}"} for i in range(8)], initial_delay=0.01)
    streams = [backend.chat_completion_stream(HI) for _ in range(8)]
    assert [finished(s).msg for s in streams] == [f"reply {i}" for i in range(8)]


def test_initial_delay_is_a_prefill_that_counts_against_headers_timeout() -> None:
    backend = MockBackend(
        [{"text": "late"}, {"text": "late"}], initial_delay=30.0, headers_timeout=0.05
    )
    r = backend.chat_completion(HI)
    assert (r.error_class, r.err) == ("timeout", "No response headers within 0.05s")
    s = finished(backend.chat_completion_stream(HI))
    assert s.error_class == "timeout"


def test_request_timeout_ends_a_slow_stream() -> None:
    text = " ".join(f"t{i}" for i in range(100))
    backend = MockBackend([{"text": text}], chunk_delay=0.02, request_timeout=0.1)
    r = finished(backend.chat_completion_stream(HI))
    assert r.error_class == "timeout" and "request_timeout" in (r.err or "")
    assert text.startswith(r.latest) and r.latest != text


def test_streamed_tool_calls_with_object_arguments_and_text_usage() -> None:
    tc = ToolCall(name="mul", arguments={"x": 2}, id="c2")
    backend = MockBackend([{"tool_calls": [CALL, tc]}, {"text": "p q", "usage": USAGE}])
    r = finished(backend.chat_completion_stream(HI))
    assert r.is_success and r.tool_calls == [ToolCall.from_openai(CALL), tc]
    t = finished(backend.text_completion_stream(HI))
    assert t.is_success and t.msg == "p q" and t.total_tokens == 12


def test_clones_have_their_own_transport() -> None:
    backend = MockBackend([{"text": "a"}, {"text": "b"}])
    twin = backend.clone()
    assert twin.transport is not backend.transport
    assert twin.chat_completion(HI).msg == "a" and backend.chat_completion(HI).msg == "a"
    assert len(twin.recorded_calls) == len(backend.recorded_calls) == 1


def test_error_status_needs_the_http_class() -> None:
    with pytest.raises(ValueError, match="error_status"):
        MockBackend([{"error_class": "timeout", "error_status": 504}])
    with pytest.raises(ValueError, match="error_status"):
        MockBackend([{"error_status": 200}])
