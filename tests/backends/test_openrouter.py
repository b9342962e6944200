"""OpenRouter over real sockets: a loopback server that behaves like OpenRouter.

It streams ``: OPENROUTER PROCESSING`` keep-alives and ``reasoning`` deltas,
reports ``cost``/``is_byok`` in usage and the serving ``provider``, and answers
``GET /generation`` (openrouter_support.py). Construction, headers and request
bodies here; the answers are test_openrouter_answers.py's. Pure body shapes use
`responses`. Nothing sleeps.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
import responses

from llmchat import Settings
from llmchat.backends.openrouter import (
    DEFAULT_API_URL,
    OpenRouter,
    OpenRouterResponse,
    with_cache_breakpoints,
)
from llmchat.templates import ChatML
from llmchat.testing import ScriptedServer

from .openrouter_support import (
    EPHEMERAL,
    HI,
    KEY,
    backend,
    completion,
    openrouter,
)

# The `server` fixture (tests/conftest.py) runs this script, fresh for each test.
SERVER_SCRIPT = openrouter


# -- construction ----------------------------------------------------------------


def test_defaults_and_env_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENROUTER_API_KEY", KEY)
    b = OpenRouter(model="openai/gpt-4o-mini")
    assert b.api_url == DEFAULT_API_URL == "https://openrouter.ai/api/v1"
    assert b.api_key == KEY
    assert OpenRouter("sk-explicit").api_key == "sk-explicit"
    monkeypatch.delenv("OPENROUTER_API_KEY")
    assert OpenRouter().api_key is None
    assert OpenRouter.send_include_usage is False


@pytest.mark.parametrize(
    ("kwargs", "error", "names"),
    [
        ({"http_referer": 5}, TypeError, "http_referer"),
        ({"x_title": "a\r\nX-Evil: 1"}, ValueError, "x_title"),
        ({"provider": ["OpenAI"]}, TypeError, "provider"),
        ({"models": "openai/gpt-4o"}, TypeError, "models"),
        ({"models": ["ok", ""]}, ValueError, "models[1]"),
        ({"transforms": [3]}, ValueError, "transforms[0]"),
        ({"cache_breakpoints": "yes"}, TypeError, "cache_breakpoints"),
        ({"generation_lookup": None}, TypeError, "generation_lookup"),
        ({"api_url": "openrouter.ai"}, ValueError, "api_url"),
        ({"nonsense": 1}, TypeError, "nonsense"),
    ],
)
def test_bad_arguments_raise_naming_the_argument(
    kwargs: dict[str, Any], error: type[Exception], names: str
) -> None:
    with pytest.raises(error, match=names.replace("[", r"\[")):
        OpenRouter(**kwargs)


def test_clone_keeps_openrouter_fields_and_applies_changes() -> None:
    b = OpenRouter(
        KEY,
        "m",
        http_referer="https://app.example",
        x_title="App",
        provider={"order": ["OpenAI"]},
        models=["a/b"],
        transforms=["middle-out"],
        cache_breakpoints=False,
        generation_lookup=False,
        api_url="http://127.0.0.1:9/v1",
        server_probe_timeout=0.5,
    )
    c = b.clone(x_title="Other")
    assert type(c) is OpenRouter and c.api_key == KEY and c.model == "m"
    assert (c.http_referer, c.x_title) == ("https://app.example", "Other")
    assert (c.provider, c.models, c.transforms) == ({"order": ["OpenAI"]}, ["a/b"], ["middle-out"])
    assert (c.cache_breakpoints, c.generation_lookup) == (False, False)
    assert c.api_url == "http://127.0.0.1:9/v1" and c.timeouts.probe == 0.5
    with pytest.raises(TypeError, match="unknown"):
        b.clone(colour="red")


def test_provider_is_copied_at_construction() -> None:
    prefs = {"order": ["OpenAI"]}
    b = OpenRouter(provider=prefs)
    prefs["order"].append("Azure")
    assert b.prepare_chat_request(HI).body["provider"] == {"order": ["OpenAI"]}


# -- headers ---------------------------------------------------------------------


def test_attribution_headers_are_sent_when_set(server: ScriptedServer) -> None:
    response = backend(
        server, http_referer="https://app.example", x_title="My App"
    ).chat_completion(HI)
    assert response.is_success
    chat, lookup = server.requests
    for seen in (chat, lookup):  # the lookup carries the same headers
        assert seen.headers["HTTP-Referer"] == "https://app.example"
        assert seen.headers["X-Title"] == "My App"
        assert seen.headers["Authorization"] == f"Bearer {KEY}"


@pytest.mark.parametrize("value", [None, ""])
def test_attribution_headers_are_absent_when_unset_or_empty(
    server: ScriptedServer, value: str | None
) -> None:
    backend(server, http_referer=value, x_title=value, generation_lookup=False).chat_completion(HI)
    (seen,) = server.requests
    assert "HTTP-Referer" not in seen.headers and "X-Title" not in seen.headers


# -- body extras (shape only) ------------------------------------------------------


@responses.activate
def test_body_extras_and_reasoning_effort_mapping() -> None:
    responses.post("http://h/v1/chat/completions", json=completion(ident=None))
    b = OpenRouter(
        KEY,
        "openai/gpt-4o-mini",
        Settings(reasoning_effort="low", max_tokens=50),
        provider={"order": ["OpenAI", "Azure"], "allow_fallbacks": False},
        models=["anthropic/claude-3.5-haiku"],
        transforms=["middle-out"],
        api_url="http://h/v1",
    )
    response = b.chat_completion(
        HI, settings=Settings(reasoning_effort="high", extra_body={"usage": {"include": True}})
    )
    assert response.is_success and isinstance(response, OpenRouterResponse)
    sent = json.loads(responses.calls[0].request.body)
    assert sent["reasoning"] == {"effort": "high"}  # the per-call setting wins
    assert "reasoning_effort" not in sent
    assert sent["provider"] == {"order": ["OpenAI", "Azure"], "allow_fallbacks": False}
    assert sent["models"] == ["anthropic/claude-3.5-haiku"]
    assert sent["transforms"] == ["middle-out"]
    assert sent["usage"] == {"include": True}  # extra_body passes any other field through
    assert sent["max_tokens"] == 50 and "stream" not in sent


def test_extra_body_wins_over_constructor_extras() -> None:
    b = OpenRouter(provider={"sort": "price"}, models=["a/b"])
    body = b.prepare_chat_request(
        HI,
        settings=Settings(
            reasoning_effort="medium",
            extra_body={"provider": {"sort": "latency"}, "reasoning": {"max_tokens": 99}},
        ),
    ).body
    assert body["provider"] == {"sort": "latency"} and body["models"] == ["a/b"]
    assert body["reasoning"] == {"effort": "medium", "max_tokens": 99}


def test_no_reasoning_member_without_effort() -> None:
    body = OpenRouter(model="m").prepare_chat_request(HI).body
    assert "reasoning" not in body and "reasoning_effort" not in body
    assert body["model"] == "m"


def test_request_hooks_leave_their_input_unchanged() -> None:
    settings = Settings(reasoning_effort="low", extra_body={"reasoning": {"exclude": True}})
    snapshot = copy.deepcopy(settings.extra_body)
    b = OpenRouter(provider={"sort": "price"})
    body = b.prepare_chat_request(HI, settings=settings).body
    body["provider"]["sort"] = "changed"
    body["reasoning"]["exclude"] = False
    assert settings.extra_body == snapshot and settings.reasoning_effort == "low"
    assert b.provider == {"sort": "price"}


def test_streams_send_no_stream_options(server: ScriptedServer) -> None:
    response = backend(server, generation_lookup=False).chat_completion_stream(HI).wait(10)
    assert response.is_success
    (seen,) = server.requests
    sent = seen.json()
    assert sent["stream"] is True and "stream_options" not in sent


# -- cache_control breakpoints -------------------------------------------------------


def text_part(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def marked(text: str) -> list[dict[str, Any]]:
    return [{"type": "text", "text": text, "cache_control": EPHEMERAL}]


def test_marks_head_and_last_two_text_turns() -> None:
    messages = [
        {"role": "system", "content": "Rules."},
        {"role": "user", "content": "u1"},
        {"role": "assistant", "content": "a1"},
        {"role": "user", "content": "u2"},
        {"role": "assistant", "content": "a2"},
        {"role": "user", "content": "u3"},
    ]
    out = with_cache_breakpoints(messages)
    assert [m["content"] for m in out] == [
        marked("Rules."),
        "u1",
        "a1",
        "u2",
        marked("a2"),
        marked("u3"),
    ]
    assert out[1] is messages[1]  # unmarked messages are passed through


def test_skips_tool_results_and_tool_call_turns_without_text() -> None:
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    messages = [
        {"role": "system", "content": "Rules."},
        {"role": "user", "content": "Weather?"},
        {"role": "assistant", "content": "Let me look.", "tool_calls": [call]},
        {"role": "user", "content": "Also Paris?"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": "sunny"},
    ]
    out = with_cache_breakpoints(messages)
    assert out[3]["content"] == marked("Also Paris?")
    assert out[2]["content"] == marked("Let me look.") and out[2]["tool_calls"] == [call]
    assert out[4] is messages[4] and out[5] is messages[5]
    assert out[1] is messages[1] and out[0]["content"] == marked("Rules.")


def test_list_content_marks_its_last_text_part() -> None:
    image = {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}
    messages = [{"role": "user", "content": [text_part("look"), text_part("here"), image]}]
    (out,) = with_cache_breakpoints(messages)
    assert out["content"] == [
        text_part("look"),
        {"type": "text", "text": "here", "cache_control": EPHEMERAL},
        image,
    ]
    assert messages[0]["content"][1] == text_part("here")


def test_existing_markers_count_toward_four() -> None:
    pre = [{"type": "text", "text": "x", "cache_control": EPHEMERAL}]
    messages = [
        {"role": "system", "content": "Rules."},
        {"role": "user", "content": pre},
        {"role": "assistant", "content": pre},
        {"role": "user", "content": "u2"},
        {"role": "assistant", "content": "a2"},
    ]
    out = with_cache_breakpoints(messages)
    count = sum(
        1
        for m in out
        if isinstance(m["content"], list)
        for p in m["content"]
        if "cache_control" in p
    )
    assert count == 4
    assert out[0]["content"] == marked("Rules.")  # the head first, then the latest turn
    assert out[4]["content"] == marked("a2") and out[3]["content"] == "u2"


def test_a_lone_user_message_is_marked_once() -> None:
    (out,) = with_cache_breakpoints([{"role": "user", "content": "Hi"}])
    assert out["content"] == marked("Hi")
    assert with_cache_breakpoints([]) == []


def test_finalize_builds_new_dicts_and_leaves_its_input_alone() -> None:
    b = OpenRouter(model="m")
    messages = [
        {"role": "system", "content": "Rules."},
        {"role": "user", "content": [text_part("q")]},
    ]
    caller = copy.deepcopy(messages)
    body = b.prepare_chat_request(messages).body
    assert body["messages"][0]["content"] == marked("Rules.")
    assert messages == caller  # the caller's messages are untouched

    given = {"model": "m", "messages": copy.deepcopy(caller)}
    snapshot = copy.deepcopy(given)
    out = b._finalize_request_body(given)
    assert given == snapshot and out is not given
    assert out["messages"][1]["content"] == [{**text_part("q"), "cache_control": EPHEMERAL}]


def test_text_bodies_and_disabled_breakpoints_are_unchanged() -> None:
    b = OpenRouter(model="m", template=ChatML())
    text_body = b.prepare_text_request(HI).body
    assert "cache_control" not in json.dumps(text_body) and "prompt" in text_body
    off = OpenRouter(model="m", cache_breakpoints=False).prepare_chat_request(HI).body
    assert off["messages"] == HI
