"""The proxy's Ollama face end to end, with the real `ollama` client over a real WSGI server.

Chat and generate, tools, cut-offs and errors, thinking, and the load, unload and
show requests; the upstream is llmchat's scripted loopback server.
"""

from __future__ import annotations

import json

import pytest
import requests

from llmchat import OpenAICommon
from llmchat.testing import Reply

from ..support.proxy import UsageSink, running_proxy
from .support import (
    TEXT,
    TOOLS_OPENAI,
    WAIT,
    cut_stream,
    last_chat_request,
    ollama_client,
    reasoning_stream,
    tool_stream,
)

ollama = pytest.importorskip("ollama")
anthropic = pytest.importorskip("anthropic")


# -- Ollama face ------------------------------------------------------------------


def test_ollama_chat_stream_text_and_counts(backend, upstream_server):
    sink = UsageSink()
    with running_proxy(backend, usage_log=sink) as url:
        parts = list(
            ollama_client(url).chat(
                model="qwen3", messages=[{"role": "user", "content": "say hi"}], stream=True
            )
        )
    assert "".join(p.message.content for p in parts) == TEXT
    assert all(p.message.role == "assistant" for p in parts)
    assert [p.done for p in parts].count(True) == 1 and parts[-1].done
    final = parts[-1]
    assert final.done_reason == "stop"
    assert final.prompt_eval_count == 2  # ChatResponder counts the words of the messages
    assert final.eval_count == len(parts) - 1  # one upstream chunk per content line
    upstream_body = last_chat_request(upstream_server)
    assert upstream_body["messages"] == [{"role": "user", "content": "say hi"}]
    assert upstream_body["stream"] is True
    [event] = sink.wait(1)
    assert event["face"] == "ollama" and event["route"] == "/api/chat"
    assert event["ok"] is True and event["status"] == 200 and event["stream"] is True
    assert event["content_bytes"] == len(TEXT.encode())
    assert (event["input_tokens"], event["output_tokens"]) == (2, final.eval_count)


def test_ollama_chat_blocking(backend):
    with running_proxy(backend) as url:
        reply = ollama_client(url).chat(
            model="qwen3",
            messages=[{"role": "user", "content": "say hi"}],
            options={"temperature": 0, "num_predict": 64},
        )
    assert reply.message.role == "assistant"
    assert reply.message.content == TEXT
    assert reply.done and reply.done_reason == "stop"
    assert isinstance(reply.eval_count, int) and reply.eval_count > 0


def test_ollama_options_reach_upstream(backend, upstream_server):
    with running_proxy(backend) as url:
        ollama_client(url).chat(
            model="qwen3",
            messages=[{"role": "user", "content": "hi"}],
            options={"temperature": 0.25, "num_predict": 32, "top_k": 5, "seed": 7, "stop": ["\n"]},
            format="json",
        )
    body = last_chat_request(upstream_server)
    assert body["temperature"] == 0.25 and body["max_tokens"] == 32
    assert body["top_k"] == 5 and body["seed"] == 7 and body["stop"] == ["\n"]
    assert body["response_format"] == {"type": "json_object"}
    assert body["model"] == "qwen3"  # the backend has no model of its own: the client's goes on


def test_ollama_generate_stream_and_blocking(backend, upstream_server):
    with running_proxy(backend) as url:
        client = ollama_client(url)
        parts = list(client.generate(model="m", prompt="say hi", system="be brief", stream=True))
        whole = client.generate(model="m", prompt="say hi")
    assert "".join(p.response for p in parts) == TEXT
    assert parts[-1].done and parts[-1].done_reason == "stop"
    assert whole.response == TEXT and whole.done
    first_post = next(r for r in upstream_server.requests if r.method == "POST")
    assert first_post.json()["messages"] == [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "say hi"},
    ]


@pytest.mark.parametrize("stream", [True, False])
def test_ollama_tool_calls_arrive_whole(upstream_server, stream):
    upstream_server.set_script([tool_stream()])
    with OpenAICommon(upstream_server.url) as b, running_proxy(b) as url:
        client = ollama_client(url)
        messages = [{"role": "user", "content": "weather in Oslo?"}]
        if stream:
            parts = list(client.chat(model="m", messages=messages, tools=TOOLS_OPENAI, stream=True))
            calls = [c for p in parts for c in (p.message.tool_calls or [])]
            final = parts[-1]
        else:
            final = client.chat(model="m", messages=messages, tools=TOOLS_OPENAI)
            calls = final.message.tool_calls
    assert [(c.function.name, dict(c.function.arguments)) for c in calls] == [
        ("get_weather", {"city": "Oslo"}),
        ("get_time", {"tz": "CET"}),
    ]
    assert final.done
    assert final.prompt_eval_count == 12 and final.eval_count == 7
    sent = last_chat_request(upstream_server)
    assert sent["tools"][0]["function"]["name"] == "get_weather"


