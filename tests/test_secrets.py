"""The backend's API key never leaks: every way of echoing it x every output.

Echo ways are what an upstream (or a subclass's hook) can do with the key; outputs
are everything a library user, a log reader or a proxy client can see. Each cell
of the matrix runs on real sockets: the upstream is llmchat's scripted loopback
server, the proxy runs under its own real server (`llmchat.proxy.make_server`).
"""

from __future__ import annotations

import json
import logging
import socket
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
import requests

from llmchat import OpenAICommon
from llmchat.backends.openrouter import OpenRouter
from llmchat.proxy import make_app
from llmchat.retry import Exhausted, Inference
from llmchat.testing import RecordedRequest, Reply, ScriptedServer
from llmchat.wirelog import ENV_VAR

from .support.chat_frames import chunk as _chunk
from .support.proxy import running_proxy
from .support.secrets import KEY, MARKER, MESSAGES, WAIT, leaks


def _ok(request: RecordedRequest, headers: dict[str, str] | None = None) -> Reply:
    """A successful answer in the shape the request asked for."""
    body = request.json() or {}
    if request.method == "GET":
        return Reply.json({"object": "list", "data": [{"id": "loopback"}]}, headers=headers)
    if body.get("stream"):
        return Reply.sse(
            [_chunk({"role": "assistant", "content": "Hi"}), _chunk({}, "stop")],
            headers=headers,
        )
    message = {"role": "assistant", "content": "Hi"}
    return Reply.json(
        {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "model": "loopback",
            "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
        },
        headers=headers,
    )


_HTML_500 = (
    "<html><body><h1>500</h1><pre>Traceback (most recent call last):\n"
    '  File "/srv/internal/app.py", line 12, in handler\n'
    f"    check(Authorization='Bearer {KEY}')\n"
    "KeyError: http://inference.internal.example:8000/v1</pre></body></html>"
)
_ESCAPED_BODY = (
    '{"error": {"message": "invalid key '
    + json.dumps(KEY)[1:-1].replace("/", "\\/")
    + '", "type": "auth"}, "debug_url": "https://up.example/check?key='
    + quote(KEY, safe="")
    + '"}'
)
_ESCAPED_EVENT = (
    'data: {"error": {"message": "key '
    + json.dumps(KEY)[1:-1].replace("/", "\\/")
    + " rejected, see /check?key="
    + quote(KEY, safe="")
    + '"}}\n\n'
)

# name -> script for the upstream (a Reply for every request, or a callable)
ECHOES: dict[str, Callable[[RecordedRequest], Reply]] = {
    "401-json": lambda r: Reply.error(401, f"Incorrect API key provided: {KEY}", "auth"),
    "500-html": lambda r: Reply.text(_HTML_500, 500, "text/html"),
    "stream-error-event": lambda r: Reply.sse(
        [_chunk({"role": "assistant", "content": "Hi"}), {"error": {"message": f"bad {KEY}"}}],
        done=False,
    ),
    "response-header": lambda r: _ok(r, {"X-Debug": f"authorized as Bearer {KEY}"}),
    "escaped-body": lambda r: Reply(400, {"Content-Type": "application/json"}, _ESCAPED_BODY),
    "escaped-stream-event": lambda r: Reply.sse(
        [_chunk({"role": "assistant", "content": "Hi"}), _ESCAPED_EVENT], done=False
    ),
    # The hook below makes requests refuse the header and quote it: no echo needed.
    "repr-quoted-by-requests": _ok,
}


class TrailingNewlineKey(OpenAICommon):
    """A subclass whose headers hook adds the key with a trailing newline.

    Construction-time validation cannot stop a hook; requests then raises
    InvalidHeader with the header value `repr`-quoted in its message.
    """

    def _get_api_headers(self) -> dict[str, str]:
        headers = super()._get_api_headers()
        headers["Authorization"] = f"Bearer {KEY}\n"
        return headers


