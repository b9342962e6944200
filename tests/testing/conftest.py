"""The testing tests' rule: no server thread outlives its test."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest


@pytest.fixture(autouse=True)
def no_server_thread_outlives_its_test() -> Iterator[None]:
    yield
    alive = [t.name for t in threading.enumerate() if t.name.startswith("llmchat-testing")]
    assert alive == []
