"""Keep-alive over TLS: N sequential short streams, the connections and handshakes they cost.

A loopback HTTPS `llmchat.testing.ScriptedServer` with a certificate from a
test CA made at run time (trustme). Each client makes N sequential streamed
calls (one HTTP chunk per SSE event, ~50 content deltas), then a few blocking
calls, against a fresh server of its own, so the server's counts are that
client's: TCP connections accepted and TLS handshakes completed. Reported:
the time to the first content chunk of the first stream (connect + handshake
included) and the median of the later ones, and a warm blocking call's time.
llmchat, the openai SDK (httpx) and a raw floor (a `requests.Session` with
keep-alive, reading each stream to the end of its body) in interleaved rounds.

Goals, reported and never asserted: one connection (one handshake) for all N
streams, and a later stream's first chunk no later than a blocking call's end.

    python bench/bench_keepalive.py [--streams N] [--rounds R] [--deltas D] [--no-write]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import multiprocessing
import socket
import ssl
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from _report import (
    BENCHMARKS_MD,
    NOT_INSTALLED,
    loopback_only,
    package_versions,
    stamp,
    table,
    write_section,
)
from bench_stream import deltas, raw_content, raw_frames, stream_frames

SECTION = "Keep-alive: N sequential streams over TLS"

MODEL = "loopback"
MESSAGES: list[dict[str, Any]] = [{"role": "user", "content": "Say something short."}]
BLOCKING_CALLS = 5
"""Timed blocking calls per client and round, after one untimed (it may open a connection)."""


# -- the TLS pieces: a CA made now, a server certificate, the CA's PEM on disk ----------


@contextlib.contextmanager
def test_ca() -> Iterator[tuple[str, str]]:
    """Yield `(server key + certificate chain PEM path, CA bundle path)`, in a temporary folder."""
    import trustme

    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1")
    with tempfile.TemporaryDirectory(prefix="llmchat-bench-ca-") as folder:
        server_pem, ca_pem = str(Path(folder) / "server.pem"), str(Path(folder) / "ca.pem")
        cert.private_key_and_cert_chain_pem.write_to_path(server_pem)
        ca.cert_pem.write_to_path(ca_pem)
        yield server_pem, ca_pem


# -- the server, in a process of its own ----------------------------------------------
#
# In the client's process the server's Python work (a TLS record and a selector
# wait per frame) would take the GIL from the client exactly while the client
# waits for its first chunk: measured, it doubled the floor's time to headers
# over TLS. A child process serves, one fresh ScriptedServer per client and round.


def _replies(count: int) -> tuple[Any, Any, str]:
    """The streamed reply (one chunk per event), the blocking reply, and their text."""
    from llmchat.testing import Reply, Write

    texts = deltas(count)
    expected = "".join(texts)
    sse_headers = {"Content-Type": "text/event-stream"}
    frames = stream_frames(texts)
    stream_reply = Reply(200, sse_headers, framing="chunked", steps=[Write(f) for f in frames])
    message = {"role": "assistant", "content": expected}
    blocking_reply = Reply.json(
        {
            "id": "chatcmpl-keepalive",
            "object": "chat.completion",
            "created": 1796027353,
            "model": MODEL,
            "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 9, "completion_tokens": count, "total_tokens": count + 9},
        }
    )
    return stream_reply, blocking_reply, expected


def _serve(commands: Connection, server_pem: str, count: int) -> None:
    """The child: on "start" a fresh HTTPS server (answer its URL), "counts", "stop", "exit"."""
    from llmchat.testing import ScriptedServer

    stream_reply, blocking_reply, _ = _replies(count)

    def script(record: Any) -> Any:
        return stream_reply if record.json().get("stream") else blocking_reply

    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(server_pem)
    server: ScriptedServer | None = None
    while True:
        command = commands.recv()
        if command == "start":
            server = ScriptedServer(script, tls=context).start()
            commands.send(server.url)
        elif command == "counts":
            assert server is not None
            commands.send((server.connections_accepted, server.tls_handshakes, server.errors))
        elif command == "stop":
            assert server is not None
            server.stop()
            commands.send(server.errors == [])
        else:
            return


class ServerProcess:
    """The parent's handle on `_serve`: `start()` -> URL, `counts()`, `stop()`, `close()`."""

    def __init__(self, server_pem: str, count: int) -> None:
        context = multiprocessing.get_context("spawn")
        self._commands, child = context.Pipe()
        self._process = context.Process(
            target=_serve, args=(child, server_pem, count), name="keepalive-server"
        )
        self._process.start()

    def _ask(self, command: str) -> Any:
        self._commands.send(command)
        return self._commands.recv()

    def start(self) -> str:
        return str(self._ask("start"))

    def counts(self) -> tuple[int, int]:
        connections, handshakes, errors = self._ask("counts")
        assert not errors, f"server errors: {errors}"
        return connections, handshakes

    def stop(self) -> None:
        assert self._ask("stop"), "the server reported errors"

    def close(self) -> None:
        self._commands.send("exit")
        self._process.join(10)


