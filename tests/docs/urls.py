"""The addresses the documentation shows, and where the tests send them instead.

The pages use the addresses a reader types: ``http://127.0.0.1:8080`` is a
llama-server (any OpenAI-compatible server), ``http://127.0.0.1:11434`` the
llmchat proxy (whose Ollama face also stands in for Ollama there), and the
services' own URLs. Under test the first goes to the loopback server
(`ChatResponder`), the others to a real llmchat proxy in front of it, whose
faces speak Anthropic, Gemini, Ollama and Responses.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator, Sequence

__all__ = ["ANSWER", "LLAMA_SERVER", "PROXIED", "doc_servers", "rewrite", "url_pairs"]

# What the loopback server answers every chat: what the examples print, too.
ANSWER = "Paris is the capital of France."

# OpenAI-compatible servers: the loopback server answers them directly.
LLAMA_SERVER = (
    "http://127.0.0.1:8080",
    "http://localhost:8080",
    "http://127.0.0.1:5001",  # KoboldCpp
    "http://localhost:5001",
    "https://openrouter.ai/api",
)
# Other dialects (and the proxy itself): the proxy's faces answer them.
PROXIED = (
    "http://127.0.0.1:11434",
    "http://localhost:11434",
    "https://api.anthropic.com",
    "https://generativelanguage.googleapis.com",
    "https://api.openai.com",
)


def url_pairs(loopback_root: str, proxy_root: str) -> list[tuple[str, str]]:
    """The rewrites: each documented address -> the test server's root (no trailing /)."""
    return [(url, loopback_root) for url in LLAMA_SERVER] + [(url, proxy_root) for url in PROXIED]


def rewrite(text: str, pairs: Sequence[tuple[str, str]]) -> str:
    """`text` with each documented address replaced (a longer port is never cut)."""
    for documented, actual in pairs:
        text = re.sub(re.escape(documented) + r"(?![0-9A-Za-z.-])", actual, text)
    return text


@contextlib.contextmanager
def doc_servers(answer: str = ANSWER) -> Iterator[list[tuple[str, str]]]:
    """The loopback llama-server answering `answer` and a real proxy over it; yield the rewrites."""
    from llmchat import OpenAICommon
    from llmchat.testing import ChatResponder, ScriptedServer

    from ..support.proxy import running_proxy

    with ScriptedServer(ChatResponder(answer, chunk_size=6)) as url:
        with OpenAICommon(url) as upstream, running_proxy(upstream) as proxy:
            yield url_pairs(url.removesuffix("/v1"), proxy)
