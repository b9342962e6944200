"""Fixtures shared by the transport tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from llmchat.transport import RequestsTransport


@pytest.fixture
def transport() -> Iterator[RequestsTransport]:
    """A fresh `RequestsTransport` (its own pool), closed after the test."""
    made = RequestsTransport()
    yield made
    made.close()
