"""What the translating proxy costs: its three faces against the same clients going direct.

One `llmchat.testing.ScriptedServer` is the upstream. It replays a fixed OpenAI
stream (the llama.cpp-shaped frames of `bench_stream`: a role frame, 1,000
token-sized content deltas, the finish chunk, a usage event and ``[DONE]``,
built once and sent in 64 KiB writes) for the long prompt, and answers the short
prompt with `ChatResponder("ok")` (a blocking ``chat.completion``, or a
one-delta stream when the proxy asks for one: the proxy always streams from its
upstream). `llmchat.proxy` serves `make_app(OpenAICommon(upstream))` on
loopback with its own `make_server`, in a thread of the same interpreter.

1. Streaming, seconds per 1,000-delta stream: the raw floor (`requests` on the
   upstream's SSE), `openai`, `litellm` and llmchat direct to the upstream;
   through the proxy the real `ollama` client (Ollama face), the `anthropic`
   SDK (Anthropic face, `messages.stream` + `text_stream`) and `openai`
   (the OpenAI relay face); plus raw readers of each face, which isolate the
   proxy's own cost from its clients'.
2. A short blocking request, ms per request, for the same paths (no litellm).

Every path's text is checked on every call (equal to the expected text); all
rows of one table are timed in the same interleaved rounds.

    python bench/bench_proxy.py [--rounds N] [--short-rounds M] [--no-write]
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import json
import pstats
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from _report import (
    BENCHMARKS_MD,
    NOT_INSTALLED,
    best_of,
    best_of_interleaved,
    blocked,
    calls_for,
    close_litellm,
    litellm_stream,
    loopback_only,
    own_time_by_package,
    package_versions,
    profile_package,
    profile_where,
    stamp,
    table,
    write_section,
)
from bench_stream import deltas, raw_content, raw_frames, stream_frames

SECTION = "Translating proxy: what each face costs"

MODEL = "loopback"
SYSTEM = "You are a terse assistant."
LONG_PROMPT = "Tell me a long story."
SHORT_PROMPT = "Say ok."
SHORT_TEXT = "ok"
DELTAS = 1_000
WRITE_SIZE = 65_536
MAX_TOKENS = 4_096
"""Anthropic requires `max_tokens`; every client sends it, above the stream's length."""
WAIT = 10.0
PROFILE_STREAMS = 10


def messages(prompt: str) -> list[dict[str, Any]]:
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": prompt}]


# -- the upstream -----------------------------------------------------------------


def upstream_script(long_reply: Any) -> Callable[[Any], Any]:
    """The ScriptedServer's responder: the long stream for the long prompt, else "ok"."""
    from llmchat.testing import ChatResponder

    short = ChatResponder(SHORT_TEXT, model=MODEL)
    marker = LONG_PROMPT.encode()

    def respond(request: Any) -> Any:
        return long_reply if marker in request.body else short(request)

    return respond


# -- raw readers ------------------------------------------------------------------


def ndjson_lines(response: Any) -> Iterator[bytes]:
    """Split an NDJSON body (the Ollama face) into lines, `read1` at a time."""
    read1 = response.raw.read1
    rest = b""
    while True:
        data = read1(WRITE_SIZE)
        if not data:
            if rest.strip():
                yield rest
            return
        *lines, rest = (rest + data).split(b"\n")
        yield from lines


def sse_payloads(response: Any) -> Iterator[tuple[bytes, bytes]]:
    """Split an SSE body into `(event name, data payload)` frames, `read1` at a time."""
    read1 = response.raw.read1
    rest = b""
    while True:
        data = read1(WRITE_SIZE)
        if not data:
            return
        *frames, rest = (rest + data).split(b"\n\n")
        for frame in frames:
            name, payload = b"", b""
            for line in frame.split(b"\n"):
                if line.startswith(b"event: "):
                    name = line[7:]
                elif line.startswith(b"data: "):
                    payload = line[6:]
            yield name, payload


