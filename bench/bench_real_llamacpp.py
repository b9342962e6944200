"""Stream from a real llama-server: tokens/s, time to first chunk, client CPU.

One llama-server (the tests' tiny random-weight model, `-np 2 -t 2`), the same
prompt and `max_tokens` for every client, interleaved round by round: llmchat's
`chat_completion_stream`, the openai SDK's `stream=True`, litellm's
`stream=True`, and a raw floor (requests + `read1` + `json.loads`). The server
is the same for all, so tokens/s mostly measures the server; what differs is
the client's own CPU, reported as a share of the generation's wall time (the
CPU the client takes away from a server sharing its machine).

    pip install -e ".[real,bench]"
    python bench/bench_real_llamacpp.py [--no-write] [--rounds N] [--tokens N] [--quick]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _child_client import ChildContender
from _report import (
    BENCHMARKS_MD,
    NOT_INSTALLED,
    ROOT,
    json_parsers_differ,
    package_versions,
    stamp,
    table,
    write_section,
)

sys.path.insert(0, str(ROOT))

TITLE = "Real llama-server: streaming tokens/s, first chunk, client CPU"
MESSAGES = [{"role": "user", "content": "Tell me a long story about a lighthouse."}]
TARGET_CPU = 1.1
"""llmchat's client CPU per stream over the raw floor's: at most this."""


class Outcome:
    """One timed stream: wall seconds, client CPU seconds, first-chunk seconds, tokens."""

    def __init__(self, wall: float, cpu: float, ttfc: float, tokens: int) -> None:
        self.wall, self.cpu, self.ttfc, self.tokens = wall, cpu, ttfc, tokens


def timed(run: Callable[[Callable[[], None]], int]) -> Outcome:
    """Time `run`, which calls `first()` at its first content chunk and returns tokens."""
    marks: list[float] = []
    cpu0, t0 = time.process_time(), time.perf_counter()
    tokens = run(lambda: marks.append(time.perf_counter()) if not marks else None)
    wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    return Outcome(wall, cpu, (marks[0] - t0) if marks else float("nan"), tokens)


def llmchat_client(url: str, max_tokens: int) -> Callable[[Callable[[], None]], int]:
    from llmchat import OpenAICommon, Settings

    backend = OpenAICommon(url, model="tiny")
    settings = Settings(max_tokens=max_tokens, temperature=0)

    def run(first: Callable[[], None]) -> int:
        response = backend.chat_completion_stream(MESSAGES, settings=settings)
        for chunk in response:
            if chunk.content:
                first()
        assert response.finish_reason == "length", response.err
        return int(response.completion_tokens or 0)

    return run


def raw_client(url: str, max_tokens: int) -> Callable[[Callable[[], None]], int]:
    import requests

    session = requests.Session()
    body = json.dumps(
        {
            "model": "tiny",
            "messages": MESSAGES,
            "max_tokens": max_tokens,
            "temperature": 0,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
    ).encode()

    def run(first: Callable[[], None]) -> int:
        tokens = 0
        with session.post(
            f"{url}/chat/completions",
            data=body,
            headers={"Content-Type": "application/json"},
            stream=True,
        ) as reply:
            buffer = b""
            while data := reply.raw.read1(65536):
                buffer += data
                *frames, buffer = buffer.split(b"\n\n")
                for frame in frames:
                    payload = frame[len(b"data: ") :]
                    if payload == b"[DONE]":
                        continue
                    event = json.loads(payload)
                    if event.get("choices") and event["choices"][0]["delta"].get("content"):
                        first()
                    if event.get("usage"):
                        tokens = event["usage"]["completion_tokens"]
        return tokens

    return run


def openai_client(url: str, max_tokens: int) -> Callable[[Callable[[], None]], int] | None:
    try:
        import openai
    except ImportError:
        return None
    client = openai.OpenAI(base_url=url, api_key="x", max_retries=0)

    def run(first: Callable[[], None]) -> int:
        tokens = 0
        stream = client.chat.completions.create(
            model="tiny",
            messages=MESSAGES,  # type: ignore[arg-type]
            max_tokens=max_tokens,
            temperature=0,
            stream=True,
            stream_options={"include_usage": True},
        )
        for event in stream:
            if event.choices and event.choices[0].delta.content:
                first()
            if event.usage:
                tokens = event.usage.completion_tokens
        return tokens

    return run


def litellm_client(url: str, max_tokens: int) -> Callable[[Callable[[], None]], int] | None:
    try:
        import litellm
    except ImportError:
        return None
    litellm.telemetry = False
    litellm.suppress_debug_info = True
    litellm.REPEATED_STREAMING_CHUNK_LIMIT = 10**9  # the tiny model repeats itself

    def run(first: Callable[[], None]) -> int:
        tokens = 0
        stream = litellm.completion(
            model="openai/tiny",
            api_base=url,
            api_key="x",
            messages=MESSAGES,
            max_tokens=max_tokens,
            temperature=0,
            stream=True,
            stream_options={"include_usage": True},
        )
        for event in stream:
            if event.choices and event.choices[0].delta.content:
                first()
            usage = getattr(event, "usage", None)
            if usage:
                tokens = usage.completion_tokens
        return tokens

    return run


CLIENTS = {
    "llmchat": llmchat_client,
    "llmchat stdlib": llmchat_client,
    "raw": raw_client,
    "openai": openai_client,
    "litellm": litellm_client,
}


def child(
    kind: str, url: str, tokens: int
) -> tuple[Callable[[], Any], Callable[[Any], str | None]]:
    """In a child process (`_child_client`): one client, each stream timed there."""
    run = CLIENTS[kind](url, tokens)
    assert run is not None, kind

    def stream() -> dict[str, float]:
        outcome = timed(run)
        return vars(outcome)

    def check(result: dict[str, float]) -> str | None:
        return None if result["tokens"] > 0 else f"{kind}: no tokens"

    return stream, check


def installed(kind: str) -> bool:
    """Whether the client `kind` can run here (its SDK is installed)."""
    import importlib.util

    sdk = {"openai": "openai", "litellm": "litellm"}.get(kind)
    return sdk is None or importlib.util.find_spec(sdk) is not None


def start_server() -> Any:
    from tests.real.server import LlamaServer, find_binary
    from tests.real.tiny_model import tiny_model_path

    binary, why = find_binary()
    if binary is None:
        raise SystemExit(f"no llama-server: {why}")
    cache = Path.home() / ".cache" / "llmchat-tests"
    server = LlamaServer(
        binary,
        tiny_model_path(cache),
        ["--chat-template", "chatml"],
        Path(tempfile.mkdtemp()) / "server.log",
    )
    server.wait_ready()
    return server


def summarize(outcomes: list[Outcome]) -> dict[str, float]:
    return {
        "tokens_per_s": statistics.median(o.tokens / o.wall for o in outcomes),
        "ttfc_ms": statistics.median(o.ttfc for o in outcomes) * 1000,
        "cpu_ms": statistics.median(o.cpu for o in outcomes) * 1000,
        "cpu_share": statistics.median(o.cpu / o.wall for o in outcomes),
        "tokens": statistics.median(o.tokens for o in outcomes),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--no-write", action="store_true")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--tokens", type=int, default=512)
    parser.add_argument(
        "--quick", action="store_true", help="a smoke run: 2 rounds of 64 tokens; never writes"
    )
    args = parser.parse_args()
    if args.quick:
        args.rounds, args.tokens, args.no_write = 2, 64, True

    server = start_server()
    # Every client in a child process of its own: its CPU per stream is that
    # process's alone (litellm's logging threads included, nobody else's).
    children: dict[str, ChildContender] = {}
    clients = dict.fromkeys(CLIENTS, False)
    try:
        for name in CLIENTS:
            if name == "llmchat stdlib" and not json_parsers_differ():
                continue
            if not installed(name):
                continue
            env = {"LLMCHAT_JSON": "stdlib"} if name == "llmchat stdlib" else {}
            kind = {"url": server.url, "tokens": args.tokens}
            children[name] = ChildContender(
                "bench_real_llamacpp:child", {"kind": name, **kind}, env
            )
            clients[name] = True
        for contender in children.values():  # warm-up: connections, imports, the prompt cache
            contender()
        results: dict[str, list[Outcome]] = {name: [] for name in children}
        for _ in range(args.rounds):
            for name, contender in children.items():
                contender()
                results[name].append(Outcome(**contender.last[0]))
        for name, contender in children.items():
            assert not contender.errors, (name, contender.errors)
    finally:
        for contender in children.values():
            contender.close()
        server.stop()

    summary = {name: summarize(outcomes) for name, outcomes in results.items()}
    base = summary["llmchat"]
    floor = summary["raw"]
    orjson = package_versions("orjson")["orjson"]
    labels = {
        "llmchat": "llmchat `chat_completion_stream`"
        + (f" (orjson {orjson})" if json_parsers_differ() else ""),
        "llmchat stdlib": "the same, JSON parsed by the stdlib (`LLMCHAT_JSON=stdlib`)",
        "raw": "raw floor: requests + `read1` + `json.loads`",
        "openai": "openai SDK `create(stream=True)`",
        "litellm": 'litellm `completion("openai/tiny", stream=True)`',
    }
    rows = []
    for name in clients:
        if name == "llmchat stdlib" and name not in summary:
            continue  # orjson is not installed: the llmchat row is the stdlib's
        if name not in summary:
            rows.append([f"{labels[name]}: {NOT_INSTALLED}", "", "", "", "", "", ""])
            continue
        s = summary[name]
        rows.append(
            [
                labels[name],
                f"{s['tokens_per_s']:,.0f}",
                f"{s['ttfc_ms']:.1f}",
                f"{s['cpu_ms']:.1f}",
                f"{s['cpu_share'] * 100:.1f}%",
                f"{s['cpu_ms'] / floor['cpu_ms']:.2f}x",
                f"{s['cpu_ms'] / base['cpu_ms']:.2f}x",
            ]
        )
    ratio = base["cpu_ms"] / floor["cpu_ms"]
    verdict = (
        f"**llmchat's client CPU per stream = {ratio:.2f}x the raw floor's** "
        f"({'meets' if ratio <= TARGET_CPU else 'MISSES'} the {TARGET_CPU:g}x target)"
    )
    if "llmchat stdlib" in summary:
        stdlib = summary["llmchat stdlib"]["cpu_ms"] / floor["cpu_ms"]
        verdict += f"; with the stdlib JSON parser {stdlib:.2f}x"
    verdict += "."
    header = [
        "client",
        "tokens/s",
        "first chunk ms",
        f"client CPU ms / {args.tokens}-token stream",
        "CPU share of wall",
        "CPU x floor",
        "CPU x llmchat",
    ]
    report = table(header, rows)
    print(report)
    print(verdict)
    if args.no_write:
        return
    markdown = "\n".join(
        [
            stamp(),
            "",
            f"One llama-server (tiny random-weight llama model, Qwen2 tokenizer, `-c 2048 -np 2 "
            f"-t 2`, chatml), the same prompt and `max_tokens={args.tokens}` (the model never "
            "stops early: every stream is that long) for every client, `include_usage` on. "
            f"Medians of {args.rounds} interleaved rounds after one warm-up stream each. "
            "Every client runs in a child process of its own (`bench/_child_client.py`; the "
            "stdlib-parser llmchat with `LLMCHAT_JSON=stdlib`): client CPU is "
            "`time.process_time()` of that process across the stream (the server is another "
            "process), so it includes llmchat's reader thread and any background threads a "
            "client starts, and no other client's.",
            "",
            report,
            "",
            verdict,
            "",
            "Tokens/s and first chunk are mostly the server's (the same for every client); "
            "the CPU columns are the client's own cost. With the server on the same 2 cores, "
            "client CPU is time taken from generation.",
        ]
    )
    write_section(BENCHMARKS_MD, TITLE, markdown)


if __name__ == "__main__":
    main()
