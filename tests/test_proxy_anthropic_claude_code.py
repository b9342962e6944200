"""The Anthropic face as Claude Code needs it, through the real `anthropic` SDK and raw SSE.

Pings while the upstream is silent, signed thinking blocks before text and
tool_use with increasing indices, the current stop reasons, a prompt over the
context as ``prompt is too long``, exact counts from the upstream's template
and tokenizer, Claude Code's request shapes, the billing-header filter, and
Skeid's rule for undecodable tool-call arguments. The upstream is llmchat's
scripted loopback server; waits are on events, never on sleeps.
"""

from __future__ import annotations

import http.client
import json
import logging
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from llmchat import OpenAICommon
from llmchat.backends.anthropic import Anthropic
from llmchat.protocols.anthropic import thinking_signature
from llmchat.proxy import make_app
from llmchat.proxy.anthropic_routes import without_billing_header
from llmchat.retry import Inference
from llmchat.testing import ChatResponder, RecordedRequest, Reply, ScriptedServer, WaitFor, Write

from .proxy_servers import serve_proxy
from .proxy_support import UsageSink, running_proxy
from .test_proxy import (
    _CLIENTS,  # closed after each test by the autouse _close_clients
    _chunk,
    _close_clients,
    _usage,
)
from .test_proxy import TOOLS_ANTHROPIC as TOOLS

__all__ = ["_close_clients"]  # imported to run here too: it closes the clients a test made

anthropic = pytest.importorskip("anthropic")
httpx = pytest.importorskip("httpx2")  # this SDK version is built on httpx2

WAIT = 10.0
PING = 0.02  # seconds: the tests wait for pings as events, this only makes them come soon
FIXTURE = Path(__file__).parent / "fixtures" / "anthropic" / "claude_code_request.json"
BETAS = (
    "claude-code-20250219,interleaved-thinking-2025-05-14,fine-grained-tool-streaming-2025-05-14"
)
HI = [{"role": "user", "content": "hi"}]


def _call(index: int, **function: Any) -> dict[str, Any]:
    return {"tool_calls": [{"index": index, "type": "function", "function": function}]}


def _thinking_tool_events() -> list[dict[str, Any]]:
    """Reasoning, then text, then one tool call in fragments: what a reasoning model streams."""
    first = _call(0, name="get_weather", arguments='{"city"')
    first["tool_calls"][0]["id"] = "call_w"
    return [
        _chunk({"role": "assistant", "reasoning_content": "The user wants "}),
        _chunk({"reasoning_content": "the weather."}),
        _chunk({"content": "Checking."}),
        _chunk(first),
        _chunk(_call(0, arguments=': "Oslo"}')),
        _chunk({}, "tool_calls"),
        _usage(11, 9),
    ]


@pytest.fixture
def upstream() -> Iterator[ScriptedServer]:
    server = ScriptedServer(ChatResponder("Hello there, from loopback.", chunk_size=5)).start()
    yield server
    server.stop()


def _client(url: str, http_client: httpx.Client | None = None) -> Any:
    client = anthropic.Anthropic(
        base_url=url, api_key="unused", max_retries=0, timeout=WAIT, http_client=http_client
    )
    _CLIENTS.append(client)
    return client


def _chat_bodies(server: ScriptedServer) -> list[dict[str, Any]]:
    return [r.json() for r in server.requests if r.path.endswith("/chat/completions")]


class _RawStream:
    """``POST`` a body to the proxy and read its answer one SSE event at a time."""

    def __init__(self, url: str, path: str, body: dict[str, Any], **headers: str) -> None:
        host, port = url.removeprefix("http://").split(":")
        self.connection = http.client.HTTPConnection(host, int(port), timeout=WAIT)
        sent = {"Content-Type": "application/json", **headers}
        self.connection.request("POST", path, json.dumps(body), sent)
        self.response = self.connection.getresponse()
        self.status = self.response.status

    def events(self) -> Iterator[tuple[str, dict[str, Any]]]:
        name = ""
        while True:
            line = self.response.readline()
            if not line:
                return
            line = line.rstrip(b"\r\n")
            if line.startswith(b"event: "):
                name = line[7:].decode()
            elif line.startswith(b"data: "):
                yield name, json.loads(line[6:])

    def close(self) -> None:
        self.connection.close()


