"""The Anthropic face as Claude Code needs it, through the real `anthropic` SDK and raw SSE.

Signed thinking blocks before text and tool_use with increasing indices, the
current stop reasons, a prompt over the context as ``prompt is too long``,
exact counts from the upstream's template and tokenizer, Claude Code's request
shapes, the billing-header filter, and Skeid's rule for undecodable tool-call
arguments. Pings are `test_proxy_anthropic_pings`'. The upstream is llmchat's
scripted loopback server.
"""

from __future__ import annotations

import json
import logging
import threading
from typing import Any

import pytest

from llmchat import OpenAICommon
from llmchat.backends.anthropic import Anthropic
from llmchat.protocols.anthropic import thinking_signature
from llmchat.proxy.faces.anthropic.routes import without_billing_header
from llmchat.testing import ChatResponder, RecordedRequest, Reply, WaitFor

from ...support.chat_frames import chunk as _chunk
from ...support.chat_frames import usage_chunk as _usage
from ...support.proxy import running_proxy
from .anthropic_support import (
    BETAS,
    FIXTURE,
    HI,
    PING,
    TOOLS,
    _call,
    _chat_bodies,
    _client,
    _RawStream,
    _read_all,
    _stream_body,
    _thinking_tool_events,
)

anthropic = pytest.importorskip("anthropic")


# -- thinking blocks ------------------------------------------------------------


def test_thinking_block_first_with_a_signature_and_increasing_indices(upstream):
    upstream.set_script([Reply.sse(_thinking_tool_events())])
    with OpenAICommon(upstream.url) as b, running_proxy(b) as url:
        raw = _RawStream(
            url,
            "/v1/messages",
            _stream_body(tools=TOOLS, thinking={"type": "enabled", "budget_tokens": 2048}),
        )
        try:
            seen = list(raw.events())
        finally:
            raw.close()
    names = [name for name, _ in seen]
    assert names.count("message_start") == 1 and names[0] == "message_start"
    starts = [
        (d["index"], d["content_block"]["type"]) for n, d in seen if n == "content_block_start"
    ]
    assert starts == [(0, "thinking"), (1, "text"), (2, "tool_use")]
    deltas = [d["delta"] for n, d in seen if n == "content_block_delta" and d["index"] == 0]
    assert [d["type"] for d in deltas] == ["thinking_delta", "thinking_delta", "signature_delta"]
    assert deltas[-1]["signature"] == thinking_signature("The user wants the weather.")
    stops = [d["index"] for n, d in seen if n == "content_block_stop"]
    assert stops == [0, 1, 2]
    # Every delta belongs to the block open at the time: indices never go back.
    indices = [d["index"] for n, d in seen if n.startswith("content_block")]
    assert indices == sorted(indices)


