"""The Gemini face over real sockets: routes, the client key (header and query), its
redaction, model metadata, countTokens and errors in Gemini's shape."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from llmchat.testing import ChatResponder, RecordedRequest, Reply

from .gemini_support import GENERATE, STREAM, gemini_proxy, last_chat_body, request, user

KEY = "gem-client-key-0123456789"
HI = {"contents": [user("hi")]}


def refused_like_google(answer: Any) -> None:
    """Google's answer to a bad key (the capture fb_error_400_api_key.json, sans DebugInfo)."""
    assert answer.status == 400, answer
    error = answer.json()["error"]
    assert error["code"] == 400 and error["status"] == "INVALID_ARGUMENT"
    assert error["message"] == "API key not valid. Please pass a valid API key."
    assert error["details"][0]["reason"] == "API_KEY_INVALID"


@pytest.mark.parametrize(
    "how",
    [{"x-goog-api-key": KEY}, {"Authorization": f"Bearer {KEY}"}, {"x-api-key": KEY}, "query"],
)
def test_the_key_is_accepted_as_header_bearer_or_query(how: Any) -> None:
    path = f"{GENERATE}?key={KEY}" if how == "query" else GENERATE
    headers = {} if how == "query" else how
    with gemini_proxy(api_key=KEY) as (url, upstream, sink):
        request(url, "POST", path, HI, headers)
        (event,) = sink.wait(1)
        assert last_chat_body(upstream)["messages"] == [{"role": "user", "content": "hi"}]
    assert event["key_id"] is not None and event["face"] == "gemini"


@pytest.mark.parametrize("path", [GENERATE, f"{GENERATE}?key=wrong", f"{STREAM}?alt=sse"])
def test_a_missing_or_wrong_key_gets_googles_api_key_invalid(path: str) -> None:
    with gemini_proxy(api_key=KEY) as (url, upstream, sink):
        refused_like_google(request(url, "POST", path, HI))
        refused_like_google(request(url, "GET", "/v1beta/models", None, {"x-goog-api-key": "no"}))
        assert not upstream.requests
        events = sink.wait(2)
    assert {e["error_type"] for e in events} == {"unauthorized"}


def test_a_query_key_reaches_no_log_line_usage_row_or_upstream(
    caplog: pytest.LogCaptureFixture, tmp_path: Any
) -> None:
    db = tmp_path / "usage.db"
    with (
        caplog.at_level(logging.DEBUG),
        gemini_proxy(api_key=KEY, usage_db=str(db)) as (url, upstream, sink),
    ):
        request(url, "POST", f"{STREAM}?alt=sse&key={KEY}", HI)
        request(url, "POST", f"{GENERATE}?key={KEY}x", HI)  # a wrong one, too
        request(url, "POST", f"/v1beta/models/m:embedContent?key={KEY}", HI)
        events = sink.wait(3)
        seen = [r.raw for r in upstream.requests]
    assert seen and not any(KEY.encode() in raw for raw in seen)
    assert KEY not in caplog.text
    assert "key=REDACTED" in caplog.text  # the access line, with the rest of the target
    assert KEY not in repr(events)
    assert KEY.encode() not in db.read_bytes()
    assert {e["route"] for e in events} == {
        "/v1beta/models/{model}:streamGenerateContent",
        "/v1beta/models/*",
        "(unknown)",
    }


def test_usage_event_names_the_face_the_route_pattern_and_the_model() -> None:
    with gemini_proxy() as (url, _, sink):
        request(url, "POST", "/v1beta/models/models/my-model:streamGenerateContent?alt=sse", HI)
        (event,) = sink.wait(1)
    assert event["face"] == "gemini"
    assert event["route"] == "/v1beta/models/{model}:streamGenerateContent"
    assert event["model"] == "my-model"
    assert event["stream"] is True


def test_the_model_list_and_one_model_in_geminis_shape() -> None:
    with gemini_proxy() as (url, _, _sink):
        listed = request(url, "GET", "/v1beta/models")
        one = request(url, "GET", "/v1beta/models/models/gemini-2.5-pro")
        wrong = request(url, "GET", "/v1beta/models/x:generateContent")
    assert listed.status == 200, listed
    (model,) = listed.json()["models"]
    assert model["name"] == "models/loopback" and model["displayName"] == "loopback"
    assert model["supportedGenerationMethods"] == [
        "generateContent",
        "streamGenerateContent",
        "countTokens",
    ]
    assert model["inputTokenLimit"] == model["outputTokenLimit"] == 4096  # the upstream's n_ctx
    assert one.status == 200 and one.json()["name"] == "models/gemini-2.5-pro"
    assert wrong.status == 405 and wrong.json()["error"]["status"] == "UNIMPLEMENTED"


def test_unknown_methods_and_paths_answer_in_geminis_shape() -> None:
    with gemini_proxy() as (url, upstream, _):
        method = request(url, "POST", "/v1beta/models/m:embedContent", HI)
        bare = request(url, "POST", "/v1beta/models/m", HI)
        other = request(url, "GET", "/v1beta/files")
        bad = request(url, "POST", GENERATE, {"contents": "hi"})
        assert not upstream.requests
    for answer in (method, bare, other):
        assert answer.status == 404, answer
        assert answer.json()["error"]["status"] == "NOT_FOUND"
    assert bad.status == 400
    assert bad.json() == {
        "error": {
            "code": 400,
            "message": "contents: must be a list of Content objects, not string",
            "status": "INVALID_ARGUMENT",
        }
    }


def test_v1_models_stays_the_openai_list() -> None:
    with gemini_proxy() as (url, _, _sink):
        answer = request(url, "GET", "/v1/models")
    assert answer.status == 200 and answer.json()["object"] == "list"


def _tokenizing(request: RecordedRequest) -> Reply:
    """llama-server's /apply-template and /tokenize: a prompt of 7 tokens."""
    if request.path.endswith("/apply-template"):
        return Reply.json({"prompt": "<s>user: hi</s>"})
    if request.path.endswith("/tokenize"):
        return Reply.json({"tokens": list(range(7))})
    return ChatResponder("x")(request)


def test_count_tokens_is_the_upstreams_own_count() -> None:
    with gemini_proxy(_tokenizing) as (url, upstream, sink):
        direct = request(url, "POST", "/v1beta/models/m:countTokens", HI)
        wrapped = request(
            url,
            "POST",
            "/v1beta/models/m:countTokens",
            {"generateContentRequest": {"model": "models/m", **HI}},
        )
        (template, *_) = [r.json() for r in upstream.requests if r.path == "/apply-template"]
        events = sink.wait(2)
    assert direct.status == 200 and direct.json() == {"totalTokens": 7}
    assert wrapped.json() == {"totalTokens": 7}
    assert template["messages"] == [{"role": "user", "content": "hi"}]
    assert [e["input_tokens"] for e in events] == [7, 7]


def test_count_tokens_without_a_tokenizer_is_a_clear_501() -> None:
    with gemini_proxy() as (url, _, _sink):
        answer = request(url, "POST", "/v1beta/models/m:countTokens", HI)
    assert answer.status == 501
    error = answer.json()["error"]
    assert error["status"] == "UNIMPLEMENTED" and "tokenizer" in error["message"]
