"""`llmchat proxy --config F --workers 2`: a node's ``max_conns`` holds across the workers.

A real gunicorn arbiter in a subprocess, two workers, over a loopback node in
this process that holds chats at per-message gates and records how many were
inside at once. ``--max-connections`` equal to ``--threads`` keeps each worker
to that many client connections, so more concurrent clients than one worker
takes land on the other one. Which worker holds a slot is read from the
kernel's lock table (``/proc/locks``), to kill exactly that one.
"""

from __future__ import annotations

import contextlib
import os
import queue
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest

from ..proxy.routing.nodes_support import Node, nodes
from ..proxy.routing.test_slots import Held
from ..support.paths import REPO_ROOT

WAIT = 20.0

pytestmark = [
    pytest.mark.skipif(not Path("/proc/locks").exists(), reason="reads the kernel's lock table"),
    pytest.mark.skipif(not hasattr(signal, "SIGHUP"), reason="POSIX signals"),
]


def _config(node: Node, max_conns: int) -> str:
    # "fast" refuses at once when no slot is free; "slow" waits up to 20 s for one.
    return (
        f'nodes:\n  - {{name: a, url: "{node.url}", max_conns: {max_conns}}}\n'
        "models:\n"
        "  fast: [{model: x, nodes: [a], wait_ms: 0}]\n"
        "  slow: [{model: x, nodes: [a]}]\n"
        "routing: {wait_timeout_ms: 20000}\n"
    )


_COMMAND = (
    *(sys.executable, "-m", "llmchat", "proxy"),
    *("--workers", "2", "--threads", "2", "--max-connections", "2"),
)


