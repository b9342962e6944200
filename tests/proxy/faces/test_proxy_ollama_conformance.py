"""The Ollama face's liberal rule: the request shapes Ollama clients send today each get a 200.

Each row is a body as ollama-js 0.6.4 (the request object as given, JSON as
is) or ollama-python (``model_dump(exclude_none=True)``) posts it, plus the
fields newer Ollama releases and other clients add. Through the real proxy
over a scripted upstream: a 200, what reached the upstream, and one DEBUG line
on ``llmchat.proxy`` naming each dropped field's path. The relay's rows are at
the end: it forwards a body as it is.
"""

from __future__ import annotations

import base64
import json
import logging
from typing import Any

import ollama
import pytest
import requests

from llmchat.testing import ChatResponder

from ...support.chat_frames import WEATHER
from ...support.proxy import proxy_over

WAIT = 10.0
PNG_B64 = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\x00" * 8).decode()
OLLAMA_TOOL = json.loads(json.dumps(WEATHER))
USER = {"role": "user", "content": "weather in Oslo?"}
CALL = {"function": {"name": "get_weather", "arguments": {"city": "Oslo"}}}
TOOL_TURN = [
    USER,
    {"role": "assistant", "content": "", "thinking": "I should call it", "tool_calls": [CALL]},
    {"role": "tool", "content": "rain", "tool_name": "get_weather"},
]


def chat(**fields: Any) -> dict[str, Any]:
    return {"model": "qwen3", "messages": [USER], "stream": False, **fields}


# name -> (path, body, the field paths dropped with a DEBUG line)
ROWS: dict[str, tuple[str, dict[str, Any], list[str]]] = {
    "tools-tool_name-thinking": (
        "/api/chat",
        chat(messages=TOOL_TURN, tools=[OLLAMA_TOOL]),
        [],
    ),
    "images": ("/api/chat", chat(messages=[{**USER, "images": [PNG_B64]}]), []),
    "think-true": ("/api/chat", chat(think=True), []),
    "think-false": ("/api/chat", chat(think=False), []),
    "think-high": ("/api/chat", chat(think="high"), []),
    "think-unknown-level": ("/api/chat", chat(think="max"), ["think"]),
    "format-json": ("/api/chat", chat(format="json"), []),
    "format-schema": (
        "/api/chat",
        chat(format={"type": "object", "properties": {"city": {"type": "string"}}}),
        [],
    ),
    "format-unknown": ("/api/chat", chat(format="yaml"), ["format"]),
    "keep_alive": ("/api/chat", chat(keep_alive="5m"), ["keep_alive"]),
    "keep_alive-number": ("/api/chat", chat(keep_alive=-1), ["keep_alive"]),
    "logprobs": ("/api/chat", chat(logprobs=True, top_logprobs=3), ["logprobs", "top_logprobs"]),
    "options-unknown": (
        "/api/chat",
        chat(options={"temperature": 0.2, "num_ctx": 8192, "num_gpu": 1, "brand_new": 1}),
        ["options.num_ctx", "options.num_gpu", "options.brand_new"],
    ),
    "unknown-top-level": ("/api/chat", chat(truncate=True, shift=False), ["truncate", "shift"]),
    "unknown-message-field": (
        "/api/chat",
        chat(messages=[{**USER, "name": "ann", "index": 0}]),
        ["messages[0].name", "messages[0].index"],
    ),
    "developer-role": (
        "/api/chat",
        chat(messages=[{"role": "developer", "content": "be brief"}, USER]),
        ["messages[0].role"],
    ),
    "tool-result-images": (
        "/api/chat",
        chat(messages=[*TOOL_TURN[:2], {**TOOL_TURN[2], "images": [PNG_B64]}]),
        [],
    ),
    "assistant-images": (
        "/api/chat",
        chat(messages=[USER, {"role": "assistant", "content": "x", "images": [PNG_B64]}, USER]),
        ["messages[1].images"],
    ),
    "null-fields": (
        "/api/chat",
        chat(tools=None, format=None, options=None, think=None, keep_alive=None),
        ["keep_alive"],
    ),
    "generate-everything": (
        "/api/generate",
        {
            "model": "qwen3",
            "prompt": "describe",
            "system": "be brief",
            "images": [PNG_B64],
            "template": "{{ .Prompt }}",
            "context": [1, 2, 3],
            "raw": False,
            "keep_alive": "5m",
            "stream": False,
            "think": True,
            "options": {"num_predict": 20, "num_ctx": 2048},
        },
        ["template", "context", "keep_alive", "options.num_ctx"],
    ),
}


