"""llmchat.retry: classify, backoff, and Inference over loopback servers."""

from __future__ import annotations

import email.utils
import logging
import threading
import time
from collections.abc import Iterator

import pytest

from llmchat.backends.openai_common import OpenAICommon
from llmchat.errors import LLMChatError
from llmchat.retry import (
    MAX_RETRY_AFTER,
    Attempt,
    Cancelled,
    Exhausted,
    Inference,
    TimedOut,
    Truncated,
    backoff,
    classify,
    policy,
)
from llmchat.retry import inference as inference_module
from llmchat.testing import ChatResponder, Reply, ScriptedServer, Stall

MESSAGES = [{"role": "user", "content": "Hi"}]
SECRET = "sk-test-SECRET-123456"


@pytest.fixture
def no_backoff(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, object]]:
    """Make every backoff zero; record the (attempt, retry_after) it was asked for."""
    calls: list[tuple[int, object]] = []

    def fake(attempt: int, retry_after: object = None) -> float:
        calls.append((attempt, retry_after))
        return 0.0

    monkeypatch.setattr(inference_module, "backoff", fake)
    return calls


@pytest.fixture
def servers() -> Iterator[tuple[ScriptedServer, ScriptedServer]]:
    one = ScriptedServer(ChatResponder("from one")).start()
    two = ScriptedServer(ChatResponder("from two")).start()
    try:
        yield one, two
    finally:
        one.stop()
        two.stop()


def backends(*servers: ScriptedServer, **kwargs: object) -> list[OpenAICommon]:
    return [OpenAICommon(s.url, model=f"m{i}", **kwargs) for i, s in enumerate(servers)]


# -- classify ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("error_class", "status", "parser_failed", "expected"),
    [
        ("http", 400, True, "advance"),
        (None, None, True, "advance"),
        ("http", 400, False, "abort"),
        ("http", 401, False, "abort"),
        ("http", 402, False, "abort"),
        ("http", 403, False, "abort"),
        ("http", 404, False, "abort"),
        ("http", 429, False, "advance"),
        ("http", 500, False, "retry-same"),
        ("http", 502, False, "retry-same"),
        ("http", 503, False, "retry-same"),
        ("http", 599, False, "retry-same"),
        ("http", 408, False, "advance"),
        ("http", 409, False, "advance"),
        ("http", 302, False, "advance"),
        ("timeout", None, False, "advance"),
        ("connection", None, False, "retry-same"),
        ("response", None, False, "advance"),
        ("unknown", None, False, "retry-same"),
        ("something-else", None, False, "retry-same"),
        (None, None, False, "retry-same"),
    ],
)
def test_classify(error_class: str | None, status: int | None, parser_failed: bool, expected: str):
    assert classify(error_class, status, parser_failed=parser_failed) == expected


# -- backoff ----------------------------------------------------------------


@pytest.mark.parametrize("attempt", [1, 2, 3, 4, 5])
def test_backoff_bounds(attempt: int):
    low = 2 ** (attempt - 1)
    for _ in range(300):
        assert low <= backoff(attempt) <= low + 0.5


@pytest.mark.parametrize("attempt", [6, 7, 20, 1000])
def test_backoff_capped_at_30(attempt: int):
    for _ in range(50):
        assert backoff(attempt) == 30


def test_backoff_retry_after_seconds():
    assert backoff(1, "7") == 7.0
    assert backoff(5, " 0 ") == 0.0
    assert backoff(1, "2.5") == 2.5


def test_backoff_retry_after_http_date():
    when = email.utils.formatdate(time.time() + 20, usegmt=True)
    assert 15 <= backoff(1, when) <= 21
    past = email.utils.formatdate(time.time() - 3600, usegmt=True)
    assert backoff(3, past) == 0.0


