"""OpenAICommon, request side: configuration, hooks and the exact bytes posted."""

from __future__ import annotations

import copy
import json
import logging
from typing import Any

import pytest

from llmchat import OpenAICommon, Settings, wire_json
from llmchat.errors import LLMChatError

KEY = "sk-test-SECRET-0123456789"
MESSAGES = [
    {"role": "system", "content": "s"},
    {"role": "user", "content": "a"},
    {"role": "user", "content": "b"},
]
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "f",
            "parameters": {
                "type": "object",
                "properties": {"z": {}, "y": {}},
                "required": ["z"],
            },
        },
    }
]


def backend(**kwargs: Any) -> OpenAICommon:
    return OpenAICommon("http://127.0.0.1:9/v1/", **kwargs)


def test_url_trailing_slash_trimmed_and_paths_appended() -> None:
    request = backend().prepare_chat_request(MESSAGES)
    assert request.url == "http://127.0.0.1:9/v1/chat/completions"
    assert request.method == "POST"


def test_body_is_wire_json_of_the_finished_body() -> None:
    request = backend(model="m", settings=Settings(max_tokens=5)).prepare_chat_request(
        MESSAGES, tools=TOOLS, tool_choice="auto"
    )
    assert request.data == wire_json.encode(request.body)
    assert json.loads(request.data) == {
        "model": "m",
        "max_tokens": 5,
        "messages": MESSAGES,
        "tools": TOOLS,
        "tool_choice": "auto",
    }
    assert request.data.index(b'"z"') < request.data.index(b'"y"')


def test_stream_flags() -> None:
    body = backend().prepare_chat_request(MESSAGES, stream=True).body
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}

    class Quiet(OpenAICommon):
        send_include_usage = False

    body = Quiet("http://h/v1").prepare_chat_request(MESSAGES, stream=True).body
    assert body["stream"] is True and "stream_options" not in body
    assert "stream" not in backend().prepare_chat_request(MESSAGES).body


def test_normalization_applies_only_when_asked() -> None:
    plain = backend().prepare_chat_request(MESSAGES).body["messages"]
    assert [m["content"] for m in plain] == ["s", "a", "b"]
    merged = backend(message_normalization="alternate-roles").prepare_chat_request(MESSAGES)
    assert [m["content"] for m in merged.body["messages"]] == ["s", "a\n\nb"]


def test_call_settings_override_backend_settings() -> None:
    b = backend(settings=Settings(max_tokens=5, temperature=0.5))
    body = b.prepare_chat_request(MESSAGES, settings=Settings(temperature=0.0)).body
    assert body["max_tokens"] == 5 and body["temperature"] == 0.0


def test_authorization_only_with_a_key() -> None:
    assert "Authorization" not in backend()._get_api_headers()
    headers = backend(api_key=KEY)._get_api_headers()
    assert headers["Authorization"] == f"Bearer {KEY}"
    assert headers["Content-Type"] == "application/json"


def test_key_never_in_reprs_or_errors(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    b = backend(api_key=KEY)
    request = b.prepare_chat_request(MESSAGES)
    texts = [repr(b), str(b), repr(request), str(request), repr(b.clone())]
    with pytest.raises(LLMChatError) as info:
        b.prepare_chat_request([{"role": "x"}])
    texts.append(str(info.value))
    texts.extend(record.getMessage() for record in caplog.records)
    assert all(KEY not in text for text in texts)
    assert "[redacted]" in repr(request)


def test_bad_input_raises_before_any_io() -> None:
    b = backend()
    with pytest.raises(TypeError, match="tools must be a list"):
        b.prepare_chat_request(MESSAGES, tools={"type": "function"})  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"tools\[0\]"):
        b.prepare_chat_request(MESSAGES, tools=["f"])  # type: ignore[list-item]
    with pytest.raises(ValueError, match=r"messages\[0\]"):
        b.prepare_chat_request([{"role": "user", "content": 3}])
    with pytest.raises(TypeError, match="messages must be a list"):
        b.prepare_chat_request(None)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"api_url": "localhost:8080"}, "api_url"),
        ({"api_url": ""}, "api_url"),
        ({"message_normalization": "merge"}, "mode"),
        ({"tool_result_acknowledgement": None}, "tool_result_acknowledgement"),
        ({"request_timeout": -1}, "request_timeout"),
        ({"connect_timeout": "5"}, "connect_timeout"),
        ({"settings": {"max_tokens": 5}}, "settings"),
    ],
)
def test_constructor_names_the_bad_field(kwargs: dict[str, Any], field: str) -> None:
    kwargs = {"api_url": "http://h/v1", **kwargs}
    with pytest.raises((ValueError, TypeError), match=field):
        OpenAICommon(**kwargs)


def test_clone_keeps_and_changes() -> None:
    b = backend(api_key=KEY, model="m", request_timeout=5.0)
    c = b.clone(model="n", request_timeout=None)
    assert (c.model, c.api_key, c.timeouts.request) == ("n", KEY, None)
    assert (b.model, b.timeouts.request) == ("m", 5.0)
    assert type(c) is OpenAICommon
    with pytest.raises(TypeError, match="unknown argument"):
        b.clone(modle="x")


def test_clone_keeps_the_subclass() -> None:
    class Mine(OpenAICommon):
        pass

    assert type(Mine("http://h/v1").clone()) is Mine


