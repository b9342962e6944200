"""Where the examples send their requests: $LLMCHAT_API_URL, else an embedded server.

Not part of llmchat: a helper so every example runs as-is on a fresh machine.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

from llmchat.testing import ChatResponder, ScriptedServer


@contextlib.contextmanager
def server_url(text: str = "Paris is the capital of France.", delay: float = 0.0) -> Iterator[str]:
    """Yield an OpenAI-compatible base URL for the example to use.

    The embedded server answers `text`, streamed `delay` seconds per chunk.
    """
    configured = os.environ.get("LLMCHAT_API_URL")
    if configured:
        yield configured
        return
    with ScriptedServer(ChatResponder(text, chunk_size=6, delay=delay)) as url:
        yield url
