"""Shared by the Gemini face's tests: raw HTTP to the proxy, the upstream's chat bodies.

The tests talk to the real proxy over loopback with `http.client` (the wire
as Gemini CLI and google-genai write it), over a `ScriptedServer` upstream.
"""

from __future__ import annotations

import http.client
import json
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlsplit

from llmchat import OpenAICommon
from llmchat.testing import ChatResponder, Script, ScriptedServer

from ...support.proxy import UsageSink, running_proxy

__all__ = [
    "GENERATE",
    "HOWS",
    "STREAM",
    "Answered",
    "chat_bodies",
    "gemini_proxy",
    "generate",
    "last_chat_body",
    "request",
    "text_of",
    "user",
]

WAIT = 10.0
GENERATE = "/v1beta/models/gemini-2.5-pro:generateContent"
STREAM = "/v1beta/models/gemini-2.5-pro:streamGenerateContent"


class Answered:
    """One raw HTTP answer: status, headers (lower-case names), body."""

    def __init__(self, status: int, headers: Mapping[str, str], body: bytes) -> None:
        self.status = status
        self.headers = dict(headers)
        self.body = body

    def json(self) -> Any:
        return json.loads(self.body)

    def __repr__(self) -> str:
        return f"Answered({self.status}, {self.body[:300]!r})"


def request(
    url: str,
    method: str,
    path: str,
    body: Any = None,
    headers: Mapping[str, str] | None = None,
) -> Answered:
    """`method path` on the proxy at `url`, the body as JSON; the whole answer."""
    parts = urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=WAIT)
    try:
        data = None if body is None else json.dumps(body).encode()
        sent = {"Content-Type": "application/json", **(headers or {})}
        connection.request(method, path, body=data, headers=sent)
        response = connection.getresponse()
        answer = response.read()
        named = {name.lower(): value for name, value in response.getheaders()}
        return Answered(response.status, named, answer)
    finally:
        connection.close()


HOWS = ("generateContent", "sse", "array")
"""The three ways to ask: ``generateContent``, the stream as SSE (``alt=sse``), as a JSON array."""


def generate(
    url: str,
    how: str,
    model: str = "gemini-2.5-pro",
    text: str = "hi",
    headers: Mapping[str, str] | None = None,
    key: str | None = None,
) -> tuple[Answered, list[dict[str, Any]]]:
    """One user `text` to `model` in one of the `HOWS` (`key` sent as ``?key=``): the raw
    answer and, when it is a 200, its GenerateContentResponse chunks (one for
    ``generateContent``)."""
    method = "generateContent" if how == "generateContent" else "streamGenerateContent"
    query = [*(["alt=sse"] if how == "sse" else []), *([f"key={key}"] if key else [])]
    path = f"/v1beta/models/{model}:{method}" + ("?" + "&".join(query) if query else "")
    answer = request(url, "POST", path, {"contents": [user(text)]}, headers)
    if answer.status != 200:
        return answer, []
    if how == "sse":
        lines = answer.body.decode().splitlines()
        return answer, [json.loads(line[6:]) for line in lines if line.startswith("data: ")]
    chunks = answer.json()
    return answer, chunks if how == "array" else [chunks]


def text_of(chunks: list[dict[str, Any]]) -> str:
    """The text parts of every chunk, joined."""
    return "".join(
        part.get("text", "")
        for chunk in chunks
        for candidate in chunk.get("candidates", [])
        for part in candidate.get("content", {}).get("parts", [])
    )


def user(text: str) -> dict[str, Any]:
    """A user Content of one text part."""
    return {"role": "user", "parts": [{"text": text}]}


def chat_bodies(server: ScriptedServer) -> list[dict[str, Any]]:
    """The chat bodies the upstream received, in order."""
    return [r.json() for r in server.requests if r.path.endswith("/chat/completions")]


def last_chat_body(server: ScriptedServer) -> dict[str, Any]:
    bodies = chat_bodies(server)
    assert bodies, "the upstream received no chat request"
    return bodies[-1]


@contextmanager
def gemini_proxy(
    script: Script | None = None, **options: Any
) -> Iterator[tuple[str, ScriptedServer, UsageSink]]:
    """The proxy over a scripted upstream (a small llama-server by default), with a usage
    sink; yields the proxy's URL, the upstream and the sink."""
    sink = UsageSink()
    upstream = ScriptedServer(script or ChatResponder("Hello from loopback.", chunk_size=5))
    upstream.start()
    try:
        with (
            OpenAICommon(upstream.url) as backend,
            running_proxy(backend, usage_log=sink, **options) as url,
        ):
            yield url, upstream, sink
    finally:
        upstream.stop()
