"""A key over its budget: a 429 in the face's shape that the SDKs do not retry, before any
node is chosen (Gemini's: RESOURCE_EXHAUSTED with its RetryInfo); and the event's cost
filled from the config's prices."""

from __future__ import annotations

from typing import Any

import anthropic
import openai
import pytest

from llmchat.backends.gemini import Gemini
from llmchat.proxy.routing.config import Budget

from ..faces.gemini_support import HOWS, generate, text_of
from ..routing.nodes_support import chat, nodes, openai_client
from ..support import anthropic_client
from .budget_proxy import budget_proxy


def test_over_its_token_budget_a_key_gets_a_429_no_sdk_retries() -> None:
    with nodes("a") as (a,), budget_proxy(a, Budget(tokens=1)) as (url, app, sink):
        client = openai.OpenAI(base_url=url + "/v1", api_key="sk-alice-SECRET", max_retries=3)
        assert chat(client, "m").headers["x-llmchat-node"] == "a"
        [served] = sink.wait(1)
        assert (
            served["cost"] == (served["input_tokens"] * 1.0 + served["output_tokens"] * 2.0) / 1e6
        )
        with pytest.raises(openai.RateLimitError) as refused:
            chat(client, "m")
        headers = refused.value.response.headers
        assert headers["x-should-retry"] == "false" and int(headers["retry-after"]) >= 1
        assert "token budget" in refused.value.message
        with pytest.raises(anthropic.RateLimitError) as in_anthropic:
            anthropic_client(url, "sk-alice-SECRET").messages.create(
                model="m", max_tokens=10, messages=[{"role": "user", "content": "hi"}]
            )
        body: Any = in_anthropic.value.body
        assert body["error"]["type"] == "rate_limit_error"
        assert a.chats == 1  # refused before any node; max_retries=3 made no second try
        events = sink.wait(3)
        assert [e["error_type"] for e in events[1:]] == ["budget", "budget"]
        [row] = app.budgets.report()
        assert row["key"] == "alice" and row["left"]["tokens"] == 0
        assert "sk-alice" not in repr(row)
        client.close()


def test_without_a_budget_nothing_changes() -> None:
    with nodes("a") as (a,), budget_proxy(a, Budget(rpm=100)) as (url, _app, _sink):
        client = openai_client(url, "sk-alice-SECRET")
        for _ in range(3):
            chat(client, "m")
        assert a.chats == 3


@pytest.mark.parametrize("how", HOWS)
def test_a_gemini_client_over_its_budget_gets_resource_exhausted_with_retry_info(how) -> None:
    """Gemini CLI reads the wait from the RetryInfo detail (it sleeps out five minutes or
    less, ends the turn past that); streamed or not, the refusal comes before any node."""
    key = {"x-goog-api-key": "sk-alice-SECRET"}
    with nodes("a") as (a,), budget_proxy(a, Budget(tokens=1)) as (url, _app, sink):
        served, chunks = generate(url, how, "m", headers=key)
        assert served.status == 200 and text_of(chunks) == "answer from a", served
        refused, _ = generate(url, how, "m", headers=key)
        with Gemini(url + "/v1beta", model="m", api_key="sk-alice-SECRET") as backend:
            read = backend.chat_completion([{"role": "user", "content": "hi"}])
        events = sink.wait(3)
    assert refused.status == 429, refused
    wait = int(refused.headers["retry-after"])
    assert wait >= 1 and refused.headers["x-should-retry"] == "false"
    assert refused.headers["content-type"].startswith("application/json")
    assert refused.json() == {
        "error": {
            "code": 429,
            "message": f"This API key reached its token budget; try again in {wait} s",
            "status": "RESOURCE_EXHAUSTED",
            "details": [
                {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": f"{wait}s"}
            ],
        }
    }
    assert (read.error_class, read.error_status) == ("http", 429)
    assert "token budget" in read.err and "sk-alice" not in repr(read)
    assert a.chats == 1
    assert sorted(e["error_type"] or "" for e in events) == ["", "budget", "budget"]
    assert {(e["face"], e["key_id"]) for e in events} == {("gemini", "alice")}
