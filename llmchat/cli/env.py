"""What every `llmchat` command reads from the environment the same way: API keys."""

from __future__ import annotations

import os

from ..redact import check_secret

__all__ = ["env_key"]


def env_key(name: str) -> str | None:
    """The key in environment variable `name`; a malformed one is refused naming the variable."""
    return check_secret(f"the {name} environment variable", os.environ.get(name) or None)
