"""Shared test helpers: where the golden vectors and captures live."""

from __future__ import annotations

from pathlib import Path

from hypothesis import settings

# No per-example deadline: a loaded CI machine must not turn speed into failures.
settings.register_profile("llmchat", deadline=None)
settings.load_profile("llmchat")

REPO_ROOT = Path(__file__).resolve().parent.parent
SHARED = REPO_ROOT.parent / "shared"
CONFORMANCE_DIR = SHARED / "conformance"
CAPTURES_DIR = SHARED / "captures"


def pytest_report_header(config: object) -> str:
    """Say up front whether the real llama-server tests (tests/real) will run."""
    from .real.server import find_binary

    path, why = find_binary()
    if path is None:
        return f"real llama-server tests: SKIPPED ({why})"
    return f"real llama-server tests: RUN with {path} ({why})"
