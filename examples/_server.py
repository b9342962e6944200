"""Where the examples send their requests: $LLMCHAT_API_URL, else an embedded server.

Not part of llmchat: a helper so every example runs as-is on a fresh machine.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

from llmchat.testing import ChatResponder, ScriptedServer


@contextlib.contextmanager
def server_url() -> Iterator[str]:
    """Yield an OpenAI-compatible base URL for the example to use."""
    configured = os.environ.get("LLMCHAT_API_URL")
    if configured:
        yield configured
        return
    with ScriptedServer(ChatResponder("Paris is the capital of France.")) as url:
        yield url