@pytest.fixture(params=list(ECHOES))
def echo(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def upstream(echo: str) -> Iterator[ScriptedServer]:
    server = ScriptedServer(ECHOES[echo]).start()
    yield server
    server.stop()


@pytest.fixture
def backend(echo: str, upstream: ScriptedServer) -> Iterator[OpenAICommon]:
    cls = TrailingNewlineKey if echo == "repr-quoted-by-requests" else OpenAICommon
    with cls(upstream.url, api_key=KEY, stream_finish_grace=2.0) as b:
        yield b


@pytest.fixture
def wire_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "wire.log"
    monkeypatch.setenv(ENV_VAR, str(path))
    return path


def _log_text(caplog: pytest.LogCaptureFixture) -> str:
    parts = [caplog.text]
    for record in caplog.records:
        parts.append(record.getMessage())
        if record.exc_text:
            parts.append(record.exc_text)
    return "\n".join(parts)


# -- the library: Response, exceptions, reprs, logs, the wire log file ---------------


@pytest.mark.parametrize("mode", ["blocking", "stream"])
def test_library_outputs_never_hold_the_key(
    echo: str,
    mode: str,
    backend: OpenAICommon,
    wire_file: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="llmchat")
    if mode == "blocking":
        response = backend.chat_completion(MESSAGES)
    else:
        response = backend.chat_completion_stream(MESSAGES).wait(WAIT)
    assert response.is_done
    outputs = {
        "Response.err": response.err or "",
        "repr(response)": repr(response),
        "repr(backend)": repr(backend),
        "repr(WireRequest)": repr(backend.prepare_chat_request(MESSAGES)),
        "logs": _log_text(caplog),
        "LLMCHAT_DEBUG file": wire_file.read_text(encoding="utf-8"),
    }
    if response.error_class is not None:
        with pytest.raises(Exception) as info:
            response.raise_for_error()
        outputs["raise_for_error str"] = str(info.value)
        outputs["raise_for_error repr"] = repr(info.value)
    for name, text in outputs.items():
        assert not leaks(text), f"{name} leaks {leaks(text)}: {text!r}"
    if echo != "response-header":
        assert response.error_class is not None  # every other echo is a failure


# A key echoed in a response header comes with a successful answer: nothing is exhausted.
@pytest.mark.parametrize("echo", [name for name in ECHOES if name != "response-header"])
def test_inference_exhausted_message_never_holds_the_key(
    echo: str, backend: OpenAICommon, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="llmchat")
    with pytest.raises(Exhausted) as info:
        Inference([backend], max_retries=0, timeout=WAIT).run(MESSAGES)
    for text in (str(info.value), repr(info.value), _log_text(caplog)):
        assert not leaks(text), text


# -- the proxy: every face, status line, headers and body ---------------------------

FACES: dict[str, tuple[str, str, dict[str, Any] | None]] = {
    "ollama-chat-stream": ("POST", "/api/chat", {"model": "m", "messages": MESSAGES}),
    "ollama-chat": ("POST", "/api/chat", {"model": "m", "messages": MESSAGES, "stream": False}),
    "anthropic-stream": (
        "POST",
        "/v1/messages",
        {"model": "c", "max_tokens": 8, "messages": MESSAGES, "stream": True},
    ),
    "anthropic": ("POST", "/v1/messages", {"model": "c", "max_tokens": 8, "messages": MESSAGES}),
    "openai-stream": (
        "POST",
        "/v1/chat/completions",
        {"model": "x", "messages": MESSAGES, "stream": True},
    ),
    "openai": ("POST", "/v1/chat/completions", {"model": "x", "messages": MESSAGES}),
    "api-tags": ("GET", "/api/tags", None),
    "v1-models": ("GET", "/v1/models", None),
}


def _client_view(url: str, face: str) -> tuple[requests.Response, bytes, str]:
    """The answer, its body bytes and all the client saw; a relayed stream that failed is
    cut after its error frame, so the body is what arrived before the cut."""
    method, path, body = FACES[face]
    answer = requests.request(method, url + path, json=body, timeout=WAIT, stream=True)
    pieces: list[bytes] = []
    try:
        pieces.extend(answer.iter_content(None))
    except requests.exceptions.ChunkedEncodingError:
        pass
    content = b"".join(pieces)
    answer._content = content  # .content/.json() read what arrived before a cut
    status_line = f"{answer.status_code} {answer.reason}"
    headers = "\n".join(f"{k}: {v}" for k, v in answer.headers.items())
    return answer, content, "\n".join([status_line, headers, content.decode("utf-8", "replace")])


@pytest.mark.parametrize("face", list(FACES))
def test_proxy_clients_never_see_the_key(
    echo: str,
    face: str,
    backend: OpenAICommon,
    wire_file: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="llmchat")
    caplog.set_level(logging.DEBUG, logger="llmchat.proxy")
    with running_proxy(backend) as url:
        answer, content, seen = _client_view(url, face)
    assert not leaks(seen), f"the {face} client saw {leaks(seen)}: {seen!r}"
    content_length = answer.headers.get("Content-Length")
    if content_length is not None:
        assert int(content_length) == len(content)  # never a stale length
    logs = _log_text(caplog)
    assert not leaks(logs), logs
    assert not leaks(wire_file.read_text(encoding="utf-8") if wire_file.exists() else "")


# -- construction-time rejection --------------------------------------------------

BAD_KEYS = {
    "trailing-newline": "sk-abcdef\n",
    "tab": "sk-abc\tdef",
    "leading-space": " sk-abcdef",
    "trailing-space": "sk-abcdef ",
    "crlf": "sk-abcdef\r\n",
}


@pytest.mark.parametrize("value", BAD_KEYS.values(), ids=BAD_KEYS.keys())
@pytest.mark.parametrize("where", ["OpenAICommon", "OpenRouter", "make_app"])
def test_bad_keys_are_refused_at_construction(where: str, value: str) -> None:
    with pytest.raises(ValueError) as info:
        if where == "OpenAICommon":
            OpenAICommon("http://127.0.0.1:9/v1", api_key=value)
        elif where == "OpenRouter":
            OpenRouter(api_key=value)
        else:
            make_app(OpenAICommon("http://127.0.0.1:9/v1"), api_key=value)
    message = str(info.value)
    assert "api_key" in message
    assert "sk-abc" not in message and "def" not in message


@pytest.mark.parametrize("value", BAD_KEYS.values(), ids=BAD_KEYS.keys())
def test_bad_openrouter_env_key_names_the_variable(
    value: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENROUTER_API_KEY", value)
    with pytest.raises(ValueError) as info:
        OpenRouter()
    assert "OPENROUTER_API_KEY" in str(info.value) and "sk-abc" not in str(info.value)


# -- upstream internals never reach proxy clients ------------------------------------

CLIENT_FACES = ["ollama-chat-stream", "ollama-chat", "anthropic-stream", "anthropic", "openai"]


def _error_text(answer: requests.Response) -> str:
    return answer.content.decode("utf-8", "replace")


@pytest.mark.parametrize("chain", [False, True], ids=["backend", "inference"])
@pytest.mark.parametrize("face", CLIENT_FACES)
def test_html_500_reaches_clients_as_the_fixed_message(
    face: str, chain: bool, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="llmchat.proxy")
    with ScriptedServer(Reply.text(_HTML_500, 500, "text/html")) as upstream_url:
        backend = OpenAICommon(upstream_url, api_key=KEY)
        target: Any = Inference([backend], max_retries=0) if chain else backend
        with running_proxy(target) as url:
            answer, _, seen = _client_view(url, face)
    text = _error_text(answer)
    assert answer.status_code == 502
    assert "The upstream server failed (HTTP 500)" in text
    for internal in ("/srv/internal", "inference.internal.example", "Traceback", "<html", MARKER):
        assert internal not in seen
    proxy_log = "\n".join(
        r.getMessage() for r in caplog.records if r.name.startswith("llmchat.proxy")
    )
    assert "<html" not in proxy_log and "Traceback" not in proxy_log
    assert "500" in proxy_log  # class and status are logged


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.parametrize("face", [*CLIENT_FACES, "openai-stream", "v1-models"])
def test_connection_refused_names_no_host_or_port(
    face: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="llmchat.proxy")
    port = _closed_port()
    backend = OpenAICommon(f"http://127.0.0.1:{port}/v1", api_key=KEY)
    with running_proxy(backend) as url:
        answer, _, _ = _client_view(url, face)
    text = _error_text(answer)
    assert answer.status_code == 502
    assert "Could not reach the upstream server" in text
    assert str(port) not in text and "127.0.0.1" not in text
    assert any(r.name == "llmchat.proxy" and r.levelno == logging.WARNING for r in caplog.records)


@pytest.mark.parametrize("face", [*CLIENT_FACES, "openai-stream"])
def test_json_400_message_goes_to_the_log_not_the_client(
    face: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="llmchat.proxy")
    said = "context window exceeded on shard gpu-node-7"
    with ScriptedServer(Reply.error(400, said, "invalid_request_error")) as upstream_url:
        with OpenAICommon(upstream_url) as backend, running_proxy(backend) as url:
            answer, _, seen = _client_view(url, face)
    assert answer.status_code == 400
    assert "The upstream server rejected the request (HTTP 400)" in _error_text(answer)
    assert said not in seen
    warnings = [
        r.getMessage()
        for r in caplog.records
        if r.name == "llmchat.proxy" and r.levelno == logging.WARNING
    ]
    assert any(said in line for line in warnings), warnings


def test_relayed_body_is_scrubbed_with_a_true_length() -> None:
    """A 2xx whole body that echoes the key: scrubbed, and no stale Content-Length."""
    body = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": "loopback",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": f"your key is {KEY}"},
                "finish_reason": "stop",
            }
        ],
    }
    with ScriptedServer(Reply.json(body)) as upstream_url:
        with OpenAICommon(upstream_url, api_key=KEY) as backend, running_proxy(backend) as url:
            answer = requests.post(
                url + "/v1/chat/completions", json={"messages": MESSAGES}, timeout=WAIT
            )
    assert answer.status_code == 200
    assert answer.json()["choices"][0]["message"]["content"] == "your key is [redacted]"
    if "Content-Length" in answer.headers:
        assert int(answer.headers["Content-Length"]) == len(answer.content)


def test_relayed_stream_error_event_is_passed_through_scrubbed() -> None:
    """An in-band error event in a 200 stream reaches an OpenAI client, without the key."""
    reply = Reply.sse(
        [_chunk({"role": "assistant", "content": "Hi"}), {"error": {"message": f"bad {KEY}"}}],
        done=False,
    )
    with ScriptedServer(reply) as upstream_url:
        with OpenAICommon(upstream_url, api_key=KEY) as backend, running_proxy(backend) as url:
            answer = requests.post(
                url + "/v1/chat/completions",
                json={"messages": MESSAGES, "stream": True},
                timeout=WAIT,
                stream=True,
            )
            pieces: list[bytes] = []
            # No [DONE] after it: the relay's own error frame follows, then the cut.
            with pytest.raises(requests.exceptions.ChunkedEncodingError):
                pieces.extend(answer.iter_content(None))
    content = b"".join(pieces)
    assert answer.status_code == 200
    assert b'{"error":{"message":"bad [redacted]"}}' in content
    assert MARKER.encode() not in content