def _read_all(
    url: str, body: dict[str, Any], release: threading.Event
) -> list[tuple[str, dict[str, Any]]]:
    """Every event of a streamed answer; `release` is set at the first ping (and at the end)."""
    raw = _RawStream(url, "/v1/messages", body)
    seen: list[tuple[str, dict[str, Any]]] = []
    try:
        for event in raw.events():
            seen.append(event)
            if event[0] == "ping":
                release.set()
    finally:
        release.set()
        raw.close()
    return seen


def _stream_body(**fields: Any) -> dict[str, Any]:
    return {"model": "m", "max_tokens": 64, "stream": True, "messages": HI, **fields}


# -- ping -------------------------------------------------------------------------


def test_pings_while_the_upstream_is_in_prefill_then_one_message_start(upstream):
    release = threading.Event()
    upstream.set_script(
        [
            Reply.sse(
                [_chunk({"content": "Late "}), _chunk({"content": "hello."}), _chunk({}, "stop")],
                before_headers=[WaitFor(release, 30)],
            )
        ]
    )
    with OpenAICommon(upstream.url) as b, running_proxy(b, ping_interval=PING) as url:
        raw = _RawStream(url, "/v1/messages", _stream_body())
        try:
            events = raw.events()
            opening = [next(events) for _ in range(3)]  # the upstream has sent nothing yet
            release.set()
            rest = list(events)
        finally:
            release.set()
            raw.close()
    assert raw.status == 200
    assert [name for name, _ in opening] == ["message_start", "ping", "ping"]
    assert opening[1][1] == {"type": "ping"}
    names = [name for name, _ in opening + rest]
    assert names.count("message_start") == 1 and names[-2:] == ["message_delta", "message_stop"]
    text = "".join(d["delta"]["text"] for n, d in rest if n == "content_block_delta")
    assert text == "Late hello."
    assert [d["index"] for n, d in rest if n == "content_block_start"] == [0]


def test_pings_while_a_tool_call_is_assembled(upstream):
    """Arguments arrive whole at the end, so the client sees nothing while they stream."""
    release = threading.Event()
    head = _call(0, name="get_weather", arguments='{"ci')
    head["tool_calls"][0]["id"] = "call_1"
    frames = [
        _chunk({"content": "Let me look."}),
        _chunk(head),
        _chunk(_call(0, arguments='ty": "Oslo"}')),
        _chunk({}, "tool_calls"),
    ]
    steps: list[Any] = [Write(b"data: " + json.dumps(f).encode() + b"\n\n") for f in frames]
    steps.insert(2, WaitFor(release, 30))
    upstream.set_script(
        [Reply(200, {"Content-Type": "text/event-stream"}, framing="chunked", steps=steps)]
    )
    with OpenAICommon(upstream.url) as b, running_proxy(b, ping_interval=PING) as url:
        seen = _read_all(url, _stream_body(tools=TOOLS), release)
    names = [name for name, _ in seen]
    assert "ping" in names
    assert names.index("ping") > names.index("content_block_start")  # after the text began
    [tool] = [d["content_block"] for n, d in seen if n == "content_block_start"][1:]
    assert tool["type"] == "tool_use" and tool["name"] == "get_weather"
    assert names[-1] == "message_stop"
    assert [d["delta"]["stop_reason"] for n, d in seen if n == "message_delta"] == ["tool_use"]