# -- the clients -------------------------------------------------------------------


@dataclass
class Client:
    """One contender: `stream()` returns seconds to the first content chunk and the text."""

    label: str
    stream: Callable[[], tuple[float, str]]
    blocking: Callable[[], str]
    close: Callable[[], Any]


def llmchat_client(url: str, ca_path: str) -> Client:
    import llmchat
    from llmchat.transport import new_session

    session = new_session()
    session.verify = ca_path
    # requests lets REQUESTS_CA_BUNDLE / CURL_CA_BUNDLE replace session.verify
    # while trust_env is on; this machine sets them.
    session.trust_env = False
    backend = llmchat.OpenAICommon(url, model=MODEL, session=session)

    def stream() -> tuple[float, str]:
        start = time.perf_counter()
        response = backend.chat_completion_stream(MESSAGES)
        first = None
        for chunk in response:
            if first is None and chunk.content:
                first = time.perf_counter() - start
        assert response.is_success, f"llmchat failed: {response.err}"
        assert first is not None
        return first, response.msg

    def blocking() -> str:
        response = backend.chat_completion(MESSAGES)
        assert response.is_success, f"llmchat failed: {response.err}"
        return response.msg

    return Client(
        "llmchat: `OpenAICommon(session=new_session())`, `chat_completion_stream`",
        stream,
        blocking,
        session.close,
    )


def openai_client(url: str, ca_path: str) -> Client | None:
    try:
        import httpx
        import openai
    except ImportError:
        return None
    # httpx 0.28 deprecates a path for `verify`; a context holding the CA is its form.
    http = httpx.Client(verify=ssl.create_default_context(cafile=ca_path))
    client = openai.OpenAI(base_url=url, api_key="x", max_retries=0, http_client=http)
    create = client.chat.completions.create

    def stream() -> tuple[float, str]:
        start = time.perf_counter()
        first = None
        texts = []
        for chunk in create(model=MODEL, messages=MESSAGES, stream=True):  # type: ignore[arg-type]
            if chunk.choices and chunk.choices[0].delta.content:
                if first is None:
                    first = time.perf_counter() - start
                texts.append(chunk.choices[0].delta.content)
        assert first is not None
        return first, "".join(texts)

    def blocking() -> str:
        completion = create(model=MODEL, messages=MESSAGES)  # type: ignore[arg-type]
        return completion.choices[0].message.content or ""

    version = package_versions("openai")["openai"]
    label = f"openai {version}: `OpenAI(http_client=httpx.Client(verify=ctx))`, `stream=True`"
    return Client(label, stream, blocking, client.close)