def test_backoff_retry_after_capped_and_floored():
    assert backoff(1, "3600") == MAX_RETRY_AFTER == 60
    far = email.utils.formatdate(time.time() + 86400, usegmt=True)
    assert backoff(1, far) == MAX_RETRY_AFTER
    assert backoff(1, "-5") == 0.0


@pytest.mark.parametrize("garbage", ["", "soon", "nan", "inf", "Mon, 99 Foo", "1e999x"])
def test_backoff_retry_after_garbage_ignored(garbage: str):
    for _ in range(20):
        assert 2 <= backoff(2, garbage) <= 2.5


def test_sleep_wakes_on_cancel():
    event = threading.Event()
    threading.Timer(0.05, event.set).start()
    assert policy.sleep_unless_cancelled(30, event) is True
    assert policy.sleep_unless_cancelled(0.01, threading.Event()) is False


# -- argument validation ------------------------------------------------------


def test_arguments_validated_before_io():
    backend = OpenAICommon("http://127.0.0.1:9/v1")
    with pytest.raises(TypeError, match="backends"):
        Inference(backend)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="backends"):
        Inference([])
    with pytest.raises(TypeError, match=r"backends\[0\]"):
        Inference([object()])
    with pytest.raises(TypeError, match="max_retries"):
        Inference([backend], max_retries=True)
    with pytest.raises(ValueError, match="max_retries"):
        Inference([backend], max_retries=-1)
    with pytest.raises(ValueError, match="timeout"):
        Inference([backend], timeout=0)
    with pytest.raises(TypeError, match="timeout"):
        Inference([backend], timeout="5")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="parser"):
        Inference([backend], parser=3)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="on_attempt"):
        Inference([backend], on_attempt="x")  # type: ignore[arg-type]


def test_exceptions_are_llmchat_errors():
    assert issubclass(Exhausted, LLMChatError)
    assert issubclass(Truncated, Exhausted)
    assert issubclass(TimedOut, Exhausted)
    assert issubclass(Cancelled, LLMChatError)


# -- Inference over loopback servers -------------------------------------------


def test_success_first_try(servers):
    one, two = servers
    r = Inference(backends(one, two)).run(MESSAGES)
    assert r.is_success and r.msg == "from one"
    assert len(one.requests) == 1 and len(two.requests) == 0


def test_500_then_success_on_same_backend(servers, no_backoff):
    one, two = servers
    one.push(Reply.error(500, "boom"))
    seen: list[Attempt] = []
    r = Inference(backends(one, two), on_attempt=seen.append).run(MESSAGES)
    assert r.msg == "from one"
    assert len(one.requests) == 2 and len(two.requests) == 0
    assert no_backoff == [(1, None)]
    assert [a.success for a in seen] == [False, True]
    assert seen[0].error_status == 500 and seen[0].decision == "retry-same"
    assert seen[0].backend_index == seen[1].backend_index == 0


def test_retry_budget_then_advance(servers, no_backoff):
    one, two = servers
    for _ in range(3):
        one.push(Reply.error(502, "bad gateway"))
    r = Inference(backends(one, two), max_retries=2).run(MESSAGES)
    assert r.msg == "from two"
    assert len(one.requests) == 3 and len(two.requests) == 1
    assert [n for n, _ in no_backoff] == [1, 2]


def test_429_advances_to_next_backend(servers, no_backoff):
    one, two = servers
    one.push(Reply.error(429, "slow down"))
    r = Inference(backends(one, two)).run(MESSAGES)
    assert r.msg == "from two"
    assert len(one.requests) == 1 and len(two.requests) == 1
    assert no_backoff == []


def test_401_aborts_at_once(servers, no_backoff):
    one, two = servers
    one.push(Reply.error(401, "bad key"))
    with pytest.raises(Exhausted) as info:
        Inference(backends(one, two)).run(MESSAGES)
    assert type(info.value) is Exhausted
    assert len(info.value.attempts) == 1
    assert info.value.attempts[0].error_status == 401
    assert info.value.attempts[0].decision == "abort"
    assert len(one.requests) == 1 and len(two.requests) == 0


