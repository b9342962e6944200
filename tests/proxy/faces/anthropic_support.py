"""Shared by the Anthropic face's Claude Code tests: SDK clients, raw SSE, scripted events.

The scripted upstream they share is conftest.py's `upstream` fixture.
"""

from __future__ import annotations

import http.client
import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from llmchat.testing import ScriptedServer

from ...support.chat_frames import chunk as _chunk
from ...support.chat_frames import usage_chunk as _usage
from ...support.paths import FIXTURES_DIR
from ..support import CLIENTS  # closed after each test by the autouse _close_clients
from ..support import TOOLS_ANTHROPIC as TOOLS

__all__ = [
    "BETAS",
    "FIXTURE",
    "HI",
    "PING",
    "TOOLS",
    "WAIT",
    "_RawStream",
    "_call",
    "_chat_bodies",
    "_client",
    "_read_all",
    "_stream_body",
    "_thinking_tool_events",
]

anthropic = pytest.importorskip("anthropic")
httpx = pytest.importorskip("httpx2")  # this SDK version is built on httpx2

WAIT = 10.0
PING = 0.02  # seconds: the tests wait for pings as events, this only makes them come soon
FIXTURE = FIXTURES_DIR / "anthropic" / "claude_code_request.json"
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


def _client(url: str, http_client: httpx.Client | None = None) -> Any:
    client = anthropic.Anthropic(
        base_url=url, api_key="unused", max_retries=0, timeout=WAIT, http_client=http_client
    )
    CLIENTS.append(client)
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
    url: str, body: dict[str, Any], release: threading.Event, *, after: str | None = None
) -> list[tuple[str, dict[str, Any]]]:
    """Every event of a streamed answer; `release` is set at the first ping (the first one
    after an `after` event, when given) and at the end."""
    raw = _RawStream(url, "/v1/messages", body)
    seen: list[tuple[str, dict[str, Any]]] = []
    try:
        for event in raw.events():
            seen.append(event)
            if event[0] == "ping" and (after is None or any(n == after for n, _ in seen)):
                release.set()
    finally:
        release.set()
        raw.close()
    return seen


def _stream_body(**fields: Any) -> dict[str, Any]:
    return {"model": "m", "max_tokens": 64, "stream": True, "messages": HI, **fields}
