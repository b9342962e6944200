"""The proxy under each of its servers, for tests that must hold under both.

`serve_proxy("embedded", ...)` runs `make_server` in a thread of the test
process; `serve_proxy("gunicorn", ...)` runs ``python -m llmchat proxy
--workers 2 --threads 4`` in a subprocess, a real gunicorn master with real
forked workers. Either way the test gets a `ServedProxy`: the base URL and
the usage events (`usage.wait(n)`), which under gunicorn come through a FIFO
given as ``--usage-log``, so the test waits on the events themselves rather
than polling a file. Nothing here sleeps: readiness is the "serving" line on
stderr, then one `/health` request (the listen backlog holds it until a worker
is up).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import requests

from llmchat import OpenAICommon
from llmchat.proxy import make_app, make_server

from .paths import REPO_ROOT
from .proxy import UsageSink

SERVERS = ("embedded", "gunicorn")
WAIT = 10.0
ROOT = REPO_ROOT


@dataclass
class ServedProxy:
    server: str
    """``embedded`` or ``gunicorn``."""
    url: str
    usage: UsageSink
    log: ProcessLog | None = None
    """The gunicorn process's stderr, line by line (None for the embedded server)."""
    process: subprocess.Popen[str] | None = field(default=None, repr=False)


class ProcessLog:
    """A subprocess's stderr, read by a thread; `wait_for(text)` blocks until a line has it."""

    def __init__(self, stream: Any) -> None:
        self.lines: list[str] = []
        self._cond = threading.Condition()
        self._thread = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self._thread.start()

    def _read(self, stream: Any) -> None:
        for line in stream:
            with self._cond:
                self.lines.append(line)
                self._cond.notify_all()
        stream.close()

    def wait_for(self, text: str, timeout: float = WAIT) -> str:
        def found() -> str | None:
            return next((line for line in self.lines if text in line), None)

        with self._cond:
            if not self._cond.wait_for(lambda: found() is not None, timeout):
                raise AssertionError(f"no {text!r} on stderr within {timeout} s: {self.text}")
            line = found()
        assert line is not None
        return line

    def join(self) -> None:
        self._thread.join(WAIT)

    @property
    def text(self) -> str:
        with self._cond:
            return "".join(self.lines)


