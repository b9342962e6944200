"""However a server's writes cut the stream into reads, the Response is the same.

Over a real socket (the loopback server): one HTTP chunk per frame (each read
one frame, the common case the per-read path is built for), the whole body
in one chunk (every frame in one read: one batch), and chunks cut inside
frames (a frame split across reads). The Response, its chunks and its
usage, model and tool calls must not depend on the cut, nor on who reads
(an iterating consumer or the reader thread alone).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from llmchat import OpenAICommon, Response
from llmchat.testing import Reply, ScriptedServer, Write

from .streaming_support import HI, call_fragment, delta, usage_event

SSE = {"Content-Type": "text/event-stream"}


def frame(event: dict[str, Any] | str) -> bytes:
    return f"data: {event if isinstance(event, str) else json.dumps(event)}\n\n".encode()


FRAMES = [
    frame(delta(role="assistant", content=None)),
    *[frame(delta(text)) for text in ("Hel", "lo", " wor", "ld", " — ", "ok")],
    b": keep-alive\n\n",
    frame(delta(tool_calls=[call_fragment(0, id="t1", name="f", arguments='{"a"')])),
    frame(delta(tool_calls=[call_fragment(0, arguments=": 1}")])),
    frame(delta(finish="tool_calls")),
    frame(usage_event(prompt=5, completion=9, cached=2)),
    frame("[DONE]"),
]
BODY = b"".join(FRAMES)


def cuts(name: str) -> list[bytes]:
    if name == "one-frame-a-read":
        return FRAMES
    if name == "all-in-one-read":
        return [BODY]
    return [BODY[i : i + 7] for i in range(0, len(BODY), 7)]  # frames split anywhere


def outcome(response: Response, chunks: list[Any]) -> dict[str, Any]:
    return {
        "ok": (response.is_success, response.err, response.finish_reason),
        "text": response.msg,
        "chunks": [(c.content, c.finish_reason, c.tool_calls, c.usage) for c in chunks],
        "calls": [(c.id, c.name, c.arguments) for c in response.tool_calls],
        "usage": (response.prompt_tokens, response.completion_tokens, response.cached_tokens),
        "model": (response.model, response.id, response.dropped_frames),
    }


def run(server: ScriptedServer, writes: list[bytes], *, iterate: bool) -> dict[str, Any]:
    server.push(Reply(200, SSE, framing="chunked", steps=[Write(w) for w in writes]))
    response = OpenAICommon(server.url).chat_completion_stream(HI)
    chunks = list(response) if iterate else []
    assert response.wait(10).is_done, "the stream never settled"
    return outcome(response, chunks or list(response))


@pytest.mark.parametrize("iterate", [True, False], ids=["iterated", "waited"])
@pytest.mark.parametrize("cut", ["all-in-one-read", "split-inside-frames"])
def test_the_response_does_not_depend_on_how_reads_cut_the_body(
    server: ScriptedServer, cut: str, iterate: bool
) -> None:
    expected = run(server, cuts("one-frame-a-read"), iterate=True)
    assert expected["text"] == "Hello world — ok"
    assert expected["calls"] == [("t1", "f", {"a": 1})]
    assert expected["usage"] == (5, 9, 2)
    assert expected["model"] == ("m", "chatcmpl-s", 0)
    assert run(server, cuts(cut), iterate=iterate) == expected
