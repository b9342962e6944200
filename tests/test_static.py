"""The package type-checks under `mypy --strict` and passes `ruff`, as part of the suite.

Both run as the project's configuration says (setup.cfg's ``[mypy]``,
pyproject's ``[tool.ruff]``), from the checkout root, so a name without a
type or a lint finding fails the test run rather than waiting for review.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _run(module: str, *args: str) -> subprocess.CompletedProcess[str]:
    if importlib.util.find_spec(module) is None:
        pytest.skip(f"{module} is not installed (pip install -e '.[test]' brings it)")
    return subprocess.run(
        [sys.executable, "-m", module, *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def test_mypy_strict_is_clean() -> None:
    result = _run("mypy", "--no-error-summary", "--cache-dir", str(ROOT / ".mypy_cache"))
    assert result.returncode == 0, result.stdout + result.stderr


def test_ruff_is_clean() -> None:
    result = _run("ruff", "check", "--no-cache", "llmchat", "tests", "bench", "examples", "tools")
    assert result.returncode == 0, result.stdout + result.stderr
    result = _run(
        "ruff", "format", "--check", "--no-cache", "llmchat", "tests", "bench", "examples"
    )
    assert result.returncode == 0, result.stdout + result.stderr
