"""The secrets matrix, continued: an upstream that echoes its own key in a 200 answer.

Every translated face x blocking/streamed x where the echo is (the model, the
id, the text, the reasoning, a tool call's name or arguments, and the text or
reasoning with the key split across two deltas): the client never sees any form
of the key, a whole body's Content-Length is its true length, and the answer is
still one its client can read. And the cross-host redirect row: for every
backend and both modes (support/redirects.py's backends and runner), and through the
proxy, the other host never sees the key nor the prompt.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
import requests

from llmchat import OpenAICommon
from llmchat.testing import ChatResponder, RecordedRequest, Reply, ScriptedServer

from .support import redirects
from .support.chat_frames import chunk
from .support.proxy import running_proxy
from .support.secrets import KEY, MARKER, WAIT, leaks

MESSAGES = [{"role": "user", "content": "hi"}]
HALF = len(KEY) // 2


def _call(name: str, arguments: str) -> dict[str, Any]:
    function = {"name": name, "arguments": arguments}
    return {"tool_calls": [{"index": 0, "id": "call_1", "type": "function", "function": function}]}


# where -> (the deltas the upstream streams, its model, its id)
ECHOES: dict[str, tuple[list[dict[str, Any]], str, str]] = {
    "model": ([{"content": "Hi"}], f"model-{KEY}", "chatcmpl-1"),
    "id": ([{"content": "Hi"}], "loopback", f"chatcmpl-{KEY}"),
    "text": ([{"content": f"your key is {KEY} ok"}], "loopback", "chatcmpl-1"),
    "reasoning": (
        [{"reasoning_content": f"the key is {KEY}"}, {"content": "ok"}],
        "loopback",
        "chatcmpl-1",
    ),
    "text-split": (
        [{"content": f"your key is {KEY[:HALF]}"}, {"content": f"{KEY[HALF:]} ok"}],
        "loopback",
        "chatcmpl-1",
    ),
    "reasoning-split": (
        [
            {"reasoning_content": f"the key is {KEY[:HALF]}"},
            {"reasoning_content": KEY[HALF:]},
            {"content": "ok"},
        ],
        "loopback",
        "chatcmpl-1",
    ),
    # A key's first letters and no more: held back, then passed on whole.
    "text-prefix": ([{"content": f"ends with {KEY[:5]}"}], "loopback", "chatcmpl-1"),
    "reasoning-prefix": (
        [{"reasoning_content": f"thinks {KEY[:5]}"}, {"content": "ok"}],
        "loopback",
        "chatcmpl-1",
    ),
    "tool-name": ([_call(f"fn_{KEY}", '{"a": 1}')], "loopback", "chatcmpl-1"),
    "tool-arguments": ([_call("lookup", json.dumps({"key": KEY}))], "loopback", "chatcmpl-1"),
}

# face -> (path, request body)
FACES: dict[str, tuple[str, dict[str, Any]]] = {
    "ollama-chat": ("/api/chat", {"model": "m", "messages": MESSAGES}),
    "ollama-generate": ("/api/generate", {"model": "m", "prompt": "hi"}),
    "anthropic": (
        "/v1/messages",
        {
            "model": "c",
            "max_tokens": 64,
            "messages": MESSAGES,
            "thinking": {"type": "enabled", "budget_tokens": 32},
        },
    ),
    "responses": ("/v1/responses", {"model": "r", "input": "hi"}),
}


def _upstream(where: str) -> Callable[[RecordedRequest], Reply]:
    deltas, model, answer_id = ECHOES[where]
    finish = "tool_calls" if where.startswith("tool") else "stop"

    def script(request: RecordedRequest) -> Reply:
        frames = [chunk({"role": "assistant", **delta}) for delta in deltas]
        frames.append(chunk({}, finish))
        for frame in frames:
            frame["model"], frame["id"] = model, answer_id
        return Reply.sse(frames)

    return script


def _readable(face: str, stream: bool, content: bytes) -> None:
    """The body is the face's own framing, every piece of it JSON."""
    text = content.decode("utf-8")
    if not stream:
        json.loads(text)
    elif face.startswith("ollama"):
        lines = [json.loads(line) for line in text.splitlines() if line]
        assert lines[-1]["done"] is True
    else:
        events = [line[6:] for line in text.splitlines() if line.startswith("data: ")]
        last = [json.loads(data) for data in events][-1]
        assert last["type"] in ("message_stop", "response.completed")


