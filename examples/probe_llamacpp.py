"""Ask a llama.cpp server for its per-slot context size and slot count.

    python examples/probe_llamacpp.py
    LLMCHAT_API_URL=http://127.0.0.1:8080/v1 python examples/probe_llamacpp.py

Never raises and never takes longer than `server_probe_timeout` (3 s by
default): a server that is down or not llama.cpp gives a `note` instead.
"""

from __future__ import annotations

from _server import server_url

from llmchat import OpenAICommon

with server_url() as url:
    backend = OpenAICommon(url, server_probe_timeout=2.0)
    limits = backend.probe_server_limits()
    if "context_length" in limits:
        print(
            f"{limits['source']}: {limits['context_length']} tokens per slot, "
            f"{limits.get('slots', '?')} slots"
        )
    else:
        print(f"{limits['source']}: nothing learnt ({limits['note']})")
    backend.close()
