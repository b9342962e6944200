"""`StreamBody` writes a burst of upstream deltas as one piece (`Response.iter_batches`).

Through the real proxy on loopback, the Ollama and Responses faces: the
upstream sends one delta, waits until the client saw it, then sends many
deltas in one write. The client gets every delta, in order, and the proxy's
writes to the client socket are far fewer than the deltas (one per batch it
took, not one per token). Counted writes, no clocks.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import requests

from llmchat.proxy.server import deadlines
from llmchat.testing import Reply, WaitFor, Write

from ..backends.streaming_support import delta, usage_event
from ..support.proxy import proxy_over

WAIT = 10.0
BURST = 60
TEXTS = ["first"] + [f" w{i}" for i in range(BURST)]


def _frame(event: dict[str, Any]) -> bytes:
    return f"data: {json.dumps(event)}\n\n".encode()


def _upstream(gate: threading.Event) -> Reply:
    burst = b"".join(_frame(delta(t)) for t in TEXTS[1:])
    burst += _frame(delta(finish="stop")) + _frame(usage_event(7, len(TEXTS))) + b"data: [DONE]\n\n"
    steps = [Write(_frame(delta(TEXTS[0]))), WaitFor(gate, timeout=WAIT), Write(burst)]
    return Reply(headers={"Content-Type": "text/event-stream"}, framing="chunked", steps=steps)


def _ollama_text(line: bytes) -> str:
    return str(json.loads(line)["message"].get("content", ""))


def _responses_text(line: bytes) -> str:
    if not line.startswith(b"data: "):
        return ""
    event = json.loads(line[6:])
    return str(event["delta"]) if event.get("type") == "response.output_text.delta" else ""


FACES: dict[str, tuple[str, dict[str, Any], Callable[[bytes], str]]] = {
    "ollama": (
        "/api/chat",
        {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True},
        _ollama_text,
    ),
    "responses": ("/v1/responses", {"model": "m", "input": "hi", "stream": True}, _responses_text),
}


@pytest.fixture
def writes(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """How many writes the proxy made to client sockets (reset by the test)."""
    count = [0]
    write = deadlines.StallWriter.write

    def counted(self: deadlines.StallWriter, data: Any) -> int:
        count[0] += 1
        return write(self, data)

    monkeypatch.setattr(deadlines.StallWriter, "write", counted)
    yield count


@pytest.mark.parametrize("face", sorted(FACES))
def test_a_burst_of_deltas_is_written_in_few_pieces(face: str, writes: list[int]) -> None:
    path, body, text_of = FACES[face]
    gate = threading.Event()
    got: list[str] = []
    with proxy_over([_upstream(gate)]) as (url, _upstream_server):
        with requests.post(url + path, json=body, stream=True, timeout=WAIT) as r:
            assert r.status_code == 200
            lines = r.iter_lines()
            for line in lines:
                if text_of(line):
                    got.append(text_of(line))
                    break
            writes[0] = 0  # what follows is the burst, and the ending
            gate.set()
            got += [text for text in map(text_of, lines) if text]
    assert got == TEXTS
    # One write per delta would be BURST writes or more; by batches it is a handful.
    assert writes[0] < BURST // 4, writes[0]
