"""What the pipeline-bug tests share: wire shapes, backends that record their hooks, and
the one run and comparison every scenario uses.
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Iterator, Mapping
from typing import Any, Final

from llmchat import OpenAICommon
from llmchat.chunk import Chunk
from llmchat.response import Response
from llmchat.templates import ChatML
from llmchat.testing.script import dumps
from llmchat.transport import TransportResponse

from ..support.transport import WrappingTransport

HI: Final = [{"role": "user", "content": "Hi"}]
SETTLE_GUARD: Final = 10.0  # hang guards only: nothing here should take a fraction of it
SSE: Final = {"Content-Type": "text/event-stream"}
URLS: Final = ["https://a.example/1", "https://b.example/2"]


# -- wire shapes -------------------------------------------------------------------------


def chunk_event(
    delta: Mapping[str, Any] | None = None,
    finish: str | None = None,
    *,
    model: str | None = "m-1",
    **top: Any,
) -> dict[str, Any]:
    """One ``chat.completion.chunk`` event."""
    event: dict[str, Any] = {"id": "chatcmpl-b", "object": "chat.completion.chunk"}
    if model is not None:
        event["model"] = model
    event["choices"] = [{"index": 0, "delta": dict(delta or {}), "finish_reason": finish}]
    event.update(top)
    return event


def text_event(text: str = "", finish: str | None = None) -> dict[str, Any]:
    """One streamed ``text_completion`` event."""
    return {
        "id": "cmpl-b",
        "object": "text_completion",
        "model": "m-1",
        "choices": [{"index": 0, "text": text, "finish_reason": finish}],
    }


def usage_event(obj: str = "chat.completion.chunk") -> dict[str, Any]:
    """The ``choices: []`` usage event of ``stream_options.include_usage``."""
    return {
        "id": "chatcmpl-b",
        "object": obj,
        "model": "m-1",
        "choices": [],
        "usage": {
            "prompt_tokens": 9,
            "completion_tokens": 4,
            "total_tokens": 13,
            "prompt_tokens_details": {"cached_tokens": 2},
        },
    }


def chat_body(message: Mapping[str, Any], finish: str | None, **top: Any) -> dict[str, Any]:
    """A blocking ``chat.completion`` body."""
    return {
        "id": "chatcmpl-b",
        "object": "chat.completion",
        "model": "m-1",
        "choices": [{"index": 0, "message": dict(message), "finish_reason": finish}],
        "usage": usage_event()["usage"],
        **top,
    }


def text_body(text: str, finish: str | None) -> dict[str, Any]:
    """A blocking ``text_completion`` body."""
    return {
        "id": "cmpl-b",
        "object": "text_completion",
        "model": "m-1",
        "choices": [{"index": 0, "text": text, "finish_reason": finish}],
        "usage": usage_event()["usage"],
    }


CALL: Final = {
    "id": "call_1",
    "type": "function",
    "function": {"name": "get_weather", "arguments": '{"city":"Oslo"}'},
}
CALL_EVENTS: Final = [
    chunk_event({"role": "assistant", "content": ""}),
    chunk_event(
        {
            "tool_calls": [
                {
                    "index": 0,
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "get_weather"},
                }
            ]
        }
    ),
    chunk_event({"tool_calls": [{"index": 0, "function": {"arguments": '{"city":'}}]}),
    chunk_event({"tool_calls": [{"index": 0, "function": {"arguments": '"Oslo"}'}}]}),
]


def frames(events: list[dict[str, Any]], done: bool = True) -> bytes:
    """The SSE bytes of `events`, then ``[DONE]`` when `done`."""
    data = b"".join(f"data: {dumps(event)}\n\n".encode() for event in events)
    return data + (b"data: [DONE]\n\n" if done else b"")


# -- backends that record their hooks ----------------------------------------------------


class ReaderTrackingTransport(WrappingTransport):
    """The real transport, noting which thread iterates each response body."""

    def __init__(self) -> None:
        super().__init__()
        self.readers: list[threading.Thread] = []

    def wrap(self, body: TransportResponse) -> TransportResponse:
        return _TrackedBody(body, self.readers)

    def join_readers(self) -> bool:
        """Wait for every thread (but this one) that read a body to end; True if all did."""
        for thread in self.readers:
            if thread is not threading.current_thread():
                thread.join(SETTLE_GUARD)
        return not any(t.is_alive() for t in self.readers if t is not threading.current_thread())


class _TrackedBody(TransportResponse):
    def __init__(self, inner: TransportResponse, readers: list[threading.Thread]) -> None:
        self._inner = inner
        self._readers = readers
        self.status_code = inner.status_code
        self.headers = inner.headers

    def iter_bytes(self, limit: int | None = None) -> Iterator[bytes]:
        self._readers.append(threading.current_thread())
        return self._inner.iter_bytes(limit)

    def close(self) -> None:
        self._inner.close()


class Recording(OpenAICommon):
    """Records what every completion hook was handed; `eos` → `stop` when `map_eos`."""

    def __init__(self, url: str, *, map_eos: bool = False, **kwargs: Any) -> None:
        self.tracker = ReaderTrackingTransport()
        super().__init__(url, template=ChatML(), transport=self.tracker, **kwargs)
        self.map_eos = map_eos
        self.reconciled: list[str] = []
        self.completed: list[str] = []
        self.lifted: list[dict[str, Any]] = []

    def _reconcile_finish_reason(
        self, response: Response, reason: str, request: Mapping[str, Any]
    ) -> str:
        self.reconciled.append(reason)
        return "stop" if self.map_eos and reason == "eos" else reason

    def _on_blocking_complete(self, response: Response) -> None:
        self.completed.append("blocking")

    def _on_stream_complete(self, response: Response) -> None:
        self.completed.append("stream")

    def _lift_usage(self, response: Response, payload: Mapping[str, Any]) -> None:
        self.lifted.append(copy.deepcopy(dict(payload)))
        super()._lift_usage(response, payload)


def run(backend: OpenAICommon, path: str) -> Response:
    """Run one completion on `path` (``chat|text`` ``blocking|stream``) and wait for it."""
    kind, mode = path.split()
    if kind == "chat":
        call = backend.chat_completion_stream if mode == "stream" else backend.chat_completion
        response = call(HI)
    else:
        text = backend.text_completion_stream if mode == "stream" else backend.text_completion
        response = text(HI)
    assert response.wait(SETTLE_GUARD).is_done, f"{path}: never settled"
    return response


def final_chunk(response: Response) -> Chunk | None:
    """The chunk that carries the finish reason (`is_final`); None if there is none."""
    finals = [chunk for chunk in response if chunk.is_final]
    assert len(finals) <= 1, f"{len(finals)} final chunks"
    return finals[0] if finals else None


def mismatch(observed: Mapping[str, Any], expected: Mapping[str, Any]) -> str:
    """Every path/scenario whose fields differ: ``key.field: got ..., want ...`` lines."""
    lines = []
    for key in sorted(set(observed) | set(expected)):
        got, want = observed.get(key), expected.get(key)
        if got == want:
            continue
        if isinstance(got, Mapping) and isinstance(want, Mapping):
            for name in [*want, *(n for n in got if n not in want)]:
                if got.get(name) != want.get(name):
                    lines.append(f"{key}.{name}: got {got.get(name)!r}, want {want.get(name)!r}")
        else:
            lines.append(f"{key}: got {got!r}, want {want!r}")
    return "\n".join(lines)