def test_parser_failure_advances(servers):
    one, two = servers

    def parser(response):
        if "one" in response.msg:
            raise ValueError("not what I wanted")
        return response.msg.upper()

    seen: list[Attempt] = []
    r = Inference(backends(one, two), parser=parser, on_attempt=seen.append).run(MESSAGES)
    assert r.parsed == "FROM TWO"
    assert len(one.requests) == 1 and len(two.requests) == 1
    assert seen[0].error_class == "parser" and "not what I wanted" in (seen[0].message or "")
    assert seen[0].decision == "advance"


def test_all_fail_exhausted_lists_every_attempt(servers, no_backoff):
    one, two = servers
    one.push(Reply.error(500, "first"))
    one.push(Reply.error(500, "second"))
    two.push(Reply.error(429, "third"))
    with pytest.raises(Exhausted) as info:
        Inference(backends(one, two), max_retries=1).run(MESSAGES)
    exc = info.value
    assert type(exc) is Exhausted
    assert [(a.backend_index, a.error_status) for a in exc.attempts] == [
        (0, 500),
        (0, 500),
        (1, 429),
    ]
    assert [a.number for a in exc.attempts] == [1, 2, 3]
    text = str(exc)
    assert "#1" in text and "#2" in text and "#3" in text
    assert "429" in text and "m1" in text


def test_length_everywhere_truncated():
    with (
        ScriptedServer(ChatResponder("partial one", finish_reason="length")) as url1,
        ScriptedServer(ChatResponder("partial two", finish_reason="length")) as url2,
    ):
        inference = Inference([OpenAICommon(url1), OpenAICommon(url2)])
        with pytest.raises(Truncated) as info:
            inference.run(MESSAGES)
    exc = info.value
    assert exc.partial_text == "partial two"
    assert exc.completion_tokens is not None and exc.usage is not None
    assert [a.finish_reason for a in exc.attempts] == ["length", "length"]
    assert isinstance(exc, Exhausted)


def test_per_attempt_timeout_timed_out():
    with ScriptedServer(Reply(before_headers=[Stall()])) as url:
        with pytest.raises(TimedOut) as info:
            Inference([OpenAICommon(url)], timeout=0.3).run(MESSAGES)
    (attempt,) = info.value.attempts
    assert attempt.error_class == "timeout" and attempt.decision == "advance"
    assert attempt.message == "No answer within Inference timeout (0.3s)"


def test_per_attempt_timeout_cancels_server_generation():
    server = ScriptedServer(Reply(before_headers=[Stall()])).start()
    try:
        with pytest.raises(TimedOut):
            Inference([OpenAICommon(server.url)], timeout=0.3).run(MESSAGES)
        assert server.wait_for_requests(1, timeout=5)
        assert server.requests[0].disconnected.wait(5), "server never saw the disconnect"
    finally:
        server.stop()


def test_cancel_during_backoff_sleep(servers):
    one, two = servers
    one.push(Reply.error(503, "busy", headers={"Retry-After": "30"}))
    fired = threading.Event()
    inference = Inference(backends(one, two), on_attempt=lambda a: fired.set())
    outcome: dict[str, BaseException] = {}
    finished = threading.Event()

    def target():
        try:
            inference.run(MESSAGES)
        except BaseException as exc:
            outcome["exc"] = exc
        finally:
            finished.set()

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    assert fired.wait(5)
    inference.cancel()
    assert finished.wait(5), "run did not stop on cancel()"
    assert isinstance(outcome.get("exc"), Cancelled)
    assert len(outcome["exc"].attempts) == 1
    assert len(one.requests) == 1 and len(two.requests) == 0


