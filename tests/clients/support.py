"""The real JavaScript clients and agent CLIs the faces are tested with (tests/js/, pinned).

`.ci/run` installs them with `npm ci --prefix tests/js`; a developer runs the
same. Where node or the packages are missing, the tests that need them skip and
say which, so a missing part is never a silent pass.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from ..support.paths import JS_DIR

NODE_MODULES = JS_DIR / "node_modules"
INSTALL_HINT = "run `npm ci --prefix tests/js` (what .ci/run does)"


def node() -> str:
    """The node binary, or skip saying it is missing."""
    found = shutil.which("node")
    if found is None:
        pytest.skip("node is not installed; the JavaScript client tests need Node.js 20+")
    return found


def package_dir(name: str) -> Path:
    """tests/js/node_modules/<name>, or skip saying it is not installed."""
    node()
    path = NODE_MODULES / name
    if not (path / "package.json").is_file():
        pytest.skip(f"npm package {name} is not installed; {INSTALL_HINT}")
    return path


def pinned_version(name: str) -> str:
    """The version tests/js/package.json pins for `name`."""
    pins: dict[str, str] = json.loads((JS_DIR / "package.json").read_text())["dependencies"]
    return pins[name]


def bin_path(package: str, command: str) -> str:
    """An installed package's command (node_modules/.bin/<command>), or skip."""
    package_dir(package)
    path = NODE_MODULES / ".bin" / command
    if not path.exists():
        pytest.skip(f"{package} installed without its {command} command; {INSTALL_HINT}")
    return str(path)


def run_cli(
    command: list[str], cwd: Path, env: dict[str, str], timeout: float
) -> tuple[subprocess.CompletedProcess[str], float]:
    """Run an agent CLI to its end with no stdin; its result and how many seconds it took."""
    started = time.monotonic()
    done = subprocess.run(
        command,
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    return done, time.monotonic() - started


def run_node_script(
    script: str, env: dict[str, str], *, timeout: float = 60.0
) -> subprocess.CompletedProcess[str]:
    """Run an ES module script (given as text) with node in tests/js, so its imports resolve."""
    return subprocess.run(
        [node(), "--input-type=module", "-e", script],
        cwd=JS_DIR,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def node_json(script: str, env: dict[str, str], *, timeout: float = 60.0) -> Any:
    """Run a script whose last stdout line is JSON; that value (failing with its stderr if not)."""
    done = run_node_script(script, env, timeout=timeout)
    lines = done.stdout.strip().splitlines()
    assert done.returncode == 0 and lines, (
        f"node exited {done.returncode}\nstdout:\n{done.stdout}\nstderr:\n{done.stderr}"
    )
    return json.loads(lines[-1])