class Proxy:
    """`llmchat proxy --config F --workers 2` in a subprocess; its stderr read by a thread."""

    def __init__(self, config: Path, tmp: Path) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("LLMCHAT_")}
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
        env["TMPDIR"] = str(tmp)  # where the arbiter makes its ledger
        self.tmp = tmp
        self.process = subprocess.Popen(
            [*_COMMAND, "--config", str(config), "--port", "0"],
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        self.lines: queue.Queue[str] = queue.Queue()
        self.backlog: list[str] = []
        self.reader = threading.Thread(target=self._read)
        self.reader.start()
        line = self.wait_for("llmchat proxy: serving http://")
        self.url = line.split("serving ", 1)[1].split()[0]
        self.booted = [self.booted_pid() for _ in range(2)]

    def _read(self) -> None:
        for line in self.process.stderr or ():
            self.lines.put(line)

    def wait_for(self, text: str) -> str:
        """The first stderr line holding `text` not yet returned, in the order written
        (queue.Empty after WAIT s of nothing new)."""
        for i, line in enumerate(self.backlog):
            if text in line:
                return self.backlog.pop(i)
        while True:
            line = self.lines.get(timeout=WAIT)
            if text in line:
                return line
            self.backlog.append(line)

    def booted_pid(self) -> int:
        return int(self.wait_for("Booting worker with pid:").rsplit(":", 1)[1])

    def ledger(self) -> Path:
        [directory] = self.tmp.glob("llmchat-slots-*")
        return directory

    def holders(self) -> set[int]:
        """The pids holding a flock on a ledger file."""
        inodes = {path.stat().st_ino for path in self.ledger().iterdir()}
        pids = set()
        for line in Path("/proc/locks").read_text().splitlines():
            parts = line.split()
            if len(parts) > 5 and parts[1] == "FLOCK" and parts[4].isdigit():
                if int(parts[5].rsplit(":", 1)[1]) in inodes:
                    pids.add(int(parts[4]))
        return pids

    def stop(self) -> int:
        """SIGTERM (gunicorn's graceful stop), then the exit status; killed if still up."""
        process = self.process
        if process.poll() is None:
            process.terminate()
        try:
            status = process.wait(timeout=WAIT)
        except subprocess.TimeoutExpired:
            process.kill()
            status = process.wait(timeout=WAIT)
        self.reader.join(timeout=WAIT)
        stderr = process.stderr
        if stderr is not None:
            stderr.close()
        return status


def _client(url: str) -> Any:
    from ..proxy.support import CLIENTS

    client = openai.OpenAI(base_url=url + "/v1", api_key="k", max_retries=0, timeout=WAIT)
    CLIENTS.append(client)
    return client


def _send(url: str, model: str, text: str, out: dict[str, Any]) -> threading.Thread:
    """One chat on its own connection, on a thread; `out[text]`: its status or error class."""

    def run() -> None:
        messages = [{"role": "user", "content": text}]
        try:
            raw = _client(url).chat.completions.with_raw_response.create(
                model=model, messages=messages
            )
            out[text] = raw.status_code
        except openai.APIStatusError as exc:
            out[text] = exc.status_code
        except openai.APIConnectionError as exc:
            out[text] = type(exc).__name__

    thread = threading.Thread(target=run)
    thread.start()
    return thread


def _serve(tmp_path: Path, node: Node, max_conns: int) -> tuple[Proxy, Path]:
    config = tmp_path / "routes.yaml"
    config.write_text(_config(node, max_conns))
    proxy_tmp = tmp_path / "tmp"
    proxy_tmp.mkdir()
    return Proxy(config, proxy_tmp), config


def test_max_conns_holds_across_two_workers(tmp_path: Path) -> None:
    with nodes("a") as (a,):
        held = Held(a)
        proxy, _ = _serve(tmp_path, a, max_conns=2)
        try:
            out: dict[str, Any] = {}
            threads = []
            for text in ("r1", "r2"):
                held.gate(text)
                threads.append(_send(proxy.url, "slow", text, out))
                assert a.entered.acquire(timeout=WAIT)
            # Two more clients than slots: refused at once ("fast"), whichever worker they
            # reached; one more waits ("slow") and is served once a slot is given back.
            for text in ("r3", "r4"):
                _send(proxy.url, "fast", text, out).join(WAIT)
                assert out[text] == 429
            threads.append(_send(proxy.url, "slow", "r5", out))
            held.open_all()
            for thread in threads:
                thread.join(WAIT)
            assert out == {"r1": 200, "r2": 200, "r3": 429, "r4": 429, "r5": 200}
            assert held.peak == 2 and a.chats == 3
            ledger = proxy.ledger()
            assert proxy.stop() == 0
            assert not ledger.exists()  # the arbiter cleans up on its way out
        finally:
            proxy.stop()


Sent = tuple[threading.Thread, int]


@contextlib.contextmanager
def _one_held(tmp_path: Path) -> Iterator[tuple[Node, Held, Proxy, dict[str, Any], Sent]]:
    """Two workers over node a (max_conns 1), chat r1 held inside it: the node, its gates,
    the proxy, the outcomes, and r1's thread with the pid of the worker holding its slot."""
    with nodes("a") as (a,):
        held = Held(a)
        proxy, _ = _serve(tmp_path, a, max_conns=1)
        try:
            out: dict[str, Any] = {}
            held.gate("r1")
            first = _send(proxy.url, "slow", "r1", out)
            assert a.entered.acquire(timeout=WAIT)
            [holder] = proxy.holders()
            assert holder in proxy.booted
            yield a, held, proxy, out, (first, holder)
        finally:
            held.open_all()
            proxy.stop()


def test_a_killed_worker_gives_its_slots_back(tmp_path: Path) -> None:
    with _one_held(tmp_path) as (a, held, proxy, out, (first, holder)):
        os.kill(holder, signal.SIGKILL)  # mid-request: no clean-up of its own
        first.join(WAIT)
        assert out["r1"] == "APIConnectionError"
        # r1 is still inside the node (its gate is shut), but its slot is free again.
        second = _send(proxy.url, "slow", "r2", out)
        assert a.entered.acquire(timeout=WAIT)
        held.open_all()
        second.join(WAIT)
        assert out["r2"] == 200


def test_the_ledger_holds_across_a_reload_and_takes_the_new_max_conns(tmp_path: Path) -> None:
    with _one_held(tmp_path) as (a, held, proxy, out, (first, holder)):
        threads = [first]
        config = tmp_path / "routes.yaml"
        [idle] = set(proxy.booted) - {holder}
        config.write_text(_config(a, max_conns=2))
        proxy.process.send_signal(signal.SIGHUP)
        new = {proxy.booted_pid(), proxy.booted_pid()}
        proxy.wait_for(f"Worker exiting (pid: {idle})")
        # The old worker still serves r1 in its slot; the new ones (max_conns 2) count it.
        held.gate("r2")
        threads.append(_send(proxy.url, "fast", "r2", out))
        assert a.entered.acquire(timeout=WAIT)
        holders = proxy.holders()
        assert holder in holders and len(holders & new) == 1 and holders <= {holder} | new
        _send(proxy.url, "fast", "r3", out).join(WAIT)
        assert out["r3"] == 429
        held.open_all()
        for thread in threads:
            thread.join(WAIT)
        assert out == {"r1": 200, "r2": 200, "r3": 429}
        assert held.peak == 2 and a.chats == 2
