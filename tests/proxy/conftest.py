"""Fixtures for every proxy test: a scripted upstream, a backend on it, clients closed.

The proxy keeps connections alive, so a client's pool holds a socket until the client
is closed: every client a test makes (support.CLIENTS) is closed after it.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from llmchat import OpenAICommon
from llmchat.testing import ChatResponder, ScriptedServer

from .support import CLIENTS, TEXT


@pytest.fixture
def upstream_server():
    server = ScriptedServer(ChatResponder(TEXT, chunk_size=5)).start()
    yield server
    server.stop()


@pytest.fixture
def backend(upstream_server):
    with OpenAICommon(upstream_server.url, stream_finish_grace=5.0) as b:
        yield b


@pytest.fixture(autouse=True)
def _close_clients() -> Iterator[None]:
    yield
    while CLIENTS:
        CLIENTS.pop().close()