def raw_client(url: str, ca_path: str) -> Client:
    import requests

    session = requests.Session()
    session.verify = ca_path
    session.trust_env = False  # as for llmchat: the env's CA bundle would win
    chat_url = url + "/chat/completions"
    headers = {"Content-Type": "application/json"}
    stream_body = json.dumps({"model": MODEL, "messages": MESSAGES, "stream": True}).encode()
    blocking_body = json.dumps({"model": MODEL, "messages": MESSAGES}).encode()

    def stream() -> tuple[float, str]:
        start = time.perf_counter()
        first = None
        texts = []
        with session.post(chat_url, data=stream_body, headers=headers, stream=True) as response:
            for payload in raw_frames(response):  # to the end of the body: the pool keeps it
                text = raw_content(payload)
                if text:
                    if first is None:
                        first = time.perf_counter() - start
                    texts.append(text)
        assert first is not None
        return first, "".join(texts)

    def blocking() -> str:
        got = session.post(chat_url, data=blocking_body, headers=headers).json()
        return str(got["choices"][0]["message"]["content"])

    label = "raw floor: `requests.Session` keep-alive, `raw.read1` to the end + `json.loads`"
    return Client(label, stream, blocking, session.close)


# -- one round: a fresh server, N streams, then blocking calls --------------------------


@dataclass
class Tally:
    """What one client did over all rounds."""

    label: str
    connections: list[int] = field(default_factory=list)
    handshakes: list[int] = field(default_factory=list)
    first: list[float] = field(default_factory=list)
    later: list[float] = field(default_factory=list)
    blocking: list[float] = field(default_factory=list)
    blocking_connections: list[int] = field(default_factory=list)


def one_round(
    make: Callable[[str], Client | None],
    server: ServerProcess,
    streams: int,
    expected: str,
    tally: Tally | None,
) -> Tally | None:
    url = server.start()
    try:
        client = make(url)
        if client is None:
            return None
        tally = tally or Tally(client.label)
        try:
            for i in range(streams):
                seconds, text = client.stream()
                assert text == expected, f"{client.label}: got {text[:40]!r}…"
                (tally.first if i == 0 else tally.later).append(seconds)
            connections, handshakes = server.counts()
            tally.connections.append(connections)
            tally.handshakes.append(handshakes)
            assert client.blocking() == expected  # untimed: the pool may hold nothing yet
            before = server.counts()[0]
            for _ in range(BLOCKING_CALLS):
                start = time.perf_counter()
                client.blocking()
                tally.blocking.append(time.perf_counter() - start)
            tally.blocking_connections.append(server.counts()[0] - before)
        finally:
            client.close()
    finally:
        server.stop()
    return tally


# -- the report ---------------------------------------------------------------------


def _span(values: list[int]) -> str:
    low, high = min(values), max(values)
    return str(low) if low == high else f"{low} to {high}"


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.2f}"


def time_handshakes(
    server: ServerProcess, ca_path: str, count: int = 20
) -> tuple[list[float], str]:
    """Seconds for `count` bare TCP connects + TLS handshakes to a fresh server, and the version."""
    context = ssl.create_default_context(cafile=ca_path)
    url = server.start()
    port = int(url.rsplit(":", 1)[1].split("/", 1)[0])
    seconds = []
    version = "?"
    try:
        for _ in range(count):
            start = time.perf_counter()
            with socket.create_connection(("127.0.0.1", port)) as raw:
                with context.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
                    seconds.append(time.perf_counter() - start)
                    version = tls.version() or "?"
    finally:
        server.stop()
    return seconds, version


