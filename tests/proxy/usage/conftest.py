"""Fixtures for the usage tests: each store kind the suite runs against."""

from __future__ import annotations

from pathlib import Path

import pytest

from ...support.usage import KINDS, fresh_target


@pytest.fixture(params=KINDS)
def target(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh store of each kind (an SQLite file, a real PostgreSQL database)."""
    return fresh_target(request.param, tmp_path)
