"""Fixtures for the face tests: the scripted upstream the Claude Code tests share.

A face test file that defines its own `upstream` fixture overrides this one.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from llmchat.testing import ChatResponder, ScriptedServer


@pytest.fixture
def upstream() -> Iterator[ScriptedServer]:
    server = ScriptedServer(ChatResponder("Hello there, from loopback.", chunk_size=5)).start()
    yield server
    server.stop()
