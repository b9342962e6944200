"""Response: one settle point, cancel semantics, waiting and iteration."""

from __future__ import annotations

import threading

import pytest

from llmchat import errors
from llmchat.chunk import Chunk
from llmchat.response import Response


def test_settles_once() -> None:
    response = Response()
    assert response._settle(error_class="response", err="Hit max tokens")
    assert not response._settle()
    assert (response.is_done, response.is_success, response.error_class) == (
        True,
        False,
        "response",
    )
    assert response.timing.total_seconds is not None


def test_cancel_is_synchronous_and_keeps_text() -> None:
    torn_down = threading.Event()
    response = Response()
    response._add_text("partial")
    response._attach_aborter(torn_down.set)
    response.cancel()
    assert response.is_done and response.is_cancelled and response.cancel_requested
    assert response.err == "Cancelled by user" and response.error_class is None
    assert not response.is_success
    assert response.latest == "partial" == response.msg
    assert torn_down.is_set()


def test_cancel_after_success_is_a_no_op() -> None:
    response = Response()
    response._settle()
    response.cancel()
    # A late cancel is a no-op: cancel_requested stays False (it used to be set).
    assert response.is_success and not response.is_cancelled and not response.cancel_requested


def test_aborter_attached_after_cancel_runs_at_once() -> None:
    response = Response()
    response.cancel()
    torn_down = threading.Event()
    response._attach_aborter(torn_down.set)
    assert torn_down.is_set()


def test_failing_aborter_does_not_break_cancel() -> None:
    def boom() -> None:
        raise OSError("already closed")

    response = Response()
    response._attach_aborter(boom)
    response.cancel()
    assert response.is_cancelled


def test_wait_returns_when_settled_from_another_thread() -> None:
    response = Response()
    started = threading.Event()

    def settle() -> None:
        started.wait(5)
        response._settle()

    worker = threading.Thread(target=settle)
    worker.start()
    started.set()
    assert response.wait(5) is response
    worker.join(5)
    assert response.is_success


def test_wait_with_timeout_on_a_live_response() -> None:
    response = Response()
    assert response.wait(0.01) is response and not response.is_done


def test_each_iterator_replays_then_follows() -> None:
    response = Response()
    response._add_chunk(Chunk("a"))
    first = iter(response)
    assert next(first).content == "a"
    response._add_chunk(Chunk("b"))
    response._settle()
    assert [c.content for c in first] == ["b"]
    assert [c.content for c in response] == ["a", "b"]
    assert list(response.iter_text()) == ["a", "b"]


def test_context_manager_cancels_a_live_response() -> None:
    with Response() as response:
        pass
    assert response.is_cancelled


def test_raise_for_error() -> None:
    ok = Response()
    ok._settle()
    assert ok.raise_for_error() is ok
    failed = Response()
    failed._add_text("half")
    failed._settle(error_class="http", err="Unauthorized", error_status=401)
    with pytest.raises(errors.HTTPStatusError, match="Unauthorized") as info:
        failed.raise_for_error()
    assert info.value.status == 401 and info.value.response.latest == "half"
    cancelled = Response()
    cancelled.cancel()
    assert cancelled.raise_for_error() is cancelled


def test_secrets_are_scrubbed_from_err() -> None:
    response = Response(secrets=("sk-SECRET",))
    response._settle(error_class="http", err="invalid key sk-SECRET", error_status=401)
    assert response.err == "invalid key [redacted]"
    assert "sk-SECRET" not in repr(response)


def test_reasoning_and_refusal_are_none_until_sent() -> None:
    response = Response()
    assert response.reasoning_text is None and response.refusal is None
    response._add_reasoning("hmm")
    assert response.reasoning_text == "hmm"
