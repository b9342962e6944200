"""The load bench's servers, each in its own process(es): the upstream and the three proxies.

Every server is started as a real deployment would start it, from its command
line, with its logs sent to a file in the run's folder. `Server.cpu()` sums the
user and system CPU seconds of the server's process and all its children
(gunicorn's and uvicorn's workers), which psutil reads from the OS.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

import psutil

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
START_TIMEOUT = 120.0  # LiteLLM's proxy imports for tens of seconds on a busy machine
STOP_TIMEOUT = 10.0


def free_port() -> int:
    """A port nobody listens on now, for a server that must be told its port."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class Server:
    """One started server: its process, its port, what it is, and its CPU counter."""

    def __init__(
        self,
        name: str,
        argv: Sequence[str],
        port: int,
        log: Path,
        env: dict[str, str] | None = None,
        how: str = "",
        unset: Sequence[str] = (),
        tree: Path = ROOT,
    ) -> None:
        self.name, self.port, self.how, self.log = name, port, how, log
        self._log: IO[bytes] = log.open("wb")
        self.process = subprocess.Popen(
            list(argv),
            cwd=tree,  # `python -m llmchat` and gunicorn's app import that tree's llmchat
            env={
                **{name: value for name, value in os.environ.items() if name not in unset},
                **(env or {}),
            },
            stdin=subprocess.PIPE,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        self._wait_listening()
        self._tree = self._processes()

    def _wait_listening(self) -> None:
        """Block until the server accepts a connection (it has no other readiness signal)."""
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"{self.name} exited at start; see {self.log}")
            with (
                contextlib.suppress(OSError),
                socket.create_connection(("127.0.0.1", self.port), 1),
            ):
                return
            time.sleep(0.1)  # polling a subprocess's port: there is no event to wait on
        raise RuntimeError(
            f"{self.name} did not listen within {START_TIMEOUT:.0f} s; see {self.log}"
        )

    def _processes(self) -> list[psutil.Process]:
        root = psutil.Process(self.process.pid)
        return [root, *root.children(recursive=True)]

    def cpu(self) -> float:
        """CPU seconds (user + system) the server's processes have used so far."""
        total = 0.0
        for process in self._processes():
            with contextlib.suppress(psutil.NoSuchProcess):
                times = process.cpu_times()
                total += times.user + times.system
        return total

    @property
    def processes(self) -> int:
        return len(self._tree)

    def stop(self) -> None:
        """Close its stdin, then terminate it and its children; kill what does not stop."""
        tree = self._processes()
        with contextlib.suppress(OSError):
            if self.process.stdin is not None:
                self.process.stdin.close()
        for process in tree:
            with contextlib.suppress(psutil.NoSuchProcess):
                process.terminate()
        _, alive = psutil.wait_procs(tree, timeout=STOP_TIMEOUT)
        for process in alive:
            with contextlib.suppress(psutil.NoSuchProcess):
                process.kill()
        self._log.close()


def start_upstream(folder: Path) -> Server:
    """The upstream, `_load_upstream.py` in its own interpreter; it stops when its stdin closes."""
    port = free_port()
    argv = [sys.executable, str(HERE / "_load_upstream.py"), str(port)]
    return Server("upstream", argv, port, folder / "upstream.log")


def start_embedded(upstream: str, key: str, folder: Path, tree: Path) -> Server:
    """`llmchat proxy` on its own `make_server`, as the README runs it."""
    port = free_port()
    argv = [sys.executable, "-m", "llmchat", "proxy", "--upstream", upstream, "--port", str(port)]
    env = {"LLMCHAT_PROXY_KEY": key}
    how = "`llmchat proxy --upstream URL --port P`"
    return Server("embedded", argv, port, folder / "embedded.log", env, how=how, tree=tree)


def has_workers_option(tree: Path) -> bool:
    """Whether `tree`'s `llmchat proxy` runs gunicorn itself (``--workers``)."""
    help_text = subprocess.run(
        [sys.executable, "-m", "llmchat", "proxy", "--help"],
        cwd=tree,
        capture_output=True,
        text=True,
        check=False,
    ).stdout
    return "--workers" in help_text


def start_gunicorn(
    upstream: str,
    key: str,
    folder: Path,
    workers: int,
    threads: int,
    tree: Path,
    name: str = "gunicorn",
) -> Server:
    """The proxy under gunicorn's threaded workers: `llmchat proxy --workers` when this tree
    has it, else gunicorn run directly on `gunicorn_app()` below."""
    port = free_port()
    env = {"LLMCHAT_PROXY_KEY": key, "LLMCHAT_BENCH_UPSTREAM": upstream}
    sizes = ["--workers", str(workers), "--threads", str(threads)]
    if has_workers_option(tree):
        argv = [sys.executable, "-m", "llmchat", "proxy", "--upstream", upstream]
        argv += ["--port", str(port), *sizes]
        how = f"`llmchat proxy --upstream URL --port P --workers {workers} --threads {threads}`"
    else:
        argv = [sys.executable, "-m", "gunicorn", "-k", "gthread", *sizes]
        argv += ["--bind", f"127.0.0.1:{port}", "--pythonpath", str(HERE), "--log-level", "warning"]
        argv += [f"_load_paths:gunicorn_app({threads})"]
        how = (
            f"`gunicorn -k gthread --workers {workers} --threads {threads} "
            "'_load_paths:gunicorn_app()'` (this tree's `llmchat proxy` has no `--workers` yet)"
        )
    return Server(name, argv, port, folder / f"{name}.log", env, how=how, tree=tree)


def gunicorn_app(threads: int = 64) -> Any:
    """The WSGI app gunicorn serves when `llmchat proxy --workers` is not there to build it."""
    from llmchat import OpenAICommon
    from llmchat.proxy import make_app
    from llmchat.transport import DEFAULT_POOL_SIZE

    upstream = OpenAICommon(
        os.environ["LLMCHAT_BENCH_UPSTREAM"], pool_size=max(DEFAULT_POOL_SIZE, threads)
    )
    return make_app(upstream, api_key=os.environ["LLMCHAT_PROXY_KEY"])


LITELLM_CONFIG = """\
model_list:
  - model_name: {model}
    litellm_params:
      model: openai/{model}
      api_base: {upstream}
      api_key: x
litellm_settings:
  telemetry: false
  drop_params: true
  turn_off_message_logging: true
  callbacks: []
  success_callback: []
  failure_callback: []
general_settings:
  master_key: {key}
  disable_spend_logs: true
  disable_error_logs: true
  store_model_in_db: false
"""


def start_litellm(upstream: str, key: str, folder: Path, model: str, workers: int) -> Server:
    """LiteLLM's proxy (``litellm --config``) with no database, telemetry or request logging."""
    port = free_port()
    config = folder / "litellm.yaml"
    config.write_text(LITELLM_CONFIG.format(model=model, upstream=upstream, key=key))
    env = {
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "LITELLM_OFFLINE_MODE": "true",
        "LITELLM_LOG": "ERROR",
        "LITELLM_TELEMETRY": "False",
        "DISABLE_SCHEMA_UPDATE": "true",
    }
    litellm = Path(sys.executable).with_name("litellm")
    argv = [str(litellm), "--config", str(config), "--host", "127.0.0.1", "--port", str(port)]
    argv += ["--num_workers", str(workers)]
    how = f"`litellm --config cfg.yaml --port P --num_workers {workers}`"
    unset = ("DATABASE_URL", "REDIS_HOST", "REDIS_URL")  # no database, no cache: no spend logs
    return Server("litellm", argv, port, folder / "litellm.log", env, how=how, unset=unset)