class _Watching(httpx.HTTPTransport):
    """An httpx transport that sets `seen` once the response body carried a ping event."""

    def __init__(self, seen: threading.Event) -> None:
        super().__init__()
        self.seen = seen

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = super().handle_request(request)
        inner, seen = response.stream, self.seen

        class Watched(httpx.SyncByteStream):
            def __iter__(self) -> Iterator[bytes]:
                for part in inner:  # type: ignore[union-attr]
                    if b"event: ping" in part:
                        seen.set()
                    yield part

            def close(self) -> None:
                inner.close()  # type: ignore[union-attr]

        response.stream = Watched()
        return response


def test_sdk_stream_helpers_read_through_pings(upstream):
    seen = threading.Event()
    upstream.set_script([Reply.sse(_thinking_tool_events(), before_headers=[WaitFor(seen, 30)])])
    try:
        with OpenAICommon(upstream.url) as b, running_proxy(b, ping_interval=PING) as url:
            client = _client(url, httpx.Client(transport=_Watching(seen), timeout=WAIT))
            with client.messages.stream(
                model="m",
                max_tokens=256,
                messages=HI,
                tools=TOOLS,
                thinking={"type": "enabled", "budget_tokens": 1024},
            ) as stream:
                kinds = [event.type for event in stream]
                message = stream.get_final_message()
    finally:
        seen.set()
    assert seen.is_set()  # the upstream was held until a ping had come through
    assert kinds.count("message_start") == 1
    assert [b.type for b in message.content] == ["thinking", "text", "tool_use"]
    assert message.content[2].input == {"city": "Oslo"}
    assert message.stop_reason == "tool_use" and message.usage.output_tokens == 9


def test_failure_after_pings_is_an_error_event_in_fixed_words(upstream):
    release = threading.Event()
    secret = "upstream detail at /srv/models/secret.gguf"
    upstream.set_script([Reply.error(500, secret, before_headers=[WaitFor(release, 30)])])
    sink = UsageSink()
    with (
        OpenAICommon(upstream.url) as b,
        running_proxy(b, ping_interval=PING, usage_log=sink) as url,
    ):
        seen = _read_all(url, _stream_body(), release)
        [usage] = sink.wait(1)
    names = [name for name, _ in seen]
    assert names[0] == "message_start" and names[-1] == "error"
    assert "message_stop" not in names
    error = seen[-1][1]["error"]
    assert error["type"] == "api_error" and "secret" not in json.dumps(seen)
    assert (usage["ok"], usage["error_type"]) == (False, "http")


def test_hang_up_while_pinging_cancels_the_upstream(upstream):
    release = threading.Event()
    upstream.set_script(
        [Reply.sse([_chunk({"content": "never"})], before_headers=[WaitFor(release, 30)])]
    )
    sink = UsageSink()
    try:
        with (
            OpenAICommon(upstream.url) as b,
            running_proxy(b, ping_interval=PING, usage_log=sink) as url,
        ):
            raw = _RawStream(url, "/v1/messages", _stream_body())
            events = raw.events()
            assert next(events)[0] == "message_start" and next(events)[0] == "ping"
            raw.response.close()
            raw.close()
            assert upstream.wait_for_requests(1, WAIT)
            record = upstream.requests[0]
            assert record.disconnected.wait(WAIT), "the upstream never saw the proxy hang up"
            [usage] = sink.wait(1)
    finally:
        release.set()
    assert usage["status"] == 499 and usage["error_type"] == "client_abort"


