"""Contenders and servers in processes of their own, for the stream benches.

`stream_server` starts `_stream_server.py` (the server of a throughput bench,
out of the client's interpreter). `ChildContender` runs one client in a child
interpreter, started with an environment of its own (``LLMCHAT_JSON=stdlib``
forces the stdlib parser whatever a module bound at import): each call asks the
child for one stream and returns the child's own timing as an `Elapsed`, so it
interleaves with the in-process contenders in `interleaved_rounds`. The child
also reports its process CPU time per stream.

The child side:

    python bench/_child_client.py MODULE:FUNCTION [JSON_KWARGS]

``MODULE.FUNCTION(**kwargs)`` returns ``(run, check)``: `run()` streams once and
returns what it read, `check(result)` returns None or what is wrong with it
(called outside the timing). The child prints ``@@bench ready {...}``, then for
each line ``N`` on its stdin runs N streams and prints ``@@bench {"seconds": …,
"cpu": …, "errors": [...], "results": [...]}`` (seconds and CPU per stream; the
results `run` returned that are dicts); EOF ends it.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import IO, Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _report import ROOT, Elapsed  # noqa: E402

MARK = "@@bench "
START_TIMEOUT = 60.0


# -- the parent's side --------------------------------------------------------------


def free_port() -> int:
    """A port nobody listens on now, for a server that must be told its port."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class StreamServer:
    """`_stream_server.py` in its own process; `url` is its root; `stop()` ends it."""

    def __init__(self, target: str, kwargs: dict[str, Any] | None = None) -> None:
        self.port = free_port()
        argv = [sys.executable, str(HERE / "_stream_server.py"), str(self.port), target]
        argv.append(json.dumps(kwargs or {}))
        self.process = subprocess.Popen(
            argv, cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        assert self.process.stdout is not None
        line = self.process.stdout.readline()  # the port, once it listens
        if not line.strip():
            self.stop()
            raise RuntimeError(f"the stream server ({target}) did not start")
        self.url = f"http://127.0.0.1:{self.port}"

    def log(self, since: int = 0) -> list[dict[str, Any]]:
        """What the server did for each request from the `since`-th on (see `_stream_server`)."""
        with urllib.request.urlopen(f"{self.url}/_bench/log?since={since}", timeout=10) as r:
            entries: list[dict[str, Any]] = json.loads(r.read())
        return entries

    def stop(self) -> None:
        with contextlib.suppress(OSError):
            if self.process.stdin is not None:
                self.process.stdin.close()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        if self.process.stdout is not None:
            self.process.stdout.close()

    def __enter__(self) -> StreamServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


class ChildContender:
    """One client in a child interpreter; calling it streams once there (see the module doc)."""

    def __init__(self, target: str, kwargs: dict[str, Any], env: dict[str, str]) -> None:
        argv = [sys.executable, str(HERE / "_child_client.py"), target, json.dumps(kwargs)]
        self.process = subprocess.Popen(
            argv,
            cwd=ROOT,
            env={**os.environ, **env},
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self.cpu: list[float] = []
        """Process CPU seconds (user + system, every thread) of each stream."""
        self.errors: list[str] = []
        self.streams = 0
        self.last: list[Any] = []
        """What the last call's streams returned, where `run` returned a dict."""
        self.info: dict[str, Any] = self._read()

    def _read(self) -> dict[str, Any]:
        stdout: IO[str] | None = self.process.stdout
        assert stdout is not None
        for line in stdout:
            if line.startswith(MARK):
                text = line[len(MARK) :]
                if text.startswith("ready "):
                    text = text[6:]
                found: dict[str, Any] = json.loads(text)
                return found
        raise RuntimeError(f"the child client exited ({self.process.wait()})")

    def __call__(self, count: int = 1) -> Elapsed:
        assert self.process.stdin is not None
        self.process.stdin.write(f"{count}\n")
        self.process.stdin.flush()
        report = self._read()
        self.streams += count
        self.cpu.append(report["cpu"])
        self.errors += report["errors"]
        self.last = report["results"]
        return Elapsed(report["seconds"])

    def close(self) -> None:
        with contextlib.suppress(OSError):
            if self.process.stdin is not None:
                self.process.stdin.close()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        if self.process.stdout is not None:
            self.process.stdout.close()


# -- the child's side ----------------------------------------------------------------


def main() -> int:
    target = sys.argv[1]
    kwargs = json.loads(sys.argv[2]) if len(sys.argv) > 2 else {}
    module, _, function = target.partition(":")
    run, check = getattr(importlib.import_module(module), function)(**kwargs)
    from llmchat import fastjson

    print(MARK + "ready " + json.dumps({"parser": fastjson.active()}), flush=True)
    for line in sys.stdin:
        count = int(line)
        results = []
        cpu_start, start = time.process_time(), time.perf_counter()
        for _ in range(count):
            results.append(run())
        seconds, cpu = time.perf_counter() - start, time.process_time() - cpu_start
        errors = [problem for problem in map(check, results) if problem is not None]
        report = {
            "seconds": seconds / count,
            "cpu": cpu / count,
            "errors": errors,
            "results": [result for result in results if type(result) is dict],
        }
        print(MARK + json.dumps(report), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