def test_sdk_accepts_the_signature_and_thinking_goes_back_in_history(upstream):
    upstream.set_script([Reply.sse(_thinking_tool_events()), Reply.sse(_thinking_tool_events())])
    thinking = {"type": "enabled", "budget_tokens": 2048}
    with OpenAICommon(upstream.url) as b, running_proxy(b) as url:
        client = _client(url)
        with client.messages.stream(
            model="m", max_tokens=256, messages=HI, tools=TOOLS, thinking=thinking
        ) as stream:
            text = "".join(stream.text_stream)
            message = stream.get_final_message()
        history = [
            *HI,
            {"role": "assistant", "content": [block.model_dump() for block in message.content]},
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": message.content[2].id,
                        "content": [{"type": "text", "text": "sunny"}],
                    }
                ],
            },
        ]
        again = client.messages.create(
            model="m", max_tokens=256, messages=history, tools=TOOLS, thinking=thinking
        )
    assert text == "Checking."
    block = message.content[0]
    assert block.type == "thinking" and block.thinking == "The user wants the weather."
    assert block.signature == thinking_signature(block.thinking)
    # Non-streaming: the same block, the same signature.
    assert again.content[0].model_dump() == block.model_dump()
    sent = _chat_bodies(upstream)[-1]["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "tool"]
    # The thinking goes back as the turn's reasoning, not as text; the signature stays out.
    assert sent[1]["reasoning_content"] == "The user wants the weather."
    assert sent[1]["content"] == "Checking." and "llmchat-sha256" not in json.dumps(sent)
    assert sent[1]["tool_calls"][0]["function"]["name"] == "get_weather"
    assert sent[2] == {"role": "tool", "tool_call_id": message.content[2].id, "content": "sunny"}


# -- stop reasons -----------------------------------------------------------------


def _finishing(finish: str, pieces: int) -> Reply:
    frames = [_chunk({"content": f"w{i} "}) for i in range(pieces)]
    return Reply.sse([*frames, _chunk({}, finish), _usage(3, pieces)])


@pytest.mark.parametrize("stream", [True, False])
@pytest.mark.parametrize(
    ("finish", "max_tokens", "expected"),
    [
        ("stop", 64, "end_turn"),
        ("length", 4, "max_tokens"),  # all four tokens the client allowed
        ("length", 64, "model_context_window_exceeded"),  # stopped short of the budget
        ("content_filter", 64, "refusal"),
    ],
)
def test_stop_reasons(upstream, stream, finish, max_tokens, expected):
    upstream.set_script([_finishing(finish, 4)])
    with OpenAICommon(upstream.url) as b, running_proxy(b) as url:
        client = _client(url)
        if stream:
            with client.messages.stream(model="m", max_tokens=max_tokens, messages=HI) as s:
                message = s.get_final_message()
        else:
            message = client.messages.create(model="m", max_tokens=max_tokens, messages=HI)
    assert message.stop_reason == expected
    assert message.content[0].text == "w0 w1 w2 w3 "


# -- a prompt over the context ----------------------------------------------------

OVERFLOW = (
    "request (3009 tokens) exceeds the available context size (1024 tokens), try increasing it"
)


@pytest.mark.parametrize("stream", [True, False])
def test_context_overflow_is_prompt_is_too_long(upstream, stream):
    upstream.set_script([Reply.error(400, OVERFLOW, "exceed_context_size_error")])
    with OpenAICommon(upstream.url) as b, running_proxy(b) as url:
        client = _client(url)
        with pytest.raises(anthropic.BadRequestError) as info:
            if stream:
                with client.messages.stream(model="m", max_tokens=8, messages=HI) as s:
                    s.get_final_message()
            else:
                client.messages.create(model="m", max_tokens=8, messages=HI)
    error = info.value.body["error"]
    assert error == {
        "type": "invalid_request_error",
        "message": "prompt is too long: 3009 tokens > 1024 maximum",
    }


@pytest.mark.parametrize(
    ("said", "expected"),
    [
        (
            "This model's maximum context length is 4096 tokens. However, your messages "
            "resulted in 5000 tokens. Please reduce the length of the messages.",
            "prompt is too long: 5000 tokens > 4096 maximum",
        ),
        (
            "This model's maximum context length is 4096 tokens. However, you requested 5000 "
            "tokens (4000 in the messages, 1000 in the completion).",
            # The prompt fits, the budget with it not: Claude Code lowers max_tokens.
            "input length and `max_tokens` exceed context limit: 4000 + 8 > 4096, "
            "decrease input length or `max_tokens` and try again",
        ),
        (
            "'max_tokens' or 'max_completion_tokens' is too large: 8. This model's maximum "
            "context length is 4096 tokens and your request has 4095 input tokens "
            "(8 > 4096 - 4095).",
            "input length and `max_tokens` exceed context limit: 4095 + 8 > 4096, "
            "decrease input length or `max_tokens` and try again",
        ),
        (
            "This model's maximum context length is 4096 tokens. Please reduce the length.",
            "prompt is too long for the model's context window",  # no prompt count given
        ),
        # Any other 400, even one that mentions a context, is the fixed words.
        ("context window exceeded on shard gpu-node-7", None),
    ],
)
def test_other_servers_overflow_wordings(upstream, said, expected):
    upstream.set_script([Reply.error(400, said, "invalid_request_error")])
    with OpenAICommon(upstream.url) as b, running_proxy(b) as url:
        with pytest.raises(anthropic.BadRequestError) as info:
            _client(url).messages.create(model="m", max_tokens=8, messages=HI)
    message = info.value.body["error"]["message"]
    assert message == (expected or "The upstream server rejected the request (HTTP 400)")


def test_context_overflow_after_pings_is_an_error_event(upstream):
    release = threading.Event()
    upstream.set_script(
        [
            Reply.error(
                400, OVERFLOW, "exceed_context_size_error", before_headers=[WaitFor(release, 30)]
            )
        ]
    )
    with OpenAICommon(upstream.url) as b, running_proxy(b, ping_interval=PING) as url:
        seen = _read_all(url, _stream_body(), release)
    assert seen[-1] == (
        "error",
        {
            "type": "error",
            "error": {
                "type": "invalid_request_error",
                "message": "prompt is too long: 3009 tokens > 1024 maximum",
            },
        },
    )


# -- undecodable tool-call arguments (Skeid's rule) ----------------------------------


def _undecodable() -> Reply:
    head = _call(0, name="get_weather", arguments='{"city": "Oslo",,')
    head["tool_calls"][0]["id"] = "call_bad"
    return Reply.sse([_chunk({"content": "Calling."}), _chunk(head), _chunk({}, "tool_calls")])


def test_undecodable_arguments_end_the_stream_with_a_generic_error(upstream):
    upstream.set_script([_undecodable(), _undecodable()])
    with OpenAICommon(upstream.url) as b, running_proxy(b) as url:
        raw = _RawStream(url, "/v1/messages", _stream_body(tools=TOOLS))
        try:
            seen = list(raw.events())
        finally:
            raw.close()
        with pytest.raises(anthropic.APIStatusError) as info:
            with _client(url).messages.stream(
                model="m", max_tokens=64, messages=HI, tools=TOOLS
            ) as s:
                s.get_final_message()
    names = [name for name, _ in seen]
    assert names[-1] == "error" and "message_stop" not in names
    assert all(
        d["content_block"]["type"] != "tool_use" for n, d in seen if n == "content_block_start"
    )
    assert ",," not in json.dumps(seen)  # no parser input or detail reaches the client
    assert seen[-1][1]["error"]["type"] == "api_error"
    assert "arguments" in str(info.value)


def test_undecodable_arguments_are_a_502_not_a_tool_use(upstream):
    upstream.set_script([_undecodable()])
    with OpenAICommon(upstream.url) as b, running_proxy(b) as url:
        with pytest.raises(anthropic.InternalServerError) as info:
            _client(url).messages.create(model="m", max_tokens=64, messages=HI, tools=TOOLS)
    assert info.value.status_code == 502
    assert info.value.body["error"]["message"] == "The upstream server's answer was unusable"


# -- Claude Code's request shapes, the beta header and the billing filter -------------


def _claude_code_body() -> dict[str, Any]:
    body = json.loads(FIXTURE.read_text())
    body.pop("_comment")
    return body


@pytest.mark.parametrize("drop", [True, False])
def test_claude_code_request_is_accepted(upstream, drop, caplog):
    upstream.set_script([Reply.sse(_thinking_tool_events())])
    caplog.set_level(logging.DEBUG, logger="llmchat.proxy")
    with OpenAICommon(upstream.url) as b, running_proxy(b, drop_billing_header=drop) as url:
        raw = _RawStream(
            url,
            "/v1/messages?beta=true",
            _claude_code_body(),
            **{
                "anthropic-beta": BETAS,
                "anthropic-version": "2023-06-01",
                "x-api-key": "sk-ant-unused",
                "User-Agent": "claude-cli/2.1.77 (external, cli)",
            },
        )
        try:
            seen = list(raw.events())
        finally:
            raw.close()
    assert raw.status == 200 and seen[-1][0] == "message_stop"
    [sent] = _chat_bodies(upstream)
    system = sent["messages"][0]
    assert system["role"] == "system"
    if drop:
        assert system["content"].startswith("You are Claude Code, Anthropic's official CLI")
        assert "billing" not in json.dumps(sent)
    else:
        assert system["content"].startswith("x-anthropic-billing-header: cc_version=")
    assert [m["role"] for m in sent["messages"]] == ["system", "user", "assistant", "tool"]
    assert sent["messages"][2]["tool_calls"][0]["function"]["name"] == "Bash"
    # Signed thinking in history goes back as the turn's reasoning; the signature does not.
    assert sent["messages"][2]["reasoning_content"].endswith("I will run ls.")
    assert "EqQBCkYIBRgC" not in json.dumps(sent)
    assert sent["messages"][3]["content"] == "app.py\nutil.py"
    assert [t["function"]["name"] for t in sent["tools"]] == ["Bash", "Read"]
    assert "cache_control" not in json.dumps(sent)
    assert sent["tool_choice"] == "auto" and sent["reasoning_effort"] == "high"
    assert "metadata" not in sent and "context_management" not in sent
    assert any("anthropic-beta ignored" in r.getMessage() for r in caplog.records)


def test_billing_filter_rule():
    nonce = {"type": "text", "text": "x-anthropic-billing-header: cc_version=1; cch=ab12;"}
    prompt = {
        "type": "text",
        "text": "You are Claude Code.",
        "cache_control": {"type": "ephemeral"},
    }
    joined = {"type": "text", "text": nonce["text"] + "\nYou are Claude Code."}
    assert without_billing_header({"system": [nonce, prompt]}) == {"system": [prompt]}
    assert without_billing_header({"system": [joined]}) == {
        "system": [{"type": "text", "text": "You are Claude Code."}]
    }
    # Only a block that opens with it; a string system is the client's own prompt.
    later = {"type": "text", "text": "see x-anthropic-billing-header: cc_version=1"}
    body = {"system": [later]}
    assert without_billing_header(body) is body
    assert without_billing_header({"system": nonce["text"]}) == {"system": nonce["text"]}


@pytest.mark.parametrize(
    ("choice", "expected"),
    [
        ({"type": "auto"}, "auto"),
        ({"type": "any"}, "required"),
        ({"type": "none"}, "none"),
        (
            {"type": "tool", "name": "get_weather"},
            {"type": "function", "function": {"name": "get_weather"}},
        ),
        ({"type": "auto", "disable_parallel_tool_use": True}, "auto"),
    ],
)
@pytest.mark.parametrize(
    "thinking",
    [{"type": "adaptive"}, {"type": "disabled"}, {"type": "enabled", "budget_tokens": 1024}],
)
def test_every_tool_choice_and_thinking_variant_is_accepted(upstream, choice, expected, thinking):
    with OpenAICommon(upstream.url) as b, running_proxy(b) as url:
        message = _client(url).messages.create(
            model="m",
            max_tokens=64,
            messages=HI,
            tools=TOOLS,
            tool_choice=choice,
            thinking=thinking,
            metadata={"user_id": "u-1"},
            system=[{"type": "text", "text": "be brief", "cache_control": {"type": "ephemeral"}}],
            extra_headers={"anthropic-beta": BETAS},
        )
    assert message.content[0].text == "Hello there, from loopback."
    [sent] = _chat_bodies(upstream)
    assert sent["tool_choice"] == expected
    assert sent.get("parallel_tool_calls", True) is not choice.get(
        "disable_parallel_tool_use", False
    )
    assert sent["messages"][0] == {"role": "system", "content": "be brief"}


# -- count_tokens -----------------------------------------------------------------


def _template_server(request: RecordedRequest) -> Reply:
    """llama-server's /apply-template (a ChatML-ish rendering, tools included) and /tokenize
    (one token per word, plus one for BOS when add_special)."""
    if request.path == "/apply-template":
        body = request.json()
        parts = [f"<|{m['role']}|> {m['content']}" for m in body["messages"]]
        parts += [f"<|tool|> {t['function']['name']}" for t in body.get("tools") or ()]
        return Reply.json({"prompt": " ".join(parts) + " <|assistant|>"})
    if request.path == "/tokenize":
        body = request.json()
        words = body["content"].split()
        return Reply.json({"tokens": list(range(len(words) + bool(body.get("add_special"))))})
    return ChatResponder("unused")(request)


def test_count_tokens_renders_the_template_with_tools(upstream):
    upstream.set_script(_template_server)
    with OpenAICommon(upstream.url) as b, running_proxy(b) as url:
        counted = _client(url).messages.count_tokens(
            model="m",
            system="be brief",
            messages=[{"role": "user", "content": "one two three"}],
            tools=TOOLS,
            thinking={"type": "enabled", "budget_tokens": 2048},
        )
    # <|system|> be brief <|user|> one two three <|tool|> get_weather <|assistant|> + BOS
    assert counted.input_tokens == 10 + 1
    [rendered] = [r.json() for r in upstream.requests if r.path == "/apply-template"]
    assert rendered["tools"][0]["function"]["name"] == "get_weather"
    assert rendered["reasoning_effort"] == "low"
    assert "max_tokens" not in rendered and "stream" not in rendered
    assert not _chat_bodies(upstream)


def test_count_tokens_asks_an_anthropic_upstream(upstream):
    upstream.set_script(
        lambda request: (
            Reply.json({"input_tokens": 42})
            if request.path == "/v1/messages/count_tokens"
            else Reply.error(404, "no")
        )
    )
    with Anthropic(upstream.url, api_key="sk-upstream", model="claude-x") as b:
        with running_proxy(b, drop_billing_header=True) as url:
            counted = _client(url).messages.count_tokens(
                model="whatever",
                system=[
                    {"type": "text", "text": "x-anthropic-billing-header: cch=1;"},
                    {"type": "text", "text": "be brief"},
                ],
                messages=HI,
                tools=TOOLS,
            )
    assert counted.input_tokens == 42
    [asked] = upstream.requests
    assert asked.headers["x-api-key"] == "sk-upstream"
    assert asked.json() == {
        "model": "claude-x",
        "messages": HI,
        "system": [{"type": "text", "text": "be brief"}],
        "tools": TOOLS,
    }


# -- the CLI options --------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "interval", "drop"),
    [
        ((), 5.0, False),
        (("--ping-interval", "0.5", "--drop-billing-header"), 0.5, True),
        (("--ping-interval", "0"), None, False),
    ],
)
def test_cli_options_reach_the_app(options, interval, drop):
    from llmchat.cli.commands import _parser
    from llmchat.cli.proxy_command import _proxy_app

    args = _parser().parse_args(["proxy", "--upstream", "http://127.0.0.1:9/v1", *options])
    app, backend = _proxy_app(args)
    try:
        routes = app.router.find("POST", "/v1/messages").handler.__self__
        assert (routes.ping_interval, routes.drop_billing_header) == (interval, drop)
    finally:
        app.close()
        backend.close()
