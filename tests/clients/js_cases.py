"""The scripted upstream the JavaScript client matrix runs against, one behaviour per case.

A client names the case as its model (the proxy passes the client's model name
on when the backend has none): ``text``, ``length`` (stops at the token limit),
``reasoning`` (``reasoning_content`` first), ``tool`` (an `AgentUpstream` turn:
``get_weather`` called, then a final answer once the result comes back),
``fail`` (a frame, then half of one, then the connection drops) and ``abort``
(a frame, then silence until the client leaves). `run_cases` runs one
tests/js/cases/<client>.mjs over the proxy and returns its JSON report.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from llmchat.testing import (
    ChatResponder,
    Drop,
    RecordedRequest,
    Reply,
    Stall,
    Write,
)

from ..support.agent_upstream import AgentUpstream, chat_reply, tool_results
from ..support.chat_frames import chunk
from ..support.proxy import proxy_over
from .support import node_json

WAIT = 10.0
TEXT = "Hello from the proxy."
REASONING = "Thinking it over."
TOOL_RESULT = "rain in Oslo"
FINAL = "It rains in Oslo."


def _frame(event: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(event).encode() + b"\n\n"


class CaseUpstream:
    """A `ScriptedServer` script that answers each request by the case its model names."""

    def __init__(self) -> None:
        self.tool = AgentUpstream(["get_weather"], lambda _: {"city": "Oslo"}, final=FINAL)
        self.requests: dict[str, list[RecordedRequest]] = {}

    def __call__(self, request: RecordedRequest) -> Reply:
        body = request.json()
        if not isinstance(body, dict) or "messages" not in body:
            return ChatResponder(TEXT)(request)
        case = str(body.get("model", ""))
        self.requests.setdefault(case, []).append(request)
        if case == "tool":
            return self.tool(request)
        if case == "length":
            return chat_reply(body, {"content": "Cut"}, "length")
        if case == "reasoning":
            return chat_reply(body, {"content": TEXT}, "stop", REASONING)
        first = _frame(chunk({"role": "assistant", "content": "partial "}))
        headers = {"Content-Type": "text/event-stream"}
        if case == "fail":
            steps = [Write(first), Write(b'data: {"choi'), Drop()]
            return Reply(200, headers, framing="chunked", steps=steps)
        if case == "abort":
            return Reply(200, headers, framing="chunked", steps=[Write(first), Stall()])
        return chat_reply(body, {"content": TEXT}, "stop")

    def tool_results_seen(self) -> list[list[str]]:
        """The tool results of every `tool` request that carried any."""
        return [found for body in self.tool.chat_requests if (found := tool_results(body))]

    def all_aborts_closed(self, timeout: float = WAIT) -> bool:
        """Whether the connection of every ``abort`` request closed (waited on, bounded)."""
        aborts = self.requests.get("abort", [])
        return bool(aborts) and all(r.disconnected.wait(timeout) for r in aborts)


@contextmanager
def case_proxy() -> Iterator[tuple[str, CaseUpstream]]:
    """The proxy over a `CaseUpstream`; yields its base URL and the upstream script."""
    script = CaseUpstream()
    with proxy_over(script) as (url, _):
        yield url, script


def run_cases(client: str, url: str, *, timeout: float = 90.0) -> dict[str, Any]:
    """Run tests/js/cases/<client>.mjs against the proxy at `url`; its report by case."""
    script = f"await import('./cases/{client}.mjs');"
    report: dict[str, Any] = node_json(script, {"PROXY_URL": url}, timeout=timeout)
    return report
