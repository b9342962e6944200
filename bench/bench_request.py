"""Time one chat round trip against llmchat's loopback server: llmchat, requests, openai, litellm.

The server is `llmchat.testing.ScriptedServer` with `ChatResponder("ok")`: it
answers every ``POST /v1/chat/completions`` at once with the same small
``chat.completion``, so what differs between the rows is each client's own
per-request overhead. The raw floor is one `requests.Session` posting
``json.dumps(body)`` and reading ``choices[0].message.content``. Every client
keeps its connection alive across calls, and all of them are timed in the same
interleaved rounds against the same server in one run.

    python bench/bench_request.py [--rounds N] [--calls M] [--no-write]
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
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _report import (
    BENCHMARKS_MD,
    NOT_INSTALLED,
    best_of,
    best_of_interleaved,
    blocked,
    calls_for,
    close_litellm,
    loopback_only,
    own_time_by_package,
    package_versions,
    profile_package,
    profile_where,
    stamp,
    table,
    write_section,
)

SECTION = "chat_completion: per-request overhead on loopback"

MODEL = "loopback"
MAX_TOKENS = 8
MESSAGES: list[dict[str, Any]] = [
    {"role": "system", "content": "You are a terse assistant."},
    {"role": "user", "content": "Say ok."},
]
WARM_UP = 10
"""Calls of each contender before the timed rounds (lazy imports, pools, caches)."""
PROFILE_CALLS = 300


# -- nothing leaves the machine ---------------------------------------------------


# -- the contenders ---------------------------------------------------------------


class Contenders:
    """Every client, built once against `url` and reused; `close()` closes them all."""

    def __init__(self, url: str) -> None:
        import requests

        import llmchat

        self.url = url
        self.fns: dict[str, Callable[[], Any]] = {}
        self.notes: dict[str, str] = {}
        self._closers: list[Callable[[], Any]] = []
        body = {"model": MODEL, "messages": MESSAGES, "max_tokens": MAX_TOKENS}
        settings = llmchat.Settings(max_tokens=MAX_TOKENS)

        self.backend = llmchat.OpenAICommon(url, model=MODEL)
        self._closers.append(self.backend.close)
        backend = self.backend
        self.fns["llmchat"] = lambda: backend.chat_completion(MESSAGES, settings=settings).msg
        self.settings = settings

        session = requests.Session()
        self._closers.append(session.close)
        chat_url = url + "/chat/completions"
        headers = {"Content-Type": "application/json"}

        def raw() -> str:
            r = session.post(chat_url, data=json.dumps(body).encode(), headers=headers)
            return json.loads(r.content)["choices"][0]["message"]["content"]

        self.fns["raw"] = raw

        try:
            import openai
        except ImportError:
            self.notes["openai"] = NOT_INSTALLED
        else:
            client = openai.OpenAI(base_url=url, api_key="x", max_retries=0)
            self._closers.append(client.close)
            create = client.chat.completions.create
            self.fns["openai"] = lambda: (
                create(model=MODEL, messages=MESSAGES, max_tokens=MAX_TOKENS)  # type: ignore[arg-type]
                .choices[0]
                .message.content
            )

        try:
            import litellm
        except ImportError:
            self.notes["litellm"] = NOT_INSTALLED
        else:
            litellm.telemetry = False
            litellm.suppress_debug_info = True
            completion = litellm.completion
            call = {
                "model": f"openai/{MODEL}",
                "api_base": url,
                "api_key": "x",
                "messages": MESSAGES,
                "max_tokens": MAX_TOKENS,
            }
            self.fns["litellm"] = lambda: completion(**call).choices[0].message.content
            if "openai" in self.fns:
                # litellm's openai/ provider accepts a ready OpenAI client as `client=`
                # instead of its cached one; a separate client, with its own pool.
                own = openai.OpenAI(base_url=url, api_key="x", max_retries=0)
                self._closers.append(own.close)
                self.fns["litellm client"] = lambda: (
                    completion(**call, client=own).choices[0].message.content
                )
            self._closers.append(close_litellm)

        # Diagnostics, in the same rounds: what two per-request costs add.
        quick = llmchat.OpenAICommon(url, model=MODEL, request_timeout=None)
        self._closers.append(quick.close)
        self.fns["llmchat no deadline"] = lambda: (
            quick.chat_completion(MESSAGES, settings=settings).msg
        )
        bare = requests.Session()
        bare.trust_env = False
        self._closers.append(bare.close)

        def raw_no_env() -> str:
            r = bare.post(chat_url, data=json.dumps(body).encode(), headers=headers)
            return json.loads(r.content)["choices"][0]["message"]["content"]

        self.fns["raw no env"] = raw_no_env

    def close(self) -> None:
        for close in reversed(self._closers):
            with contextlib.suppress(Exception):
                close()


PAUSE = "(pause)"


def _pause() -> None:
    """Not a client and never reported: idle time after litellm's batch in each round.

    litellm hands a success-logging task per call to its own thread pool; the
    last one would otherwise run into the next client's batch (about 1 ms).
    """
    time.sleep(0.0005)


LABELS = {
    "llmchat": "llmchat: `backend.chat_completion(messages, settings=Settings(max_tokens=8))`",
    "raw": "raw floor: `requests.Session().post(data=json.dumps(body).encode())` + `json.loads`",
    "openai": "openai {openai}: `client.chat.completions.create(...)`",
    "litellm": 'litellm {litellm}: `litellm.completion(model="openai/loopback", api_base=...)`',
    "litellm client": "litellm {litellm}: the same with `client=` a reused `openai.OpenAI`",
    "llmchat no deadline": "diagnostic: llmchat with `request_timeout=None` (no deadline watchdog)",
    "raw no env": "diagnostic: raw floor with `session.trust_env = False`",
}


# -- the profile ------------------------------------------------------------------


Rows = list[list[str]]


def profile(fn: Callable[[], Any], calls: int = PROFILE_CALLS) -> tuple[Rows, Rows, Rows, float]:
    """cProfile `calls` calls of `fn`: the top 10 by cumulative time, own time by
    package, llmchat's own top 5 by own time, and the share of the call spent in
    requests' `merge_environment_settings`.

    Per request, in µs. The profiler adds a cost to every Python-level call, so
    these figures run well above the unprofiled ones; read the shares.
    """
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(calls):
        fn()
    profiler.disable()
    stats = pstats.Stats(profiler).stats  # type: ignore[attr-defined]
    here = str(Path(__file__).resolve())
    stats = {key: entry for key, entry in stats.items() if key[0] != here}  # the lambda
    total = sum(entry[2] for entry in stats.values())
    ranked = sorted(stats.items(), key=lambda item: -item[1][3])[:10]
    whole = ranked[0][1][3]  # the call itself: `chat_completion`'s cumulative time
    top = [
        [
            profile_where(*key),
            profile_package(key[0]),
            f"{ncalls / calls:,.0f}",
            f"{own / calls * 1e6:,.0f}",
            f"{cumulative / calls * 1e6:,.0f}",
            f"{cumulative / whole:.0%}",
        ]
        for key, (_prim, ncalls, own, cumulative, _callers) in ranked
    ]
    shown = own_time_by_package(stats, profile_package, shown=7)
    split = [[name, f"{own / calls * 1e6:,.0f}", f"{own / total:.0%}"] for name, own in shown]
    mine = sorted(
        ((key, entry) for key, entry in stats.items() if profile_package(key[0]) == "llmchat"),
        key=lambda item: -item[1][2],
    )[:5]
    own_top = [
        [profile_where(*key), f"{entry[1] / calls:,.0f}", f"{entry[2] / calls * 1e6:,.0f}"]
        for key, entry in mine
    ]
    env_scan = sum(
        entry[3] for key, entry in stats.items() if key[2] == "merge_environment_settings"
    )
    return top, split, own_top, env_scan / whole


# -- the run ----------------------------------------------------------------------


def _complete_body(backend: Any) -> Any:
    """The blocking runner's work on bytes already read, as `(response, status, data, kind)`.

    Private (`backends._runners.complete_body` on `backend._call(...)`); None if they moved.
    """
    try:
        from llmchat.backends import _runners
    except ImportError:
        return None
    complete = getattr(_runners, "complete_body", None)
    if complete is None:
        return None
    make_call = getattr(backend, "_call", None)
    if make_call is None:
        return None
    request = backend.prepare_chat_request(MESSAGES)
    return lambda response, status, data, kind: complete(
        make_call(request, kind, stream=False), response, status, data
    )


def main(argv: list[str] | None = None) -> int:
    """Time every client in interleaved rounds against one server; print and record."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=40, help="interleaved rounds (best of)")
    parser.add_argument("--calls", type=int, default=10, help="calls of each client per round")
    parser.add_argument("--no-write", action="store_true", help="do not update BENCHMARKS.md")
    args = parser.parse_args(argv)

    from llmchat.testing import ChatResponder, ScriptedServer

    versions = package_versions("openai", "litellm")

    server = ScriptedServer(ChatResponder("ok"))
    with loopback_only(), server as url:
        contenders = Contenders(url)
        try:
            bodies: dict[str, Any] = {}
            connections: dict[str, set[int]] = {}
            for name, fn in contenders.fns.items():
                start = len(server.requests)
                for _ in range(WARM_UP):
                    answer = fn()
                    assert answer == "ok", f"{name} read {answer!r}, not 'ok'"
                seen = server.requests[start:]
                bodies[name] = seen[-1].json()
                connections[name] = {request.connection_id for request in seen}
            response = contenders.backend.chat_completion(MESSAGES, settings=contenders.settings)
            assert response.is_success, f"llmchat failed: {response.err}"

            order = ["llmchat", "raw", "llmchat no deadline", "raw no env"]
            order += ["openai", "litellm", "litellm client"]
            timed = {name: contenders.fns[name] for name in order if name in contenders.fns}
            if "litellm" in timed:
                timed[PAUSE] = _pause
            times = best_of_interleaved(timed, args.rounds, args.calls, rotate=True)
            requests_made = len(server.requests)
            connections_made = server.connections_accepted

            backend, settings = contenders.backend, contenders.settings
            prepare = lambda: backend.prepare_chat_request(MESSAGES, settings=settings)  # noqa: E731
            cpu: dict[str, float] = {"prepare": best_of(prepare, 15, calls_for(prepare))}
            complete = _complete_body(backend)  # private: may move
            reply = server.requests[-1].reply
            if complete is not None and reply is not None:
                data, body = reply.body, prepare().body  # the server's exact answer bytes

                def settle() -> Any:
                    response = backend.make_response(body)
                    complete(response, 200, data, "chat")
                    return response

                assert settle().is_success
                cpu["settle"] = best_of(settle, 15, calls_for(settle))

            call = lambda: backend.chat_completion(MESSAGES, settings=settings)  # noqa: E731
            top, split, own_top, env_share = profile(call)
        finally:
            contenders.close()
    leftover = sorted(t.name for t in threading.enumerate() if t is not threading.current_thread())
    assert not [n for n in leftover if n.startswith("llmchat-testing")], leftover
    assert not blocked, f"network access attempted: {blocked}"

    # -- the table ------------------------------------------------------------------
    floor, mine = times["raw"], times["llmchat"]

    def row(label: str, seconds: float) -> list[str]:
        return [
            label,
            f"{seconds * 1e6:,.0f}",
            f"{seconds / floor:.2f}x",
            f"{seconds / mine:.2f}x",
            f"{(seconds - floor) * 1e6:+,.0f}",
        ]

    rows: list[list[str]] = []
    for name in ("llmchat", "raw", "openai", "litellm", "litellm client"):
        if name in times:
            rows.append(row(LABELS[name].format(**versions), times[name]))
        elif name in contenders.notes:
            rows.append([f"{name}: {contenders.notes[name]}", "—", "—", "—", "—"])
    rows += [row(LABELS[name], times[name]) for name in ("llmchat no deadline", "raw no env")]
    cpu_rows = [
        [
            "`backend.prepare_chat_request(...)`: settings, messages, hooks, `wire_json.encode`",
            f"{cpu['prepare'] * 1e6:,.1f}",
        ]
    ]
    if "settle" in cpu:
        cpu_rows.append(
            [
                "`make_response` + the blocking runner's `complete_body` on the server's reply "
                "bytes: decode, accumulate, judge, settle",
                f"{cpu['settle'] * 1e6:,.1f}",
            ]
        )

    overhead = (mine - floor) * 1e6
    deadline = (times["llmchat no deadline"] - mine) * 1e6
    env = (times["raw no env"] - floor) * 1e6
    header = ["client", "µs / request", "x floor", "x llmchat", "vs floor µs"]
    width = max(len(cells[0]) for cells in rows)
    print(f"{header[0]:<{width}} {header[1]:>13} {header[2]:>8} {header[3]:>10} {header[4]:>12}")
    for cells in rows:
        print(f"{cells[0]:<{width}} {cells[1]:>13} {cells[2]:>8} {cells[3]:>10} {cells[4]:>12}")
    print(f"llmchat overhead above the floor: {overhead:+,.0f} µs per request")
    print(f"  request_timeout=None: {deadline:+,.0f} µs; trust_env=False floor: {env:+,.0f} µs")
    for cells in cpu_rows:
        print(f"  {cells[0]}: {cells[1]} µs")
    print(
        f"{requests_made:,} requests on {connections_made} connections "
        f"({len(contenders.fns)} clients, each kept one alive)"
    )
    print(f"cProfile of llmchat.chat_completion, {PROFILE_CALLS} calls, per request:")
    profile_header = ["function", "code", "calls", "own µs", "cumulative µs", "of request"]
    for cells in [profile_header, *top]:
        print(
            f"  {cells[0]:<66} {cells[1]:<10} {cells[2]:>5} {cells[3]:>7} {cells[4]:>13} "
            f"{cells[5]:>10}"
        )
    print("own time by package:")
    for cells in split:
        print(f"  {cells[0]:<28} {cells[1]:>7} µs {cells[2]:>5}")
    print("llmchat's own functions, top 5 by own time:")
    for cells in own_top:
        print(f"  {cells[0]:<66} {cells[1]:>5} calls {cells[2]:>5} µs")
    same = [n for n in bodies if bodies[n] == bodies["raw"]]
    floor_body = bodies["raw"]
    differ = {
        n: sorted(k for k in {*bodies[n], *floor_body} if bodies[n].get(k) != floor_body.get(k))
        for n in bodies
        if n not in same
    }
    print(f"request bodies equal to the floor's: {same}; differing: {differ or 'none'}")
    others = [n for n in leftover if not n.startswith("llmchat-testing")]
    print(f"threads left after closing everything: {others or 'none'}")

    # -- the section ----------------------------------------------------------------
    pooled = all(len(ids) == 1 for ids in connections.values()) and connections_made == len(
        contenders.fns
    )
    markdown = [
        stamp(),
        "",
        "One blocking chat round trip against `llmchat.testing.ScriptedServer("
        'ChatResponder("ok"))`, which answers a fixed 1-choice `chat.completion` at once. '
        f"Request: one system and one user message, `max_tokens={MAX_TOKENS}`, model "
        f'"{MODEL}"; every client reads `choices[0].message.content` ("ok"). Each client '
        "is built once and reused (one kept-alive connection each); the server runs in "
        "the same interpreter, so every row includes its work too. Best of "
        f"{args.rounds} interleaved rounds of {args.calls} calls per client, after "
        f"{WARM_UP} warm-up calls each; each round starts one client later than the one "
        "before (the order rotates), so no client always runs right after litellm, whose "
        "logging threads are still busy when its batch ends (in a fixed order the first "
        "client paid about 80 µs per request for it: that, not the deadline watchdog, was "
        "the earlier runs' `request_timeout=None` difference).",
        "",
        table(header, rows),
        "",
        f"**llmchat overhead above the raw floor: {overhead:+,.0f} µs per request** "
        f"({mine / floor:.2f}x the floor). Of llmchat's own CPU work, timed alone without "
        "I/O (best of 15 runs each):",
        "",
        table(["step", "µs / call"], cpu_rows),
        "",
        "The two diagnostic rows isolate per-request costs in llmchat's path. "
        f"**`request_timeout=None` is {deadline:+,.0f} µs per request**: with a deadline "
        "(default 1800 s) `Exchange.arm_deadline` → `_Watchdog.schedule` pushes a timer onto "
        "the watchdog's heap and cancels it when the exchange ends (the `llmchat-deadlines` "
        "thread is woken only when a new timer is the earliest, which with one fixed "
        "`request_timeout` it is not; alone, arming and cancelling a deadline costs about "
        "1.4 µs). "
        f"**`trust_env = False` is {env:+,.0f} µs** on the floor: "
        "with `trust_env` (requests' default, and llmchat's `new_session()` sets it) every "
        "`Session.request` goes through `merge_environment_settings`, which scans "
        "`os.environ` for proxy variables twice and stats for a `.netrc`; the floor pays it "
        "too, so it is not in the overhead above. A round trip through a loopback server on a "
        "shared machine is noisy: differences of a few hundred µs between rows move from run "
        "to run, ratios much less.",
        "",
        f"Checks: {requests_made:,} requests on {connections_made} TCP connections "
        + (
            "(every client kept its one connection alive throughout)"
            if pooled
            else f"(connections per client: { {n: len(i) for n, i in connections.items()} })"
        )
        + "; "
        + (
            "every client sent the same JSON body (equal once parsed)"
            if not differ
            else "bodies differ from the floor's in: "
            + ", ".join(f"{n} {keys}" for n, keys in differ.items())
        )
        + "; no connect or DNS lookup left the loopback host.",
    ]
    if "litellm" in times:
        saved = times["litellm"] - times.get("litellm client", times["litellm"])
        markdown += [
            "",
            "litellm without `client=` already reuses one cached OpenAI client (its requests "
            "all came on one connection), so per-call client setup is not what costs: passing "
            f"a reused client changes the time by {-saved * 1e6:+,.0f} µs "
            f"({-saved / times['litellm']:+.0%}). litellm's time goes to its own per-call "
            "work on top of the openai SDK's: argument mapping, a logging object, a cost "
            "calculation for every response (`response_cost_calculator`, model-info lookups "
            "for the unknown model) and a success-logging task handed to its "
            "`litellm-logging` thread pool.",
        ]
    markdown += [
        "",
        f"Where llmchat's time goes: cProfile of {PROFILE_CALLS} `chat_completion` calls, "
        "top 10 by cumulative time, per request (the profiler inflates Python-level calls, "
        "so read the shares; socket `recv_into`, under `built-in (C)`, includes waiting for "
        "the server thread):",
        "",
        table(profile_header, top, align="llrrrr"),
        "",
        f"requests' `merge_environment_settings` (the `trust_env` scan) is {env_share:.0%} "
        "of the profiled request on its own; it is most of the `stdlib os` and "
        "`_collections_abc` own time below. Own time (excluding callees) by package, and "
        "llmchat's own five largest functions:",
        "",
        table(["own time in", "µs / request", "share"], split),
        "",
        table(["llmchat function", "calls", "own µs"], own_top),
    ]
    if others:
        markdown += [
            "",
            "Threads still running after every client was closed and the server stopped: "
            + ", ".join(f"`{n}`" for n in others)
            + "."
            + (
                " `llmchat-deadlines` is llmchat's module-level deadline watchdog: the first "
                "request with a deadline starts it, and nothing stops it (`backend.close()` "
                "does not); it is a daemon thread, idle between requests."
                if "llmchat-deadlines" in others
                else ""
            ),
        ]
    if not args.no_write:
        write_section(BENCHMARKS_MD, SECTION, "\n".join(markdown))
    return 0


if __name__ == "__main__":
    sys.exit(main())
