"""What every request says about its client, over real sockets: the User-Agent,
query-string-safe URLs, and a connection pool sized for the threads sharing a backend.
"""

from __future__ import annotations

import json
import logging
import threading

import pytest

import llmchat
from llmchat import OpenAICommon
from llmchat.templates import ChatML
from llmchat.testing import ChatResponder, Reply, ScriptedServer, WaitFor

HI = [{"role": "user", "content": "Hi there"}]
CHAT_BODY = {
    "choices": [
        {"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}
    ]
}


def test_user_agent_on_every_path() -> None:
    srv = ScriptedServer(ChatResponder("Hello."))
    with srv as url:
        backend = OpenAICommon(url, template=ChatML())
        assert backend.chat_completion(HI).is_success
        assert backend.chat_completion_stream(HI).wait(timeout=10).is_success
        assert backend.text_completion(HI).is_success
        backend.probe_server_limits()
    agents = {r.headers.get("User-Agent") for r in srv.requests}
    assert agents == {f"llmchat/{llmchat.__version__}"}
    assert len(srv.requests) == 4


def test_a_hook_may_name_its_own_user_agent() -> None:
    class Gateway(OpenAICommon):
        def _get_api_headers(self) -> dict[str, str]:
            return {**super()._get_api_headers(), "User-Agent": "team-gateway/2"}

    srv = ScriptedServer(ChatResponder("Hello."))
    with srv as url:
        assert Gateway(url).chat_completion(HI).is_success
    assert srv.requests[0].headers.get("User-Agent") == "team-gateway/2"


def test_routes_go_before_the_api_url_query() -> None:
    srv = ScriptedServer(ChatResponder("Hello."))
    with srv as url:
        backend = OpenAICommon(url + "?api-version=2024-06-01", template=ChatML())
        assert backend.chat_completion(HI).is_success
        assert backend.chat_completion_stream(HI).wait(timeout=10).is_success
        assert backend.text_completion(HI).is_success
        limits = backend.probe_server_limits()
    paths = [r.path for r in srv.requests]
    assert paths == [
        "/v1/chat/completions?api-version=2024-06-01",
        "/v1/chat/completions?api-version=2024-06-01",
        "/v1/completions?api-version=2024-06-01",
        "/props?api-version=2024-06-01",
    ]
    assert "context_length" in limits


def test_pool_size_is_validated_and_cloned() -> None:
    with pytest.raises(TypeError, match="pool_size"):
        OpenAICommon("http://127.0.0.1:9/v1", pool_size="8")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="pool_size"):
        OpenAICommon("http://127.0.0.1:9/v1", pool_size=0)
    backend = OpenAICommon("http://127.0.0.1:9/v1", pool_size=8)
    assert backend.clone().pool_size == 8
    assert OpenAICommon("http://127.0.0.1:9/v1").pool_size == 64


def test_threads_sharing_a_backend_fit_its_pool(caplog: pytest.LogCaptureFixture) -> None:
    """48 calls in flight at once through one backend: every connection goes back to the pool."""
    threads_n = 48
    release = threading.Event()
    results: list[bool] = []
    lock = threading.Lock()
    srv = ScriptedServer(ChatResponder("Hello."))
    with srv as url:
        reply = Reply(body=json.dumps(CHAT_BODY), before_headers=[WaitFor(release, timeout=30)])
        for _ in range(threads_n):
            srv.push(reply)
        backend = OpenAICommon(url)

        def call() -> None:
            ok = backend.chat_completion(HI).is_success
            with lock:
                results.append(ok)

        with caplog.at_level(logging.WARNING, logger="urllib3"):
            workers = [threading.Thread(target=call) for _ in range(threads_n)]
            for worker in workers:
                worker.start()
            assert srv.wait_for_requests(threads_n, timeout=30)  # all in flight together
            release.set()
            for worker in workers:
                worker.join(timeout=30)
        backend.close()
    assert results == [True] * threads_n
    assert not [r for r in caplog.records if "pool is full" in r.getMessage()]
