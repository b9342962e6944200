"""``GET /metrics`` under the embedded server: scraped and parsed with prometheus-client's parser.

Counts come from the usage events; labels are bounded (no invented model
name, never a key); the admin key gates the route when one is set.
"""

from __future__ import annotations

import pytest
import requests

from llmchat import OpenAICommon
from llmchat.testing import ChatResponder, ScriptedServer

from ...support.metrics import Samples, scrape_until, total
from ...support.proxy import UsageSink, running_proxy
from ..faces.gemini_support import GENERATE, HOWS, generate, request

parser = pytest.importorskip("prometheus_client.parser", reason="needs the metrics extra")

CLIENT = "client-secret-0123456789"
ADMIN = "admin-secret-0123456789"


def _chats(samples: Samples) -> float:
    rows = samples.get("llmchat_requests_total", [])
    return sum(value for labels, value in rows if labels["face"] != "proxy")


def _chat(url: str, model: str, key: str = CLIENT) -> None:
    answer = requests.post(
        url + "/v1/chat/completions",
        json={"model": model, "messages": [{"role": "user", "content": "hi"}]},
        headers={"Authorization": f"Bearer {key}"},
        timeout=10,
    )
    assert answer.status_code == 200, answer.text


def test_requests_are_counted_with_bounded_labels_and_no_key() -> None:
    with ScriptedServer(ChatResponder()) as upstream_url:
        with running_proxy(OpenAICommon(upstream_url), api_key=CLIENT) as url:
            for _ in range(3):
                _chat(url, "invented-model-xyz")
            samples = scrape_until(url, lambda s: _chats(s) >= 3)
            text = requests.get(url + "/metrics", timeout=10).text
    chats = [
        (labels, value)
        for labels, value in samples["llmchat_requests_total"]
        if labels["status_class"] == "2xx" and labels["face"] != "proxy"
    ]
    assert sum(value for _, value in chats) == 3
    assert all(labels["alias"] == "other" for labels, _ in chats)
    assert "invented-model-xyz" not in text
    assert CLIENT not in text
    durations = samples["llmchat_request_duration_seconds_count"]
    assert sum(v for labels, v in durations if labels["face"] != "proxy") == 3


def test_the_gemini_face_is_its_own_label_with_its_tokens() -> None:
    sink = UsageSink()
    with ScriptedServer(ChatResponder()) as upstream_url:
        with running_proxy(OpenAICommon(upstream_url), usage_log=sink) as url:
            for how in HOWS:
                answered, _ = generate(url, how)
                assert answered.status == 200, answered
            bad = request(url, "POST", GENERATE, {"contents": "not a list"})
            assert bad.status == 400 and bad.json()["error"]["status"] == "INVALID_ARGUMENT"
            events = sink.wait(4)
            samples = scrape_until(
                url, lambda s: total(s, "llmchat_requests_total", face="gemini") >= 4
            )
    assert [e["face"] for e in events] == ["gemini"] * 4
    assert total(samples, "llmchat_requests_total", face="gemini", status_class="2xx") == 3
    assert total(samples, "llmchat_requests_total", face="gemini", status_class="4xx") == 1
    assert total(samples, "llmchat_request_duration_seconds_count", face="gemini") == 4
    # An event is emitted as its answer closes, which may be after the client read it:
    # the order of the events is not the order of the requests.
    served = [e for e in events if e["status"] == 200]
    assert len(served) == 3
    for kind, field in (("input", "input_tokens"), ("output", "output_tokens")):
        counted = sum(e[field] for e in served)
        assert total(samples, "llmchat_tokens_total", face="gemini", kind=kind) == counted > 0
    assert total(samples, "llmchat_tokens_total", face="openai") == 0


def test_the_admin_key_gates_metrics() -> None:
    with ScriptedServer(ChatResponder()) as upstream_url:
        with running_proxy(OpenAICommon(upstream_url), api_key=CLIENT, admin_key=ADMIN) as url:
            assert requests.get(url + "/metrics", timeout=10).status_code == 401
            refused = requests.get(
                url + "/metrics", headers={"Authorization": f"Bearer {CLIENT}"}, timeout=10
            )
            assert refused.status_code == 401
            assert "llmchat_requests_total" in _scrape_text(url, ADMIN)


def _scrape_text(url: str, key: str) -> str:
    answer = requests.get(url + "/metrics", headers={"Authorization": f"Bearer {key}"}, timeout=10)
    assert answer.status_code == 200
    return answer.text


def test_without_prometheus_client_metrics_is_a_503_naming_the_extra(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "prometheus_client", None)  # an import of it fails
    with ScriptedServer(ChatResponder()) as upstream_url:
        with running_proxy(OpenAICommon(upstream_url)) as url:
            answer = requests.get(url + "/metrics", timeout=10)
    assert answer.status_code == 503
    assert "llmchat[metrics]" in answer.text
    assert "Traceback" not in answer.text
