"""A stream that only pings: keep-alive comments do not outlast the read timeout.

llama-server writes ``:`` comments every ``sse_ping_interval`` (30 s) while a
stream waits for its next token; after a SIGTERM it waits for ever, so the
pings keep every socket read short and the read timeout never fires. The
`headers` timeout bounds a stream's answer-less time too: over loopback, a
stream that sends a token and then pings forever ends as a ``timeout`` with
the partial text kept, and the server sees the connection closed.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from llmchat import OpenAICommon, Settings
from llmchat.testing import Pings, Reply, ScriptedServer, Write

HI = [{"role": "user", "content": "Hi"}]
WAIT = 10.0


def frame(delta: Mapping[str, Any], finish: str | None = None) -> bytes:
    event = {
        "id": "c1",
        "model": "m",
        "choices": [{"index": 0, "delta": dict(delta), "finish_reason": finish}],
    }
    return f"data: {json.dumps(event)}\n\n".encode()


def sse(*steps: Any) -> Reply:
    return Reply(
        steps=list(steps), framing="chunked", headers={"Content-Type": "text/event-stream"}
    )


def test_a_stream_that_only_pings_past_the_read_timeout_is_a_timeout(
    server: ScriptedServer,
) -> None:
    server.push(sse(Write(frame({"role": "assistant", "content": "Hel"})), Pings(0.05)))
    backend = OpenAICommon(server.url, model="m", headers_timeout=0.3)
    response = backend.chat_completion_stream(HI, settings=Settings(max_tokens=9))
    assert response.wait(WAIT).is_done  # it ends: before, the pings kept it open for ever
    texts = [chunk.content for chunk in response]
    assert response.error_class == "timeout"
    assert "keep-alive comments only" in (response.err or "")
    assert response.msg == "Hel" and "Hel" in texts  # nothing is lost
    assert server.requests[0].disconnected.wait(WAIT)  # the connection was closed
    assert len(server.requests[0].writes) >= 3  # it really pinged, more than once


def test_pings_between_tokens_within_the_limit_are_harmless(server: ScriptedServer) -> None:
    """Comments are relayed activity, not an answer, and not a failure either."""
    server.push(
        sse(
            Write(frame({"role": "assistant", "content": "Hel"})),
            Write(b":\n\n"),
            Write(b": ping\n\n"),
            Write(frame({"content": "lo"})),
            Write(frame({}, "stop")),
            Write(b"data: [DONE]\n\n"),
        )
    )
    backend = OpenAICommon(server.url, model="m", headers_timeout=30)
    response = backend.chat_completion_stream(HI, settings=Settings(max_tokens=9))
    assert response.wait(WAIT).is_success and response.msg == "Hello"
