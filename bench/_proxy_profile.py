"""Where the proxy's time goes: its handler thread's CPU and cProfile, and each face's stage cost.

`profile_proxy` serves one fresh proxy per face behind `ProfiledApp` and reads
it with the face's raw reader; `stage_costs` times the faces' per-delta work
alone, in one thread with no I/O; `profile_rows` turns a cProfile into table rows.
"""

from __future__ import annotations

import cProfile
import json
import pstats
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from _proxy_paths import MODEL, WAIT, checked, face_readers
from _report import best_of, calls_for, own_time_by_package, profile_package, profile_where

__all__ = ["PROFILE_STREAMS", "ProfiledApp", "profile_proxy", "profile_rows", "stage_costs"]

PROFILE_STREAMS = 10


class ProfiledApp:
    """WSGI middleware: the handler thread's CPU time per request, and optionally a cProfile.

    cProfile and `time.thread_time` see only their own thread; the proxy serves
    each connection in its own thread, so both start there, at the app call,
    and stop when the server closes the body: they cover routing, the face's
    translation and the server writing every piece.
    """

    def __init__(self, app: Any) -> None:
        self.app = app
        self.profiler: cProfile.Profile | None = None
        self.cpu: list[float] = []
        self._lock = threading.Lock()

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Any:
        self._lock.acquire()  # one request at a time
        started = time.thread_time()
        if self.profiler is not None:
            self.profiler.enable()
        try:
            body = self.app(environ, start_response)
        except BaseException:
            self._done(started)
            raise
        return _Measured(self, body, started)

    def _done(self, started: float) -> None:
        if self.profiler is not None:
            self.profiler.disable()
        self.cpu.append(time.thread_time() - started)
        self._lock.release()


class _Measured:
    def __init__(self, owner: ProfiledApp, body: Any, started: float) -> None:
        self.owner, self.body, self.started = owner, body, started

    def __iter__(self) -> Iterator[bytes]:
        return iter(self.body)

    def close(self) -> None:
        try:
            close = getattr(self.body, "close", None)
            if close is not None:
                close()
        finally:
            self.owner._done(self.started)


def profile_proxy(upstream: str, expected: str, streams: int) -> dict[str, Any]:
    """Per face read by its raw reader: the handler thread's CPU time per stream (best of
    `streams`, unprofiled), then a cProfile of `PROFILE_STREAMS` more streams."""
    import requests

    import llmchat
    from llmchat.proxy import make_app, make_server

    out: dict[str, Any] = {}
    with llmchat.OpenAICommon(upstream, model=MODEL) as backend, requests.Session() as session:
        for face in ("raw ollama", "raw anthropic", "raw responses", "raw gemini", "raw relay"):
            app = ProfiledApp(make_app(backend))
            server = make_server(app, "127.0.0.1", 0)
            thread = threading.Thread(target=server.serve_forever, daemon=True)
            thread.start()
            try:
                read = checked(face, face_readers(session, server.url)[face], expected)
                read()  # warm-up
                app.cpu.clear()
                for _ in range(streams):
                    read()
                cpu = min(app.cpu)
                stats = None
                if face != "raw relay":
                    app.profiler = cProfile.Profile()
                    for _ in range(PROFILE_STREAMS):
                        read()
                    stats = pstats.Stats(app.profiler).stats  # type: ignore[attr-defined]
            finally:
                server.shutdown()
                server.server_close()
                thread.join(WAIT)
            out[face] = (cpu, stats)
    return out


def stage_costs() -> dict[str, float]:
    """The faces' per-delta work alone, one thread, no I/O: µs per call (best of 9)."""
    from llmchat import wire_json
    from llmchat.protocols.anthropic import AnthropicStream
    from llmchat.protocols.ollama import OllamaStream
    from llmchat.protocols.responses import ResponsesStream
    from llmchat.proxy.outbound import CleanStream
    from llmchat.redact import Redactor

    chunk = {
        "id": "chatcmpl-x",
        "model": MODEL,
        "choices": [{"index": 0, "delta": {"content": " the"}, "finish_reason": None}],
    }
    ollama_stream, anthropic_stream = OllamaStream(MODEL), AnthropicStream(MODEL)
    responses_stream = ResponsesStream({"model": MODEL})
    # What every streamed face now writes through: its input cleaned of the key and surrogates.
    clean = CleanStream(AnthropicStream(MODEL), Redactor.of(()))
    clean_key = CleanStream(AnthropicStream(MODEL), Redactor.of(["sk-proj/Zx9Qw+bench_7"]))
    for stream in (anthropic_stream, clean, clean_key):
        stream.start()
    responses_stream.start()
    line = {
        "model": MODEL,
        "created_at": ollama_stream._now(),
        "message": {"role": "assistant", "content": " the"},
        "done": False,
    }
    fns: dict[str, Callable[[], Any]] = {
        "ollama delta": lambda: ollama_stream.delta(chunk),
        "anthropic delta": lambda: anthropic_stream.delta(chunk),
        "clean delta": lambda: clean.delta(chunk),
        "clean key delta": lambda: clean_key.delta(chunk),
        "responses delta": lambda: responses_stream.delta(chunk),
        "now": ollama_stream._now,
        "wire_json": lambda: wire_json.encode_data(line),
        "json.dumps": lambda: json.dumps(line, separators=(",", ":"), ensure_ascii=False).encode(),
    }
    return {name: best_of(fn, 9, calls_for(fn)) * 1e6 for name, fn in fns.items()}


def profile_rows(stats: dict[Any, Any], per: float) -> tuple[list[list[str]], list[list[str]]]:
    """Own time by package, and the top 10 functions by own time; µs per delta."""
    total = sum(entry[2] for entry in stats.values())
    shown = own_time_by_package(
        stats, lambda f: profile_package(f, llmchat_subpackages=True), shown=8
    )
    packages = [[name, f"{own / per * 1e6:,.2f}", f"{own / total:.0%}"] for name, own in shown]
    ranked = sorted(stats.items(), key=lambda item: -item[1][2])[:10]
    functions = [
        [
            profile_where(*key),
            f"{entry[1] / per:,.2f}",
            f"{entry[2] / per * 1e6:,.2f}",
            f"{entry[3] / per * 1e6:,.2f}",
            f"{entry[2] / total:.0%}",
        ]
        for key, entry in ranked
    ]
    return packages, functions