# -- hooks are pure and called in order ---------------------------------------


def test_hooks_do_not_mutate_their_input() -> None:
    b = backend(api_key=KEY, model="m", settings=Settings(max_tokens=3))
    settings = Settings(temperature=0.1)
    frozen = copy.deepcopy(settings)
    b._get_api_settings(settings)
    assert settings == frozen

    body = b.prepare_chat_request(MESSAGES, tools=TOOLS).body
    snapshot = copy.deepcopy(body)
    b._finalize_request_body(body)
    b._encode_request_body(body)
    assert body == snapshot

    messages = copy.deepcopy(MESSAGES)
    b.wire_message_hashes(messages)
    b.normalized_messages(messages)
    assert messages == MESSAGES


def test_hook_order_and_returned_values_are_used() -> None:
    calls: list[str] = []

    class Gateway(OpenAICommon):
        def _get_api_settings(self, settings: Settings | None) -> dict[str, Any]:
            calls.append("settings")
            return {**super()._get_api_settings(settings), "priority": "low"}

        def _finalize_request_body(self, body: dict[str, Any]) -> dict[str, Any]:
            calls.append("finalize")
            assert "messages" in body and body["priority"] == "low"
            return {**body, "priority": "fast" if len(body["messages"]) > 1 else "low"}

        def _get_api_headers(self) -> dict[str, str]:
            calls.append("headers")
            return {**super()._get_api_headers(), "X-Team": "a"}

        def _encode_request_body(self, body: Any) -> bytes:
            calls.append("encode")
            return json.dumps(body, sort_keys=True, indent=1).encode()

    request = Gateway("http://h/v1").prepare_chat_request(MESSAGES)
    assert calls == ["settings", "finalize", "encode", "headers"]
    assert json.loads(request.data)["priority"] == "fast"
    assert request.headers["X-Team"] == "a"
    assert b"\n" in request.data


def test_finalize_gets_new_message_dicts() -> None:
    """A hook that edits the messages it got must not reach the caller's list."""

    class Rude(OpenAICommon):
        def _finalize_request_body(self, body: dict[str, Any]) -> dict[str, Any]:
            body["messages"][0]["content"] = "changed"
            return body

    messages = [{"role": "user", "content": "mine"}]
    Rude("http://h/v1").prepare_chat_request(messages)
    assert messages == [{"role": "user", "content": "mine"}]


# -- request shape on the wire (responses: no sockets, shape only) -------------

import responses  # noqa: E402


@responses.activate
def test_settings_reach_the_wire_under_their_openai_names() -> None:
    responses.post(
        "http://h/v1/chat/completions",
        json={"choices": [{"message": {"content": "ok"}, "finish_reason": "stop"}]},
    )
    settings = Settings(
        max_tokens=64,
        temperature=0.0,
        top_p=0.9,
        top_k=40,
        min_p=0.05,
        repetition_penalty=1.1,
        seed=7,
        stop=["\n\n"],
        reasoning_effort="high",
        reasoning_budget_tokens=2048,
        id_slot=1,
        cache_prompt=True,
        json_schema={
            "type": "object",
            "properties": {"zeta": {}, "alpha": {}},
            "required": ["zeta"],
        },
        extra_body={"temperature": 0.5, "custom": {"k": 1}},
    )
    response = OpenAICommon("http://h/v1", model="m").chat_completion(MESSAGES, settings=settings)
    assert response.is_success and response.msg == "ok"
    (call,) = responses.calls
    sent = json.loads(call.request.body)
    assert sent["model"] == "m"
    assert sent["reasoning_effort"] == "high"
    assert sent["reasoning_budget_tokens"] == 2048  # llama.cpp reads exactly this name
    assert (sent["id_slot"], sent["cache_prompt"], sent["top_k"]) == (1, True, 40)
    assert sent["repetition_penalty"] == 1.1 and sent["stop"] == ["\n\n"]
    assert sent["temperature"] == 0.5  # extra_body is merged last
    assert sent["custom"] == {"k": 1}
    assert sent["response_format"] == {
        "type": "json_schema",
        "json_schema": {
            "name": "response",
            "schema": settings.json_schema,
            "strict": False,
        },
    }
    assert call.request.body.index(b"zeta") < call.request.body.index(b"alpha")
    assert call.request.headers["Content-Type"] == "application/json"


@responses.activate
def test_text_path_posts_a_prompt_to_completions() -> None:
    responses.post(
        "http://h/v1/completions", json={"choices": [{"text": " there", "finish_reason": "stop"}]}
    )
    from llmchat.templates import ChatML

    response = OpenAICommon("http://h/v1", template=ChatML()).text_completion(
        [{"role": "user", "content": "hi"}], continuation=True
    )
    assert response.msg == " there"
    sent = json.loads(responses.calls[0].request.body)
    assert sent == {"prompt": "<|im_start|>user\nhi"}


def test_reconcile_hook_does_not_change_the_request() -> None:
    from llmchat.response import Response

    b = backend()
    body = b.prepare_chat_request(MESSAGES).body
    snapshot = copy.deepcopy(body)
    response = Response(body)
    assert b._reconcile_finish_reason(response, "stop", body) == "stop"
    assert body == snapshot
    assert b.make_response(body).request is body and b.make_stream_response(body).is_done is False