@pytest.fixture
def proxied() -> Any:
    with proxy_over(ChatResponder("It rains.")) as served:
        yield served


@pytest.mark.parametrize("name", list(ROWS))
def test_ollama_request_shapes_get_a_200(
    name: str, proxied: Any, caplog: pytest.LogCaptureFixture
) -> None:
    url, upstream = proxied
    path, body, dropped = ROWS[name]
    caplog.set_level(logging.DEBUG, logger="llmchat.proxy")
    answer = requests.post(url + path, json=body, timeout=WAIT)
    assert answer.status_code == 200, answer.text
    assert answer.json()["done"] is True
    lines = [r.getMessage() for r in caplog.records if r.levelno == logging.DEBUG]
    for field in dropped:
        assert any(line.startswith(f"{field} ") for line in lines), (field, lines)
    # think: false first asks the upstream what it is (GET /props): only the chat counts.
    [request] = [r for r in upstream.requests if r.path.endswith("/chat/completions")]
    assert request.json()["messages"]
    for value in ("5m", "{{ .Prompt }}", "brand_new", "truncate"):
        assert value not in request.body.decode()  # a drop is a drop


def test_what_the_folds_send_upstream(proxied: Any) -> None:
    url, upstream = proxied
    for name in ("tools-tool_name-thinking", "developer-role", "tool-result-images"):
        path, body, _ = ROWS[name]
        assert requests.post(url + path, json=body, timeout=WAIT).status_code == 200
    tools, developer, images = (r.json()["messages"] for r in upstream.requests)
    assert tools[1]["reasoning_content"] == "I should call it"
    assert tools[2] == {"role": "tool", "content": "rain", "tool_call_id": "call_1_0"}
    assert developer[0] == {"role": "system", "content": "be brief"}
    # The tool result's image follows the tool turn as a user turn.
    assert images[2]["role"] == "tool" and images[3]["role"] == "user"
    assert images[3]["content"][0]["image_url"]["url"].startswith("data:image/png;base64,")


def test_a_request_that_cannot_be_served_is_still_a_400(proxied: Any) -> None:
    url, _ = proxied
    for body in (
        chat(messages=[{"content": "no role"}]),
        chat(messages=[{**USER, "images": ["@@not base64"]}]),
    ):
        answer = requests.post(url + "/api/chat", json=body, timeout=WAIT)
        assert answer.status_code == 400 and "messages[0]" in answer.json()["error"]


def test_the_ollama_python_client_with_everything(proxied: Any) -> None:
    url, upstream = proxied
    client = ollama.Client(host=url, timeout=WAIT)
    try:
        answer = client.chat(
            model="qwen3",
            messages=[*TOOL_TURN, {**USER, "images": [PNG_B64]}],
            tools=[OLLAMA_TOOL],
            think="low",
            format={"type": "object"},
            keep_alive="1m",
            options={"temperature": 0.1, "num_ctx": 4096, "mirostat": 1},
        )
    finally:
        client.close()
    assert answer.message.content == "It rains."
    sent = upstream.requests[0].json()
    assert sent["reasoning_effort"] == "low" and sent["temperature"] == 0.1


# -- the relay: bodies go upstream as sent --------------------------------------

RELAY_ROWS = {
    "unknown-fields": {"model": "m", "messages": [USER], "brand_new": {"x": 1}},
    "unknown-message-fields": {
        "model": "m",
        "messages": [{**USER, "name": "ann", "cache_control": {"type": "ephemeral"}}],
        "reasoning_effort": "high",
        "parallel_tool_calls": False,
        "stream_options": {"include_usage": True},
    },
}


@pytest.mark.parametrize("name", list(RELAY_ROWS))
def test_relay_forwards_request_shapes_as_sent(name: str, proxied: Any) -> None:
    url, upstream = proxied
    body = json.dumps(RELAY_ROWS[name]).encode()
    answer = requests.post(
        url + "/v1/chat/completions",
        data=body,
        headers={"Content-Type": "application/json"},
        timeout=WAIT,
    )
    assert answer.status_code == 200
    assert upstream.requests[0].body == body