def test_cancel_during_live_attempt():
    server = ScriptedServer(Reply(before_headers=[Stall()])).start()
    try:
        inference = Inference([OpenAICommon(server.url)], timeout=60)
        outcome: dict[str, BaseException] = {}
        finished = threading.Event()

        def target():
            try:
                inference.run(MESSAGES)
            except BaseException as exc:
                outcome["exc"] = exc
            finally:
                finished.set()

        threading.Thread(target=target, daemon=True).start()
        assert server.wait_for_requests(1, timeout=5)
        inference.cancel()
        assert finished.wait(5)
        assert isinstance(outcome.get("exc"), Cancelled)
        assert server.requests[0].disconnected.wait(5)
    finally:
        server.stop()


def test_retry_after_header_reaches_backoff(servers, no_backoff):
    one, two = servers
    one.push(Reply.error(503, "busy", headers={"Retry-After": "12"}))
    Inference(backends(one, two)).run(MESSAGES)
    assert no_backoff == [(1, "12")]


def test_on_attempt_records_and_raising_callback_swallowed(servers, no_backoff, caplog):
    one, two = servers
    one.push(Reply.error(429, "slow"))
    seen: list[Attempt] = []

    def callback(attempt: Attempt) -> None:
        seen.append(attempt)
        raise RuntimeError("callback broke")

    with caplog.at_level(logging.ERROR, logger="llmchat"):
        r = Inference(backends(one, two), on_attempt=callback).run(MESSAGES)
    assert r.msg == "from two"
    assert len(seen) == 2
    first, second = seen
    assert (first.number, first.backend_index, first.model) == (1, 0, "m0")
    assert first.error_class == "http" and not first.success and first.latency_seconds >= 0
    assert second.success and second.finish_reason == "stop" and second.error_class is None
    assert second.prompt_tokens is not None and second.completion_tokens is not None
    assert "callback broke" in caplog.text


def test_no_api_key_in_exhausted_message(servers, no_backoff):
    one, two = servers
    one.push(Reply.error(401, f"Invalid key {SECRET}"))
    with pytest.raises(Exhausted) as info:
        Inference(backends(one, two, api_key=SECRET)).run(MESSAGES)
    assert SECRET not in str(info.value)
    assert all(SECRET not in repr(a) for a in info.value.attempts)


def test_run_stream_fails_over_before_content(servers, no_backoff):
    one, two = servers
    one.push(Reply.error(429, "slow"))
    r = Inference(backends(one, two)).run_stream(MESSAGES)
    r.wait(5)
    assert r.is_success and r.msg == "from two"


def test_run_stream_returns_live_response_once_content_started():
    with ScriptedServer(ChatResponder("abcdefgh", chunk_size=2, delay=0.05)) as url:
        r = Inference([OpenAICommon(url)]).run_stream(MESSAGES)
        assert r.timing.ttft_seconds is not None
        r.wait(5)
        assert r.is_success and r.msg == "abcdefgh"


def test_run_stream_rejects_parser(servers):
    one, _ = servers
    with pytest.raises(ValueError, match="parser"):
        Inference(backends(one), parser=lambda r: r.msg).run_stream(MESSAGES)


def test_inference_over_mock_backends(monkeypatch: pytest.MonkeyPatch) -> None:
    from llmchat import MockBackend

    monkeypatch.setattr(inference_module, "backoff", lambda attempt, retry_after=None: 0.0)
    flaky = MockBackend(
        [
            {"error_class": "http", "error_status": 500, "err": "oops"},
            {"error_class": "http", "error_status": 429, "err": "busy"},
        ]
    )
    steady = MockBackend([{"text": "fine"}])
    records: list[Attempt] = []
    response = Inference([flaky, steady], max_retries=3, on_attempt=records.append).run(
        [{"role": "user", "content": "hi"}]
    )
    assert response.is_success and response.msg == "fine"
    assert [(r.backend_index, r.error_status) for r in records] == [(0, 500), (0, 429), (1, None)]
    assert len(flaky.recorded_calls) == 2 and len(steady.recorded_calls) == 1