def test_ollama_tool_round_trip_history(backend, upstream_server):
    """A tool result named by `tool_name` answers the matching call by id, upstream."""
    history = [
        {"role": "user", "content": "weather?"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"function": {"name": "get_weather", "arguments": {"city": "Oslo"}}}],
        },
        {"role": "tool", "content": "sunny", "tool_name": "get_weather"},
    ]
    with running_proxy(backend) as url:
        ollama_client(url).chat(model="m", messages=history)
    sent = last_chat_request(upstream_server)["messages"]
    call = sent[1]["tool_calls"][0]
    assert json.loads(call["function"]["arguments"]) == {"city": "Oslo"}
    assert sent[2] == {"role": "tool", "content": "sunny", "tool_call_id": call["id"]}


def test_ollama_stream_cut_off_upstream_raises(upstream_server):
    upstream_server.set_script([cut_stream()])
    sink = UsageSink()
    with OpenAICommon(upstream_server.url) as b, running_proxy(b, usage_log=sink) as url:
        stream = ollama_client(url).chat(
            model="m", messages=[{"role": "user", "content": "hi"}], stream=True
        )
        seen = []
        with pytest.raises(ollama.ResponseError) as info:
            for part in stream:
                seen.append(part.message.content)
    assert seen == ["partial "]
    assert "The upstream server's answer was unusable" in str(info.value)  # the fixed text
    [event] = sink.wait(1)
    assert event["ok"] is False and event["status"] == 200
    assert event["error_type"] == "response"


@pytest.mark.parametrize("stream", [True, False])
def test_ollama_upstream_error_before_output_is_an_http_status(upstream_server, stream):
    upstream_server.set_script([Reply.error(500, "model exploded")])
    with OpenAICommon(upstream_server.url) as b, running_proxy(b) as url:
        with pytest.raises(ollama.ResponseError) as info:
            result = ollama_client(url).chat(
                model="m", messages=[{"role": "user", "content": "hi"}], stream=stream
            )
            if stream:
                list(result)
    assert info.value.status_code == 502
    assert info.value.error == "The upstream server failed (HTTP 500)"  # not the upstream's words


def test_ollama_list_and_version(backend):
    with running_proxy(backend) as url:
        client = ollama_client(url)
        names = [m.model for m in client.list().models]
        running = [m.model for m in client.ps().models]
        version = requests.get(url + "/api/version", timeout=WAIT).json()
    assert names == ["loopback"]
    assert running == ["loopback"]
    assert isinstance(version["version"], str) and version["version"]


def test_ollama_bad_request_names_the_field(backend, upstream_server):
    with running_proxy(backend) as url:
        answer = requests.post(
            url + "/api/chat", json={"model": "m", "messages": "hi"}, timeout=WAIT
        )
    assert answer.status_code == 400
    assert "messages" in answer.json()["error"]
    assert not [r for r in upstream_server.requests if r.method == "POST"]


@pytest.mark.parametrize("think", [None, False])
def test_ollama_thinking_shown_unless_think_is_false(upstream_server, think):
    # think: false first asks GET /props whether the upstream is llama-server (here: no).
    props = [Reply.error(404, "File Not Found", "not_found_error")] if think is False else []
    upstream_server.set_script([*props, reasoning_stream()])
    with OpenAICommon(upstream_server.url) as b, running_proxy(b) as url:
        parts = list(
            ollama_client(url).chat(
                model="m", messages=[{"role": "user", "content": "hi"}], stream=True, think=think
            )
        )
    thinking = "".join(p.message.thinking or "" for p in parts)
    assert "".join(p.message.content for p in parts) == "Answer."
    assert thinking == ("" if think is False else "Let me think. ")


@pytest.mark.parametrize("stream", [True, False])
def test_ollama_load_request_is_answered_without_the_upstream(backend, upstream_server, stream):
    with running_proxy(backend) as url:
        client = ollama_client(url)
        generated = client.generate(model="m", stream=stream)
        chatted = client.chat(model="m", messages=[], stream=stream)
        if stream:
            generated, chatted = list(generated)[-1], list(chatted)[-1]
    assert generated.done and generated.done_reason == "load" and generated.response == ""
    assert chatted.done and chatted.done_reason == "load"
    assert not [r for r in upstream_server.requests if r.method == "POST"]


def test_ollama_unload_request(backend, upstream_server):
    with running_proxy(backend) as url:
        answer = ollama_client(url).generate(model="m", keep_alive=0)
    assert answer.done and answer.done_reason == "unload"
    assert not [r for r in upstream_server.requests if r.method == "POST"]


def test_ollama_show_reports_the_upstream_context(backend, upstream_server):
    with running_proxy(backend) as url:
        shown = ollama_client(url).show("qwen3")
        missing = requests.post(url + "/api/show", json={}, timeout=WAIT)
    arch = shown.modelinfo["general.architecture"]
    assert shown.modelinfo[f"{arch}.context_length"] == 4096  # ChatResponder's n_ctx
    assert "num_ctx 4096" in shown.parameters
    assert "tools" in shown.capabilities
    assert any(r.path == "/props" for r in upstream_server.requests)
    assert missing.status_code == 400 and "model" in missing.json()["error"]


def test_ollama_show_without_a_probe_answer(upstream_server):
    upstream_server.set_script(Reply.error(404, "File Not Found"))
    with OpenAICommon(upstream_server.url) as b, running_proxy(b) as url:
        shown = ollama_client(url).show("qwen3")
    assert shown.modelinfo == {"general.architecture": "llama"}
    assert shown.parameters in ("", None)