def test_pings_and_hang_up_under_gunicorn(upstream, tmp_path):
    """gunicorn's threaded workers: the pump thread, the pings and the hang-up watch."""
    release = threading.Event()
    upstream.set_script(
        [
            Reply.sse(
                [_chunk({"content": "Late."}), _chunk({}, "stop")],
                before_headers=[WaitFor(release, 30)],
            ),
            Reply.sse([_chunk({"content": "never"})], before_headers=[WaitFor(release, 30)]),
        ]
    )
    options = ("--workers", "1", "--threads", "4", "--ping-interval", str(PING))
    try:
        with serve_proxy("gunicorn", upstream.url, tmp_path, gunicorn_args=options) as proxy:
            seen = _read_all(proxy.url, _stream_body(), release)
            release.clear()
            raw = _RawStream(proxy.url, "/v1/messages", _stream_body())
            events = raw.events()
            assert next(events)[0] == "message_start" and next(events)[0] == "ping"
            raw.response.close()
            raw.close()
            assert upstream.wait_for_requests(2, WAIT)
            assert upstream.requests[1].disconnected.wait(WAIT), "the upstream never saw it"
            usage = proxy.usage.wait(2, route="/v1/messages")
    finally:
        release.set()
    names = [name for name, _ in seen]
    assert names[:2] == ["message_start", "ping"] and names[-1] == "message_stop"
    assert names.count("message_start") == 1
    assert sorted(e["status"] for e in usage) == [200, 499]


@pytest.mark.parametrize("fails", [False, True])
def test_pings_while_an_inference_chain_is_still_starting(fails):
    """A chain returns only once a backend has content: its prefill is inside start()."""
    release = threading.Event()
    broken = ScriptedServer([Reply.error(500, "down")]).start()
    late = (
        Reply.error(503, "busy", before_headers=[WaitFor(release, 30)])
        if fails
        else Reply.sse(
            [_chunk({"content": "From the second."}), _chunk({}, "stop"), _usage(2, 3)],
            before_headers=[WaitFor(release, 30)],
        )
    )
    slow = ScriptedServer([late]).start()
    sink = UsageSink()
    try:
        with OpenAICommon(broken.url) as first, OpenAICommon(slow.url) as second:
            chain = Inference([first, second], max_retries=0, timeout=WAIT)
            with running_proxy(chain, ping_interval=PING, usage_log=sink) as url:
                seen = _read_all(url, _stream_body(), release)
                [usage] = sink.wait(1)
    finally:
        release.set()
        broken.stop()
        slow.stop()
    names = [name for name, _ in seen]
    assert names[:2] == ["message_start", "ping"] and names.count("message_start") == 1
    if fails:
        assert names[-1] == "error" and "message_stop" not in names
        assert seen[-1][1]["error"]["type"] == "api_error"
        assert usage["ok"] is False
    else:
        text = "".join(d["delta"]["text"] for n, d in seen if n == "content_block_delta")
        assert text == "From the second." and names[-1] == "message_stop"
        assert usage["ok"] and usage["output_tokens"] == 3


def test_a_fast_upstream_failure_still_gets_its_http_status(upstream):
    upstream.set_script([Reply.error(429, "slow down")])
    with OpenAICommon(upstream.url) as b, running_proxy(b, ping_interval=PING) as url:
        with pytest.raises(anthropic.RateLimitError):
            with _client(url).messages.stream(model="m", max_tokens=8, messages=HI) as s:
                s.get_final_message()


@pytest.mark.parametrize("bad", [0, -1.0, float("inf"), float("nan")])
def test_ping_interval_is_validated(upstream, bad):
    with OpenAICommon(upstream.url) as b, pytest.raises(ValueError, match="ping_interval"):
        make_app(b, ping_interval=bad)
    with OpenAICommon(upstream.url) as b, pytest.raises(TypeError, match="ping_interval"):
        make_app(b, ping_interval="5")


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
    assert "weather." not in json.dumps(sent[1])  # the thinking was dropped on the way in
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
    assert "I will run ls" not in json.dumps(sent)  # signed thinking in history is dropped
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
    from llmchat.cli import _parser
    from llmchat.cli_proxy import _proxy_app

    args = _parser().parse_args(["proxy", "--upstream", "http://127.0.0.1:9/v1", *options])
    app, backend = _proxy_app(args)
    try:
        routes = app._routes[("POST", "/v1/messages")][1].__self__
        assert (routes.ping_interval, routes.drop_billing_header) == (interval, drop)
    finally:
        app.close()
        backend.close()