def _text_of(face: str, stream: bool, content: bytes) -> str:
    """The answer's text as the face's client reads it."""
    text = content.decode("utf-8")
    if not stream:
        body = json.loads(text)
        if face == "ollama-chat":
            return str(body["message"]["content"])
        if face == "ollama-generate":
            return str(body["response"])
        if face == "anthropic":
            return "".join(b["text"] for b in body["content"] if b["type"] == "text")
        items = [i for i in body["output"] if i["type"] == "message"]
        return "".join(part["text"] for item in items for part in item["content"])
    if face.startswith("ollama"):
        lines = [json.loads(line) for line in text.splitlines() if line]
        key = "response" if face == "ollama-generate" else None
        return "".join(str(line[key] if key else line["message"]["content"]) for line in lines)
    events = [json.loads(line[6:]) for line in text.splitlines() if line.startswith("data: ")]
    if face == "anthropic":
        deltas = [e["delta"] for e in events if e["type"] == "content_block_delta"]
        return "".join(d["text"] for d in deltas if d["type"] == "text_delta")
    return "".join(e["delta"] for e in events if e["type"] == "response.output_text.delta")


@pytest.mark.parametrize("where", list(ECHOES))
@pytest.mark.parametrize("stream", [False, True], ids=["blocking", "stream"])
@pytest.mark.parametrize("face", list(FACES))
def test_translated_faces_never_show_an_echoed_key(face: str, stream: bool, where: str) -> None:
    path, body = FACES[face]
    with ScriptedServer(_upstream(where)) as upstream_url:
        with OpenAICommon(upstream_url, api_key=KEY) as backend, running_proxy(backend) as url:
            answer = requests.post(url + path, json={**body, "stream": stream}, timeout=WAIT)
    content = answer.content
    seen = "\n".join(
        [*(f"{k}: {v}" for k, v in answer.headers.items()), content.decode("utf-8", "replace")]
    )
    assert answer.status_code == 200, seen
    assert not leaks(seen), f"the {face} client saw {leaks(seen)}: {seen!r}"
    assert MARKER.encode() not in content
    if "Content-Length" in answer.headers:
        assert int(answer.headers["Content-Length"]) == len(content)
    _readable(face, stream, content)
    if where in ("text", "text-split"):  # nothing lost or doubled around the hold
        assert _text_of(face, stream, content) == "your key is [redacted] ok"
    elif where == "text-prefix":
        assert _text_of(face, stream, content) == f"ends with {KEY[:5]}"
    elif where.startswith("reasoning"):
        assert _text_of(face, stream, content) == "ok"
    if where == "reasoning-prefix":  # held, then sent before the text (maybe as its own delta)
        assert b"thinks" in content and KEY[:5].encode() in content
        if stream:
            assert content.index(KEY[:5].encode()) < content.rindex(b'"ok"')


# -- the cross-host redirect row -----------------------------------------------------


def _never_saw(server: ScriptedServer, key: str, prompt: str) -> None:
    for request in server.requests:
        seen = "\n".join([request.path, *request.headers.values(), request.body.decode("latin-1")])
        assert key not in seen and prompt not in seen
    assert server.requests == []


@pytest.mark.parametrize("mode", ["blocking", "stream"])
@pytest.mark.parametrize("name", list(redirects.BACKENDS))
def test_a_cross_host_redirect_gets_neither_key_nor_prompt(name: str, mode: str) -> None:
    elsewhere = ScriptedServer(ChatResponder("stolen")).start()
    target = elsewhere.url.removesuffix("/v1")
    origin = ScriptedServer(lambda r: Reply(307, [("Location", target + r.path)], b"")).start()
    try:
        with redirects.BACKENDS[name](origin.url.removesuffix("/v1")) as backend:
            response = redirects.run(backend, mode)
    finally:
        origin.stop()
        elsewhere.stop()
    assert not response.is_success
    _never_saw(elsewhere, redirects.KEY, redirects.MESSAGES[0]["content"])


@pytest.mark.parametrize("stream", [False, True], ids=["blocking", "stream"])
@pytest.mark.parametrize("path", ["/v1/chat/completions", "/api/chat", "/v1/messages"])
def test_a_proxied_cross_host_redirect_gets_neither_key_nor_prompt(path: str, stream: bool) -> None:
    """The proxy's own upstream calls (relayed and translated) refuse it too; the client
    gets a 502 in its face's shape."""
    prompt = "the proxied prompt"
    elsewhere = ScriptedServer(ChatResponder("stolen")).start()
    origin = ScriptedServer(lambda r: Reply(308, [("Location", elsewhere.url + "/x")], b"")).start()
    body = {"model": "m", "max_tokens": 8, "stream": stream}
    body["messages"] = [{"role": "user", "content": prompt}]
    try:
        with OpenAICommon(origin.url, api_key=KEY) as backend, running_proxy(backend) as url:
            answer = requests.post(url + path, json=body, timeout=WAIT)
    finally:
        origin.stop()
        elsewhere.stop()
    assert answer.status_code == 502
    _never_saw(elsewhere, KEY, prompt)