def face_readers(session: Any, proxy: str) -> dict[str, Callable[[], str]]:
    """Minimal `requests` readers of the proxy's three faces, for the long prompt."""
    headers = {"Content-Type": "application/json"}
    long_messages = messages(LONG_PROMPT)
    long_body = json.dumps(
        {
            "model": MODEL,
            "messages": long_messages,
            "max_tokens": MAX_TOKENS,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
    ).encode()
    ollama_url, anthropic_url = proxy + "/api/chat", proxy + "/v1/messages"
    relay_url = proxy + "/v1/chat/completions"
    ollama_body = json.dumps({"model": MODEL, "messages": long_messages, "stream": True}).encode()
    anthropic_body = json.dumps(
        {
            "model": MODEL,
            "max_tokens": MAX_TOKENS,
            "system": SYSTEM,
            "messages": [{"role": "user", "content": LONG_PROMPT}],
            "stream": True,
        }
    ).encode()

    def raw_ollama() -> str:
        with session.post(ollama_url, data=ollama_body, headers=headers, stream=True) as r:
            texts = [json.loads(line)["message"]["content"] for line in ndjson_lines(r)]
        return "".join(texts)

    def raw_anthropic() -> str:
        texts = []
        with session.post(anthropic_url, data=anthropic_body, headers=headers, stream=True) as r:
            for name, payload in sse_payloads(r):
                if name == b"content_block_delta":
                    delta = json.loads(payload)["delta"]
                    if delta.get("type") == "text_delta":
                        texts.append(delta["text"])
        return "".join(texts)

    def raw_relay() -> str:
        with session.post(relay_url, data=long_body, headers=headers, stream=True) as r:
            texts = [raw_content(payload) for payload in raw_frames(r)]
        return "".join(text for text in texts if text)

    return {"raw ollama": raw_ollama, "raw anthropic": raw_anthropic, "raw relay": raw_relay}


# -- the contenders ---------------------------------------------------------------


class Contenders:
    """Every client, built once; `stream[name]()` and `short[name]()` return the text read."""

    def __init__(self, upstream: str, proxy: str, versions: dict[str, str]) -> None:
        import requests

        import llmchat

        self.stream: dict[str, Callable[[], str]] = {}
        self.short: dict[str, Callable[[], str]] = {}
        self.notes: dict[str, str] = {}
        self._closers: list[Callable[[], Any]] = []
        long_messages, short_messages = messages(LONG_PROMPT), messages(SHORT_PROMPT)

        # -- direct to the upstream ---------------------------------------------
        session = requests.Session()
        self._closers.append(session.close)
        headers = {"Content-Type": "application/json"}
        chat_url = upstream + "/chat/completions"
        long_body = json.dumps(
            {
                "model": MODEL,
                "messages": long_messages,
                "max_tokens": MAX_TOKENS,
                "stream": True,
                "stream_options": {"include_usage": True},
            }
        ).encode()
        short_body = {"model": MODEL, "messages": short_messages, "max_tokens": MAX_TOKENS}

        def raw() -> str:
            with session.post(chat_url, data=long_body, headers=headers, stream=True) as r:
                texts = [raw_content(payload) for payload in raw_frames(r)]
            return "".join(text for text in texts if text)

        def raw_short() -> str:
            r = session.post(chat_url, data=json.dumps(short_body).encode(), headers=headers)
            return json.loads(r.content)["choices"][0]["message"]["content"]

        self.stream["raw"], self.short["raw"] = raw, raw_short

        backend = llmchat.OpenAICommon(upstream, model=MODEL)
        self._closers.append(backend.close)
        settings = llmchat.Settings(max_tokens=MAX_TOKENS)

        def mine() -> str:
            response = backend.chat_completion_stream(long_messages, settings=settings)
            texts = [chunk.content for chunk in response if chunk.content]
            assert response.is_success, response.err
            return "".join(texts)

        def mine_short() -> str:
            return backend.chat_completion(short_messages, settings=settings).msg

        self.stream["llmchat"], self.short["llmchat"] = mine, mine_short

        try:
            import openai
        except ImportError:
            self.notes["openai"] = self.notes["openai relay"] = NOT_INSTALLED
        else:
            for name, base in (("openai", upstream), ("openai relay", proxy + "/v1")):
                client = openai.OpenAI(base_url=base, api_key="x", max_retries=0, timeout=WAIT)
                self._closers.append(client.close)
                self.stream[name], self.short[name] = self._openai(client.chat.completions.create)

        lite = litellm_stream(upstream, MODEL, long_messages, max_tokens=MAX_TOKENS)
        if lite is None:
            self.notes["litellm"] = NOT_INSTALLED
        else:
            self.stream["litellm"] = lite
            self._closers.append(close_litellm)

        # -- through the proxy ----------------------------------------------------
        try:
            import ollama
        except ImportError:
            self.notes["ollama"] = NOT_INSTALLED
        else:
            client = ollama.Client(host=proxy, timeout=WAIT)
            with contextlib.suppress(Exception):
                self._closers.append(client._client.close)  # its httpx.Client (private)

            def olla() -> str:
                parts = client.chat(model=MODEL, messages=long_messages, stream=True)
                return "".join(part.message.content or "" for part in parts)

            def olla_short() -> str:
                answer = client.chat(model=MODEL, messages=short_messages, stream=False)
                return answer.message.content or ""

            self.stream["ollama"], self.short["ollama"] = olla, olla_short

        try:
            import anthropic
        except ImportError:
            self.notes["anthropic"] = NOT_INSTALLED
        else:
            claude = anthropic.Anthropic(base_url=proxy, api_key="x", max_retries=0, timeout=WAIT)
            self._closers.append(claude.close)
            turn = [{"role": "user", "content": LONG_PROMPT}]
            short_turn = [{"role": "user", "content": SHORT_PROMPT}]

            def anth() -> str:
                with claude.messages.stream(
                    model=MODEL,
                    max_tokens=MAX_TOKENS,
                    system=SYSTEM,
                    messages=turn,  # type: ignore[arg-type]
                ) as stream:
                    return "".join(stream.text_stream)

            def anth_short() -> str:
                message = claude.messages.create(
                    model=MODEL,
                    max_tokens=MAX_TOKENS,
                    system=SYSTEM,
                    messages=short_turn,  # type: ignore[arg-type]
                )
                return "".join(block.text for block in message.content if block.type == "text")

            self.stream["anthropic"], self.short["anthropic"] = anth, anth_short

        # -- raw readers of the proxy's faces (diagnostics) -----------------------
        self.stream.update(face_readers(session, proxy))

    @staticmethod
    def _openai(create: Callable[..., Any]) -> tuple[Callable[[], str], Callable[[], str]]:
        long_messages, short_messages = messages(LONG_PROMPT), messages(SHORT_PROMPT)

        def sdk() -> str:
            texts = []
            for chunk in create(
                model=MODEL,
                messages=long_messages,
                max_tokens=MAX_TOKENS,
                stream=True,
                stream_options={"include_usage": True},
            ):
                if chunk.choices and chunk.choices[0].delta.content:
                    texts.append(chunk.choices[0].delta.content)
            return "".join(texts)

        def sdk_short() -> str:
            answer = create(model=MODEL, messages=short_messages, max_tokens=MAX_TOKENS)
            return answer.choices[0].message.content or ""

        return sdk, sdk_short

    def close(self) -> None:
        for close in reversed(self._closers):
            with contextlib.suppress(Exception):
                close()


def checked(name: str, fn: Callable[[], str], expected: str) -> Callable[[], None]:
    """`fn`, failing loudly whenever the text it read is not `expected` (a string compare)."""

    def call() -> None:
        text = fn()
        if text != expected:
            raise AssertionError(
                f"{name} read {len(text)} characters, not the expected {len(expected)}: "
                f"{text[:60]!r}..."
            )

    return call


def _litellm_idle() -> None:
    """Untimed, never reported: wait out litellm's per-chunk logging backlog (see bench_stream)."""
    try:
        from litellm.litellm_core_utils.thread_pool_executor import executor

        deadline = time.monotonic() + WAIT
        while time.monotonic() < deadline:
            slots = executor._pending_slots._value  # type: ignore[attr-defined]
            if int(executor._max_pending_tasks) - int(slots) == 0:  # type: ignore[attr-defined]
                return
            time.sleep(0.0005)
    except Exception:
        time.sleep(0.05)


DRAIN = "(litellm logging backlog)"


# -- the proxy, profiled ----------------------------------------------------------


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
        for face in ("raw ollama", "raw anthropic", "raw relay"):
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

    chunk = {
        "id": "chatcmpl-x",
        "model": MODEL,
        "choices": [{"index": 0, "delta": {"content": " the"}, "finish_reason": None}],
    }
    ollama_stream, anthropic_stream = OllamaStream(MODEL), AnthropicStream(MODEL)
    anthropic_stream.start()
    line = {
        "model": MODEL,
        "created_at": ollama_stream._now(),
        "message": {"role": "assistant", "content": " the"},
        "done": False,
    }
    fns: dict[str, Callable[[], Any]] = {
        "ollama delta": lambda: ollama_stream.delta(chunk),
        "anthropic delta": lambda: anthropic_stream.delta(chunk),
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


# -- the run ----------------------------------------------------------------------

STREAM_LABELS = {
    "raw": "raw floor: `requests` on the upstream SSE, `read1` + split + `json.loads`",
    "openai": "openai {openai} direct: `chat.completions.create(stream=True)`",
    "litellm": 'litellm {litellm} direct: `completion(model="openai/…", stream=True)`',
    "llmchat": "llmchat direct: `chat_completion_stream`, iterate",
    "ollama": "proxy, Ollama face: ollama {ollama} `Client.chat(stream=True)`",
    "anthropic": "proxy, Anthropic face: anthropic {anthropic} `messages.stream` `text_stream`",
    "openai relay": "proxy, OpenAI relay: openai {openai} `create(stream=True)`",
    "raw ollama": "diagnostic: raw reader of the Ollama face (split lines, `json.loads`)",
    "raw anthropic": "diagnostic: raw reader of the Anthropic face (split frames, `json.loads`)",
    "raw relay": "diagnostic: raw reader of the relay face (same parse as the floor)",
}
SHORT_LABELS = {
    "raw": "raw floor: `requests.Session().post` + `json.loads`",
    "openai": "openai {openai} direct: `chat.completions.create(...)`",
    "llmchat": "llmchat direct: `backend.chat_completion(...)`",
    "ollama": "proxy, Ollama face: ollama {ollama} `Client.chat(stream=False)`",
    "anthropic": "proxy, Anthropic face: anthropic {anthropic} `messages.create(...)`",
    "openai relay": "proxy, OpenAI relay: openai {openai} `create(...)`",
}
DIRECT_OF = {"openai relay": "openai", "raw relay": "raw"}
"""The same client going direct, for the faces that have one."""


def main(argv: list[str] | None = None) -> int:
    """Time every path in interleaved rounds against one upstream and one proxy; record."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=9, help="streaming rounds (best of)")
    parser.add_argument("--short-rounds", type=int, default=20, help="short-request rounds")
    parser.add_argument("--short-calls", type=int, default=10, help="short requests per round")
    parser.add_argument(
        "--cpu-streams", type=int, default=7, help="streams per face for the handler's CPU"
    )
    parser.add_argument("--no-write", action="store_true", help="do not update BENCHMARKS.md")
    args = parser.parse_args(argv)
    began = time.perf_counter()

    import llmchat
    from llmchat.proxy import make_app, make_server
    from llmchat.testing import Reply, ScriptedServer, Write

    versions = package_versions("openai", "litellm", "ollama", "anthropic")

    texts = deltas(DELTAS)
    expected = "".join(texts)
    body = b"".join(stream_frames(texts))
    writes = [Write(body[i : i + WRITE_SIZE]) for i in range(0, len(body), WRITE_SIZE)]
    long_reply = Reply(200, {"Content-Type": "text/event-stream"}, framing="chunked", steps=writes)

    server = ScriptedServer(upstream_script(long_reply))
    with loopback_only(), server as upstream:
        proxy_backend = llmchat.OpenAICommon(upstream, model=MODEL)
        proxy = make_server(make_app(proxy_backend), "127.0.0.1", 0)
        proxy_thread = threading.Thread(target=proxy.serve_forever, name="bench-proxy", daemon=True)
        proxy_thread.start()
        contenders = Contenders(upstream, proxy.url, versions)
        try:
            # -- checks, then 1. streaming -------------------------------------------
            stream_fns = {n: checked(n, fn, expected) for n, fn in contenders.stream.items()}
            short_fns = {n: checked(n, fn, SHORT_TEXT) for n, fn in contenders.short.items()}
            for name, fn in {**stream_fns, **short_fns}.items():
                fn()  # fails loudly on a wrong text, before anything is timed
                if name == "litellm":
                    _litellm_idle()
            print(f"checked {len(stream_fns)} streaming and {len(short_fns)} short paths")
            timed: dict[str, Callable[[], Any]] = dict(stream_fns)
            if "litellm" in timed:
                timed[DRAIN] = _litellm_idle
            seconds = best_of_interleaved(timed, args.rounds, 1)
            for name in STREAM_LABELS:
                if name in seconds:
                    print(f"  {name:<14} {seconds[name] * 1e3:8.2f} ms / stream")

            # -- 2. short blocking requests ----------------------------------------
            before_requests = len(server.requests)
            short = best_of_interleaved(short_fns, args.short_rounds, args.short_calls)
            upstream_posts = len(server.requests) - before_requests
            for name in SHORT_LABELS:
                if name in short:
                    print(f"  {name:<14} {short[name] * 1e3:8.3f} ms / request")
        finally:
            contenders.close()
            proxy.shutdown()
            proxy.server_close()
            proxy_thread.join(WAIT)
            proxy_backend.close()

        # -- where the proxy's time goes ----------------------------------------------
        profiles = profile_proxy(upstream, expected, args.cpu_streams)
    stages = stage_costs()
    assert not blocked, f"network access attempted: {blocked}"
    elapsed = time.perf_counter() - began
    print(f"total {elapsed:.0f} s")

    # -- the tables -------------------------------------------------------------------
    floor, mine = seconds["raw"], seconds["llmchat"]

    def stream_row(name: str) -> list[str]:
        label = STREAM_LABELS[name].format(**versions)
        if name not in seconds:
            return [f"{label}: {contenders.notes.get(name, NOT_INSTALLED)}", *["—"] * 5]
        s = seconds[name]
        direct = DIRECT_OF.get(name)
        added = (
            f"{(s - seconds[direct]) / DELTAS * 1e6:+,.1f}"
            if direct in seconds
            else f"({(s - mine) / DELTAS * 1e6:+,.1f})"
            if name in ("ollama", "anthropic", "raw ollama", "raw anthropic")
            else ""
        )
        return [
            label,
            f"{s * 1e3:,.2f}",
            f"{DELTAS / s:,.0f}",
            f"{s / floor:.2f}x",
            f"{(s - floor) / DELTAS * 1e6:+,.1f}",
            added,
        ]

    stream_header = [
        "path",
        "ms / stream",
        "deltas / s",
        "x raw floor",
        "µs / delta vs floor",
        "µs / delta vs same client direct",
    ]
    stream_rows = [stream_row(name) for name in STREAM_LABELS]

    short_floor = short["raw"]
    short_rows = []
    for name, label in SHORT_LABELS.items():
        label = label.format(**versions)
        if name not in short:
            short_rows.append([f"{label}: {contenders.notes.get(name, NOT_INSTALLED)}", "—"])
            continue
        s = short[name]
        direct = DIRECT_OF.get(name)
        short_rows.append(
            [
                label,
                f"{s * 1e3:,.3f}",
                f"{1 / s:,.0f}",
                f"{s / short_floor:.2f}x",
                f"{(s - short[direct]) * 1e6:+,.0f}" if direct in short else "",
            ]
        )
    short_header = ["path", "ms / request", "requests / s", "x raw floor", "µs vs same direct"]

    cpu_rows = []
    for face, title in (
        ("raw ollama", "Ollama face (`/api/chat`, NDJSON)"),
        ("raw anthropic", "Anthropic face (`/v1/messages`, SSE)"),
        ("raw relay", "OpenAI relay (`/v1/chat/completions`, bytes passed through)"),
    ):
        cpu = profiles[face][0]
        cpu_rows.append([title, f"{cpu / DELTAS * 1e6:,.1f}", f"{cpu / floor:.2f}x"])
        print(f"handler thread CPU, {face}: {cpu / DELTAS * 1e6:.1f} µs / delta")
    stage_rows = [
        [label, f"{stages[name]:,.1f}"]
        for name, label in (
            ("ollama delta", "`OllamaStream.delta(chunk)`: one content delta to one NDJSON line"),
            ("anthropic delta", "`AnthropicStream.delta(chunk)`: one `text_delta` event"),
            ("now", "of which for Ollama: `OllamaStream._now()` (`created_at`)"),
            ("wire_json", "`wire_json.encode_data(line)` of one Ollama line"),
            ("json.dumps", "for comparison: `json.dumps(line, ...).encode()` of the same line"),
        )
    ]
    for cells in stage_rows:
        print(f"  {cells[0]}: {cells[1]} µs")
    profile_md: list[str] = []
    for face, title in (("raw ollama", "Ollama face"), ("raw anthropic", "Anthropic face")):
        stats = profiles[face][1]
        packages, functions = profile_rows(stats, PROFILE_STREAMS * DELTAS)
        print(f"profile of the proxy thread, {face}:")
        for cells in packages:
            print(f"    {cells[0]:<40} {cells[1]:>8} µs {cells[2]:>5}")
        for cells in functions:
            print(f"    {cells[0]:<70} {cells[1]:>6} {cells[2]:>8} {cells[3]:>8} {cells[4]:>5}")
        profile_md += [
            "",
            f"{title}, {PROFILE_STREAMS} streams read by the raw reader: own time by package, "
            "then the top 10 functions by own time (µs per delta under the profiler):",
            "",
            table(["own time in", "µs / delta", "share"], packages),
            "",
            table(
                ["function", "calls / delta", "own µs", "cumulative µs", "share"],
                functions,
                align="lrrrr",
            ),
        ]

    def per_delta(name: str, base: str) -> float:
        return (seconds[name] - seconds[base]) / DELTAS * 1e6

    facts = []
    for name, title in (("raw ollama", "Ollama"), ("raw anthropic", "Anthropic")):
        if name in seconds:
            facts.append(f"{title} face {per_delta(name, 'raw'):+,.1f} µs")
    facts.append(f"OpenAI relay {per_delta('raw relay', 'raw'):+,.1f} µs")

    markdown = [
        stamp(),
        "",
        "The upstream is `llmchat.testing.ScriptedServer`. For the long prompt it replays "
        f"a fixed llama.cpp-shaped stream: a role frame, {DELTAS:,} "
        f"`chat.completion.chunk` frames each carrying a token-sized content delta "
        f"({len(expected):,} characters in all, a few non-ASCII), the finish chunk, a usage "
        f"event and `[DONE]` ({len(body):,} bytes, built once by `bench_stream`'s helpers "
        f"and sent in {len(writes)} chunked writes of 64 KiB). For the short prompt it "
        'answers `ChatResponder("ok")`: a `chat.completion`, or a one-delta stream when '
        "asked for one (the proxy always streams from its upstream, even for a blocking "
        "client). The proxy is `make_app(OpenAICommon(upstream))` on `make_server(app, "
        '"127.0.0.1", 0)` in a thread; upstream, proxy and clients share one interpreter, '
        "so every row includes the servers' work too. Each client is built once and "
        "reused. Every call checks that the text read equals the expected text (a string "
        "compare), so every timed path is known to deliver the whole answer.",
        "",
        "### Streaming a 1,000-delta answer",
        "",
        f"Best of {args.rounds} interleaved rounds of one stream per path. The Ollama "
        "and Anthropic clients have no direct counterpart (they speak only their own "
        "protocol), so their added cost is given against the raw floor and, in "
        "parentheses, against llmchat direct (the proxy's own upstream client); the relay "
        "row is compared with the same openai SDK going direct, a like-for-like figure. "
        "The diagnostic rows read each face with a minimal `requests` reader: against the "
        "floor they show what the proxy itself adds, without its clients' parsing.",
        "",
        table(stream_header, stream_rows),
        "",
        "**The proxy's own cost per delta** (a raw reader of the face minus the raw floor "
        f"on the upstream): {', '.join(facts)}. A face row minus its diagnostic row is "
        "what that client library spends parsing the face.",
        "",
        "### One short blocking request",
        "",
        f"Best of {args.short_rounds} interleaved rounds of {args.short_calls} requests per "
        'path; the answer is "ok". Direct paths get a `chat.completion`; the Ollama and '
        "Anthropic faces turn a blocking request into a one-delta upstream stream, wait "
        "for its end and answer one JSON body; the relay forwards the blocking request "
        "and its body as bytes. "
        f"({upstream_posts:,} upstream requests in the timed rounds.)",
        "",
        table(short_header, short_rows),
        "",
        "The proxy's `make_server` speaks HTTP/1.1 with keep-alive (a thread per "
        "connection, not per request): a client that pools, as all of these do, pays "
        "its TCP connect and handler thread once. Behind the proxy, the upstream "
        "connection is llmchat's pooled keep-alive one.",
        "",
        "### Where the proxy's time goes",
        "",
        "The proxy's handler thread, its CPU time alone (`time.thread_time()` from the app "
        "call to the body's `close()`, measured by a WSGI middleware in the thread that "
        f"serves the request; best of {args.cpu_streams} streams per face, read by the raw "
        "readers, unprofiled). It covers routing, the face's translation and the server "
        "writing every piece, and (since the iterating thread does its own stream's "
        "reads) most of the upstream reading too; the upstream Response's reader "
        "thread takes only what comes after the finish chunk:",
        "",
        table(["face", "handler CPU µs / delta", "x raw floor's whole stream"], cpu_rows),
        "",
        "The faces' per-delta work alone, in one thread with no I/O (best of 9; µs per call):",
        "",
        table(["step", "µs / call"], stage_rows),
        "",
        f"**Findings.** The relay costs least: it passes the upstream's bytes through "
        f"(plus `RelayMeter.feed` counting usage), {profiles['raw relay'][0] / DELTAS * 1e6:,.1f} "
        "µs of handler CPU per delta. The translating faces rebuild each delta: "
        f"`OllamaStream.delta` takes {stages['ollama delta']:,.1f} µs per delta alone "
        f"(the raw floor's whole client: {floor / DELTAS * 1e6:,.1f} µs per delta end to "
        f"end), of which `wire_json.encode_data` is {stages['wire_json']:,.1f} µs "
        f"(one C encoder call; `json.dumps` of the same line takes "
        f"{stages['json.dumps']:,.1f}) and the per-line `created_at` timestamp "
        f"(date formatted once per second) {stages['now']:,.1f} µs. `AnthropicStream.delta` "
        f"({stages['anthropic delta']:,.1f} µs) pays the same encoder but no timestamp. "
        "Then every translated piece is its own write: the server sends each yielded "
        "bytes object at once as one HTTP chunk (unbuffered, as streaming needs), "
        "and in the profile the send is the largest single entry — mostly not the "
        "syscall but waiting to take the GIL back after it, since upstream server, "
        "llmchat's reader thread, proxy thread and client all share one interpreter "
        "here. With the client in another process, as in a real deployment, part of "
        "that contention goes away; the translation CPU does not.",
        "",
        "cProfile of the same handler thread (the middleware enables the profiler in "
        "the serving thread); the profiler inflates every Python-level call, so read "
        "the shares:",
        *profile_md,
    ]
    if not args.no_write:
        write_section(BENCHMARKS_MD, SECTION, "\n".join(markdown))
    return 0


if __name__ == "__main__":
    sys.exit(main())