class FifoUsage:
    """A FIFO standing in for the usage log: each JSON line written to it lands in `sink`.

    Opened read-write, so writers never block on open and the reader never
    sees end-of-file between the proxy's appends. A line that is not one
    whole JSON object is kept in `broken` (a torn append would show up there).
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        os.mkfifo(path)
        self.sink = UsageSink()
        self.broken: list[bytes] = []
        self._fd = os.open(path, os.O_RDWR)
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        pending = b""
        while True:
            pending += os.read(self._fd, 65536)
            *lines, pending = pending.split(b"\n")
            for line in lines:
                if line == b"STOP":
                    return
                try:
                    self.sink(json.loads(line))
                except ValueError:
                    self.broken.append(line)

    def close(self) -> None:
        os.write(self._fd, b"STOP\n")
        self._thread.join(WAIT)
        os.close(self._fd)


@contextlib.contextmanager
def serve_proxy(
    server: str,
    upstream_url: str,
    tmp_path: Path,
    *,
    api_key: str | None = None,
    max_body_bytes: int | None = None,
    usage_log: Path | None = None,
    gunicorn_args: tuple[str, ...] = ("--workers", "2", "--threads", "4"),
    limits: dict[str, Any] | None = None,
) -> Iterator[ServedProxy]:
    """The proxy over `upstream_url` on `server`; usage to `usage_log` if given, else to a sink.

    `limits` are `make_server`'s deadlines (``header_timeout``, ``body_timeout``,
    ``send_timeout``), given to gunicorn as the same command-line flags.
    """
    limits = limits or {}
    if server == "embedded":
        with _embedded(upstream_url, api_key, max_body_bytes, usage_log, limits) as served:
            yield served
    elif server == "gunicorn":
        flags = [f"--{name.replace('_', '-')}={value}" for name, value in limits.items()]
        with _gunicorn(
            upstream_url,
            tmp_path,
            api_key,
            max_body_bytes,
            usage_log,
            (*gunicorn_args, *flags),
        ) as served:
            yield served
    else:
        raise ValueError(f"server must be one of {SERVERS}, got {server!r}")


@contextlib.contextmanager
def _embedded(
    upstream_url: str,
    api_key: str | None,
    max_body_bytes: int | None,
    usage_log: Path | None,
    limits: dict[str, Any],
) -> Iterator[ServedProxy]:
    sink = UsageSink()
    options: dict[str, Any] = {"usage_log": usage_log or sink, "api_key": api_key}
    if max_body_bytes is not None:
        options["max_body_bytes"] = max_body_bytes
    with OpenAICommon(upstream_url) as backend:
        server = make_server(make_app(backend, **options), "127.0.0.1", 0, **limits)
        thread = threading.Thread(target=server.serve_forever, name="test-proxy", daemon=True)
        thread.start()
        try:
            yield ServedProxy("embedded", server.url, sink)
        finally:
            server.shutdown()
            server.server_close()
            thread.join(WAIT)


@contextlib.contextmanager
def _gunicorn(
    upstream_url: str,
    tmp_path: Path,
    api_key: str | None,
    max_body_bytes: int | None,
    usage_log: Path | None,
    gunicorn_args: tuple[str, ...],
) -> Iterator[ServedProxy]:
    fifo = None if usage_log is not None else FifoUsage(tmp_path / "usage.fifo")
    log_path = usage_log if fifo is None else fifo.path
    command = [sys.executable, "-m", "llmchat", "proxy", "--upstream", upstream_url]
    command += ["--port", "0", "--usage-log", str(log_path), *gunicorn_args]
    if max_body_bytes is not None:
        command += ["--max-body-bytes", str(max_body_bytes)]
    env = {k: v for k, v in os.environ.items() if not k.startswith("LLMCHAT_")}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    if api_key is not None:
        env["LLMCHAT_PROXY_KEY"] = api_key
    process = subprocess.Popen(command, stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT)
    log = ProcessLog(process.stderr)
    try:
        line = log.wait_for("llmchat proxy: serving ")
        url = line.split("serving ", 1)[1].split(" ", 1)[0]
        # One request proves a worker is up: the listen backlog holds it till then.
        assert requests.get(url + "/health", timeout=WAIT).status_code == 200
        sink = fifo.sink if fifo is not None else UsageSink()
        yield ServedProxy("gunicorn", url, sink, log, process)
    finally:
        stop(process)
        log.join()
        if fifo is not None:
            fifo.close()
    assert process.returncode == 0, log.text
    assert "Traceback" not in log.text, log.text
    assert fifo is None or not fifo.broken, fifo.broken


def stop(process: subprocess.Popen[str], sig: int = signal.SIGTERM) -> None:
    """Stop gunicorn with `sig` (SIGTERM: graceful) and reap it; killed if it will not go."""
    if process.poll() is None:
        process.send_signal(sig)
    try:
        process.wait(timeout=WAIT + 30)  # a graceful stop may wait out a kept-alive connection
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def read_to_end(sock: socket.socket) -> bytes:
    """Everything until the server closes; a reset counts as closed."""
    data = b""
    while True:
        try:
            chunk = sock.recv(65536)
        except ConnectionResetError:
            return data
        if not chunk:
            return data
        data += chunk


def parse_answer(raw: bytes) -> tuple[int, dict[str, str], Any]:
    """A whole answer with a JSON body: its status, headers (lower-cased names) and body."""
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = {
        k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])
    }
    assert int(headers["content-length"]) == len(body)
    return status, headers, json.loads(body)
