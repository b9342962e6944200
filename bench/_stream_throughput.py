"""bench_stream's throughput part out of process: the server's router and the child client.

`router(frames)` runs in `_stream_server.py`'s process: ``/events/…`` answers the
stream with every frame its own HTTP chunk (as real servers write), ``/bulk/…``
the same body in 64 KiB chunks. `llmchat_child(url, frames)` runs in a
`ChildContender`'s process (``LLMCHAT_JSON=stdlib`` there: llmchat with the
stdlib parser whatever any module bound at import).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

EVENTS = "/events"
"""The stream, one HTTP chunk per event."""
BULK = "/bulk"
"""The same body in 64 KiB chunks (hundreds of frames per read)."""


def router(frames: int) -> Callable[[Any], Any]:
    """The server's answers: the `frames`-delta stream, per event (`EVENTS`) or bulk (`BULK`)."""
    from bench_stream import WRITE_SIZE, deltas, stream_frames

    from llmchat.testing import Reply, Write

    every = stream_frames(deltas(frames))
    body = b"".join(every)
    headers = {"Content-Type": "text/event-stream"}
    per_event = Reply(200, headers, framing="chunked", steps=[Write(f) for f in every])
    pieces = [Write(body[i : i + WRITE_SIZE]) for i in range(0, len(body), WRITE_SIZE)]
    bulk = Reply(200, headers, framing="chunked", steps=pieces)

    def route(request: Any) -> Any:
        if request.path.startswith(EVENTS + "/"):
            return per_event
        if request.path.startswith(BULK + "/"):
            return bulk
        return Reply.error(404, f"no stream at {request.path}")

    return route


def llmchat_problem(response: Any, expected: str, frames: int) -> str | None:
    """What is wrong with an llmchat stream's Response, or None."""
    if not response.is_success:
        return f"llmchat failed: {response.err}"
    if response.msg != expected:
        return f"llmchat's text differs ({len(response.msg or '')} vs {len(expected)})"
    if response.completion_tokens != frames:
        return f"completion_tokens {response.completion_tokens} != {frames}"
    return None


def llmchat_child(url: str, frames: int) -> tuple[Callable[[], Any], Callable[[Any], str | None]]:
    """In a child process: llmchat streaming from `url`, every chunk iterated, and its check."""
    from bench_stream import MESSAGES, MODEL, deltas

    import llmchat

    backend = llmchat.OpenAICommon(url, model=MODEL)
    start = backend.chat_completion_stream
    expected = "".join(deltas(frames))

    def run() -> Any:
        response = start(MESSAGES)
        for _chunk in response:
            pass
        return response

    return run, lambda response: llmchat_problem(response, expected, frames)
