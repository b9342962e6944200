"""``python -m llmchat proxy --config FILE`` in a subprocess, as a user starts a routed proxy.

The config is written as YAML (what the README shows); the keys' and nodes'
secrets are given in the environment variables it names, and nothing else
of the test's environment named ``LLMCHAT_*`` reaches the proxy. Readiness is
the ``serving`` line on stderr, then one ``/health`` request; usage events
come through a FIFO given as ``--usage-log`` (`ServedProxy.usage.wait(n)`),
so nothing here sleeps.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import requests
import yaml

from ..support.paths import REPO_ROOT
from ..support.proxy_servers import FifoUsage, ProcessLog, ServedProxy

WAIT = 30.0


@contextlib.contextmanager
def routed_proxy(
    config: Mapping[str, Any], env: Mapping[str, str], tmp_path: Path, *options: str
) -> Iterator[ServedProxy]:
    """The proxy serving `config` (written to tmp_path/routing.yaml) with `env`'s secrets."""
    path = tmp_path / "routing.yaml"
    path.write_text(yaml.safe_dump(dict(config), sort_keys=False))
    usage = FifoUsage(tmp_path / "usage.fifo")
    environ = {k: v for k, v in os.environ.items() if not k.startswith("LLMCHAT_")}
    environ["PYTHONPATH"] = os.pathsep.join(
        filter(None, [str(REPO_ROOT), environ.get("PYTHONPATH")])
    )
    environ.update(env)
    command = [sys.executable, "-m", "llmchat", "proxy", "--config", str(path)]
    command += ["--host", "127.0.0.1", "--port", "0", "--usage-log", str(usage.path), *options]
    process = subprocess.Popen(
        command, env=environ, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    log = ProcessLog(process.stderr)
    try:
        line = log.wait_for("llmchat proxy: serving http://", WAIT)
        url = line.split("serving ", 1)[1].split()[0]
        assert requests.get(url + "/health", timeout=WAIT).status_code == 200, log.text
        yield ServedProxy("routed", url, usage.sink, log, process)
    finally:
        process.terminate()
        try:
            process.wait(timeout=WAIT)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=WAIT)
        log.join()
        usage.close()
