"""The Inference run's own deadline: no wait past it, no wait longer than an attempt.

Over loopback servers. A server answering 503 with ``Retry-After: 30`` once
made `Inference(timeout=10)` sleep 30 s (up to 60) before retrying. Now
(spec: RUN DEADLINE) a retry wait longer than `timeout`, or ending past
`deadline`, is not taken: the run moves to the next backend at once, or gives
up with the last failure and says why; `deadline` also clips each attempt.
The runs happen on a thread and are waited on with an event: the bound
(10 s) only proves "not the 30 s the server asked for".
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest
import requests

from llmchat.backends.openai_common import OpenAICommon
from llmchat.errors import InvalidArgumentError, InvalidTypeError
from llmchat.retry import Exhausted, Inference, TimedOut
from llmchat.testing import ChatResponder, RecordedRequest, Reply, ScriptedServer, Stall

from ..support.proxy import running_proxy

MESSAGES = [{"role": "user", "content": "Hi"}]
BOUND = 10.0  # far below the 30 s the server asks for


def _busy(request: RecordedRequest) -> Reply:
    return Reply.error(503, "busy", headers={"Retry-After": "30"})


def _finish(inference: Inference) -> BaseException | None:
    """Run `inference` on a thread; what it raised, once it ended within BOUND."""
    outcome: dict[str, BaseException] = {}
    finished = threading.Event()

    def target() -> None:
        try:
            inference.run(MESSAGES)
        except BaseException as exc:
            outcome["exc"] = exc
        finally:
            finished.set()

    threading.Thread(target=target, daemon=True).start()
    try:
        assert finished.wait(BOUND), "the run waited for Retry-After"
    finally:
        inference.cancel()  # a run still sleeping (the old rule) stops here
    return outcome.get("exc")


@pytest.mark.parametrize(
    "make",
    [
        pytest.param(lambda b: Inference(b, deadline=2), id="deadline"),
        pytest.param(lambda b: Inference(b, timeout=2), id="timeout"),
    ],
)
def test_retry_after_past_the_budget_is_not_waited(make: Callable[[Any], Inference]) -> None:
    with ScriptedServer(_busy) as url:
        raised = _finish(make([OpenAICommon(url, model="m")]))
    assert isinstance(raised, Exhausted) and not isinstance(raised, TimedOut)
    (attempt,) = raised.attempts  # no second attempt: the wait was not taken
    assert (attempt.error_class, attempt.error_status) == ("http", 503)
    assert "not waiting 30s (Retry-After)" in str(raised)


def test_a_too_long_retry_after_moves_on_to_the_next_backend() -> None:
    with ScriptedServer(_busy) as busy, ScriptedServer(ChatResponder("from two")) as two:
        inference = Inference(
            [OpenAICommon(busy, model="a"), OpenAICommon(two, model="b")], timeout=5
        )
        done = threading.Event()
        result: dict[str, Any] = {}

        def target() -> None:
            try:
                result["response"] = inference.run(MESSAGES)
            except BaseException as exc:  # the old rule's sleep, cancelled below
                result["exc"] = exc
            finally:
                done.set()

        threading.Thread(target=target, daemon=True).start()
        try:
            assert done.wait(BOUND), "the run waited for Retry-After"
        finally:
            inference.cancel()
    assert result["response"].msg == "from two"


def test_the_deadline_clips_each_attempt() -> None:
    with ScriptedServer(Reply(before_headers=[Stall()])) as url:
        raised = _finish(Inference([OpenAICommon(url, model="m")], timeout=60, deadline=0.5))
    assert isinstance(raised, TimedOut)
    (attempt,) = raised.attempts
    assert attempt.message == "No answer within the Inference run deadline (0.5s)"


def test_deadline_is_checked_before_any_request() -> None:
    backend = OpenAICommon("http://127.0.0.1:9/v1", model="m")
    with pytest.raises(InvalidArgumentError, match="deadline"):
        Inference([backend], deadline=0)
    with pytest.raises(InvalidTypeError, match="deadline"):
        Inference([backend], deadline="5")  # type: ignore[arg-type]


def test_the_proxy_keeps_its_chains_deadline() -> None:
    with ScriptedServer(Reply(before_headers=[Stall()])) as upstream:
        chain = Inference([OpenAICommon(upstream, model="m")], timeout=60, deadline=0.5)
        with running_proxy(chain) as url:
            answered = requests.post(  # a face that runs the chain (the relay does not)
                url + "/api/chat",
                json={"model": "m", "messages": MESSAGES, "stream": False},
                timeout=BOUND,  # the proxy's own 60 s attempt timeout would trip this
            )
    assert answered.status_code == 504