def report(
    tallies: list[Tally],
    handshakes: tuple[list[float], str],
    notes: list[str],
    args: argparse.Namespace,
) -> str:
    rows = []
    verdicts = []
    for t in tallies:
        first, later = statistics.median(t.first), statistics.median(t.later)
        blocking = statistics.median(t.blocking)
        rows.append(
            [
                t.label,
                _span(t.connections),
                _span(t.handshakes),
                _ms(first),
                _ms(later),
                _ms(blocking),
                f"{later / blocking:.2f}x",
            ]
        )
        one = max(t.connections) == 1
        fast = later <= blocking
        verdicts.append(
            f"- {t.label.split(':')[0]}: "
            + ("**one connection for all streams**" if one else "**a connection per stream**")
            + f" ({_span(t.connections)} for {args.streams}); later first chunk "
            + ("within" if fast else "**slower than**")
            + f" a blocking call ({_ms(later)} vs {_ms(blocking)} ms)."
        )
    header = [
        "client",
        f"connections ({args.streams} streams)",
        "TLS handshakes",
        "first stream: ms to 1st chunk",
        "later streams: median ms to 1st chunk",
        "warm blocking call: median ms",
        "later / blocking",
    ]
    handshake, version = statistics.median(handshakes[0]), handshakes[1]
    lines = [
        stamp(),
        "",
        "A loopback HTTPS `ScriptedServer(tls=ctx)` with a certificate from a test CA made at "
        "run time (trustme), in a process of its own so that its Python work does not take the "
        "GIL from the client while it waits for a chunk. Each client, against a fresh server "
        "of its own, makes "
        f"{args.streams} sequential streamed calls (each a role frame, {args.deltas} content "
        "deltas, the finish chunk and `[DONE]`, one HTTP chunk per SSE event, consumed to the "
        f"end), then one untimed and {BLOCKING_CALLS} timed blocking calls answering the same "
        "text. The server counts the TCP connections it accepted and the TLS handshakes it "
        "completed during the streams. Time to first chunk runs from the call to the first "
        "content delta in the consumer's hands; the first stream's includes connect and "
        f"handshake. {args.rounds} interleaved rounds; times are medians over all rounds.",
        "",
        table(header, rows),
        "",
        "Goals (reported, not asserted): one connection for all the streams, and a later "
        "stream's first chunk no later than a warm blocking call's end.",
        "",
        *verdicts,
        "",
        f"A TCP connect plus {version} handshake alone (`ssl` on a bare socket, median of "
        f"{len(handshakes[0])}) takes {_ms(handshake)} ms on this loopback; to a remote gateway it "
        "adds a round trip or two on top, paid by every stream that opens a connection. "
        "The blocking calls after the streams opened "
        + ", ".join(f"{t.label.split(':')[0]} {_span(t.blocking_connections)}" for t in tallies)
        + f" new connection(s) in {BLOCKING_CALLS} calls.",
    ]
    lines += [f"\n{note}" for note in notes]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--streams", type=int, default=20, help="sequential streams per round")
    parser.add_argument("--rounds", type=int, default=7, help="interleaved rounds")
    parser.add_argument("--deltas", type=int, default=50, help="content deltas per stream")
    parser.add_argument("--no-write", action="store_true", help="do not update BENCHMARKS.md")
    args = parser.parse_args(argv)
    try:
        import trustme  # noqa: F401
    except ImportError:
        print("trustme is needed for the test CA: pip install -e '.[bench]'", file=sys.stderr)
        return 1

    expected = _replies(args.deltas)[2]

    makers: list[Callable[[str, str], Client | None]] = [llmchat_client, openai_client, raw_client]
    tallies: dict[int, Tally] = {}
    notes: list[str] = []
    with test_ca() as (server_pem, ca_path):
        server = ServerProcess(server_pem, args.deltas)
        try:
            with loopback_only():
                for _ in range(args.rounds):
                    for i, maker in enumerate(makers):
                        got = one_round(
                            lambda url, maker=maker: maker(url, ca_path),  # type: ignore[misc]
                            server,
                            args.streams,
                            expected,
                            tallies.get(i),
                        )
                        if got is not None:
                            tallies[i] = got
            handshakes = time_handshakes(server, ca_path)
        finally:
            server.close()
    if 1 not in tallies:
        notes.append(f"openai: {NOT_INSTALLED}")
    markdown = report([tallies[i] for i in sorted(tallies)], handshakes, notes, args)
    print(markdown)
    if not args.no_write:
        write_section(BENCHMARKS_MD, SECTION, markdown)
    return 0


if __name__ == "__main__":
    sys.exit(main())
