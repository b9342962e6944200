"""What the translating proxy costs: its four faces against the same clients going direct.

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
   SDK (Anthropic face, `messages.stream` + `text_stream`), `openai`'s
   `responses.create(stream=True)` (Responses face, read event by event as
   Codex reads it) and `openai` (the OpenAI relay face); plus raw readers of
   each face, which isolate the proxy's own cost from its clients'.
2. A short blocking request, ms per request, for the same paths (no litellm).

Every path's text is checked on every call (equal to the expected text); all
rows of one table are timed in the same interleaved rounds.

    python bench/bench_proxy.py [--rounds N] [--short-rounds M] [--no-write]
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from _proxy_paths import (
    DELTAS,
    DRAIN,
    MODEL,
    SHORT_TEXT,
    WAIT,
    WRITE_SIZE,
    Contenders,
    checked,
    litellm_idle,
    upstream_script,
)
from _proxy_profile import PROFILE_STREAMS, profile_proxy, profile_rows, stage_costs
from _report import (
    BENCHMARKS_MD,
    NOT_INSTALLED,
    best_of_interleaved,
    blocked,
    loopback_only,
    package_versions,
    stamp,
    table,
    write_section,
)
from bench_stream import deltas, stream_frames

SECTION = "Translating proxy: what each face costs"


# -- the run ----------------------------------------------------------------------

STREAM_LABELS = {
    "raw": "raw floor: `requests` on the upstream SSE, `read1` + split + `json.loads`",
    "openai": "openai {openai} direct: `chat.completions.create(stream=True)`",
    "litellm": 'litellm {litellm} direct: `completion(model="openai/…", stream=True)`',
    "llmchat": "llmchat direct: `chat_completion_stream`, iterate",
    "ollama": "proxy, Ollama face: ollama {ollama} `Client.chat(stream=True)`",
    "anthropic": "proxy, Anthropic face: anthropic {anthropic} `messages.stream` `text_stream`",
    "responses": "proxy, Responses face: openai {openai} `responses.create(stream=True)`, "
    "`response.output_text.delta` events",
    "openai relay": "proxy, OpenAI relay: openai {openai} `create(stream=True)`",
    "raw ollama": "diagnostic: raw reader of the Ollama face (split lines, `json.loads`)",
    "raw anthropic": "diagnostic: raw reader of the Anthropic face (split frames, `json.loads`)",
    "raw responses": "diagnostic: raw reader of the Responses face (split frames, `json.loads`)",
    "raw gemini": "diagnostic: raw reader of the Gemini face (SSE, split frames, `json.loads`)",
    "raw relay": "diagnostic: raw reader of the relay face (same parse as the floor)",
}
SHORT_LABELS = {
    "raw": "raw floor: `requests.Session().post` + `json.loads`",
    "openai": "openai {openai} direct: `chat.completions.create(...)`",
    "llmchat": "llmchat direct: `backend.chat_completion(...)`",
    "ollama": "proxy, Ollama face: ollama {ollama} `Client.chat(stream=False)`",
    "anthropic": "proxy, Anthropic face: anthropic {anthropic} `messages.create(...)`",
    "responses": "proxy, Responses face: openai {openai} `responses.create(...)`, `output_text`",
    "openai relay": "proxy, OpenAI relay: openai {openai} `create(...)`",
}
TRANSLATED = (
    "ollama",
    "anthropic",
    "responses",
    "raw ollama",
    "raw anthropic",
    "raw responses",
    "raw gemini",
)
"""The translating faces' paths: no direct counterpart, compared with llmchat direct instead."""
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
        contenders = Contenders(upstream, proxy.url)
        try:
            # -- checks, then 1. streaming -------------------------------------------
            stream_fns = {n: checked(n, fn, expected) for n, fn in contenders.stream.items()}
            short_fns = {n: checked(n, fn, SHORT_TEXT) for n, fn in contenders.short.items()}
            for name, fn in {**stream_fns, **short_fns}.items():
                fn()  # fails loudly on a wrong text, before anything is timed
                if name == "litellm":
                    litellm_idle()
            print(f"checked {len(stream_fns)} streaming and {len(short_fns)} short paths")
            timed: dict[str, Callable[[], Any]] = dict(stream_fns)
            if "litellm" in timed:
                timed[DRAIN] = litellm_idle
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
            if name in TRANSLATED
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
        ("raw responses", "Responses face (`/v1/responses`, SSE)"),
        ("raw gemini", "Gemini face (`:streamGenerateContent?alt=sse`)"),
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
            ("clean delta", "the same through `CleanStream` (the proxy's path), no upstream key"),
            ("clean key delta", "the same through `CleanStream`, with an upstream key to scrub"),
            (
                "responses delta",
                "`ResponsesStream.delta(chunk)`: one `response.output_text.delta` event",
            ),
            ("now", "of which for Ollama: `OllamaStream._now()` (`created_at`)"),
            ("wire_json", "`wire_json.encode_data(line)` of one Ollama line"),
            ("json.dumps", "for comparison: `json.dumps(line, ...).encode()` of the same line"),
        )
    ]
    for cells in stage_rows:
        print(f"  {cells[0]}: {cells[1]} µs")
    profile_md: list[str] = []
    for face, title in (
        ("raw ollama", "Ollama face"),
        ("raw anthropic", "Anthropic face"),
        ("raw responses", "Responses face"),
    ):
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
    for name, title in (
        ("raw ollama", "Ollama"),
        ("raw anthropic", "Anthropic"),
        ("raw responses", "Responses"),
    ):
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
        "protocol), nor has `openai`'s Responses API (the upstream speaks only chat "
        "completions; the Responses row reads every event of `responses.create(stream=True)` "
        "as Codex does, keeping the `response.output_text.delta` texts), so their added "
        "cost is given against the raw floor and, in "
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
        'path; the answer is "ok". Direct paths get a `chat.completion`; the Ollama, '
        "Anthropic and Responses faces turn a blocking request into a one-delta upstream "
        "stream, wait "
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
        "thread takes only what comes after the finish chunk. Not on the Anthropic face: "
        "its body is fed by a pump thread (so that it can ping while the upstream is "
        "silent), which does the upstream reading outside the handler thread, so its "
        "figure leaves that part out:",
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
        f"({stages['anthropic delta']:,.1f} µs) pays the same encoder but no timestamp; "
        f"`ResponsesStream.delta` ({stages['responses delta']:,.1f} µs) the same encoder "
        "for a larger event (its type, a sequence number, the item id and indexes). "
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
