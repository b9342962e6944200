"""The real Claude Code against a key over its budget: it shows the 429 and does not retry.

The budget refusal is a 429 in Anthropic's shape with ``x-should-retry: false``
and ``retry-after`` (`proxy/budget_refusal.py`). A 403 would send Claude Code
to its login screen; a 429 without the header is retried, up to ten times over
minutes. Here the key's token budget is spent by one request first, then
Claude Code runs on its defaults: it must end with the budget's message, no
chat reaches the node, and each of its requests is refused once (a retry would
repeat one).
"""

from __future__ import annotations

from pathlib import Path

import requests

from llmchat.testing import ChatResponder, ScriptedServer

from .routed_proxy import routed_proxy
from .support import bin_path
from .test_agent_claude_code import run_claude

AGENT_KEY = "sk-claude-code-budget-0123"


def test_claude_code_shows_the_budget_429_and_does_not_retry(tmp_path: Path) -> None:
    claude = bin_path("@anthropic-ai/claude-code", "claude")
    node = ScriptedServer(ChatResponder())
    with node as node_url:
        config = {
            "nodes": [{"name": "n", "url": node_url}],
            "models": {"*": [{"model": "local", "nodes": ["n"]}]},
            "keys": [{"name": "agent", "key_env": "AGENT_KEY", "budget": {"tokens": 1}}],
        }
        with routed_proxy(config, {"AGENT_KEY": AGENT_KEY}, tmp_path) as proxy:
            spent = requests.post(
                proxy.url + "/v1/chat/completions",
                json={"model": "m", "messages": [{"role": "user", "content": "hi"}]},
                headers={"Authorization": f"Bearer {AGENT_KEY}"},
                timeout=30,
            )
            assert spent.status_code == 200, spent.text
            [first] = proxy.usage.wait(1, route="/v1/chat/completions")
            assert first["input_tokens"] or first["output_tokens"]
            run = run_claude(claude, proxy.url, tmp_path, key=AGENT_KEY)
            shown = run.done.stdout + run.done.stderr
            assert run.done.returncode != 0, run
            assert "token budget" in shown, run
            # A last request after the run: its event comes after every one of the run's.
            listed = requests.get(
                proxy.url + "/v1/models",
                headers={"Authorization": f"Bearer {AGENT_KEY}"},
                timeout=30,
            )
            assert listed.status_code == 200
            proxy.usage.wait(1, route="/v1/models")
            events = proxy.usage.wait(1, route="/v1/messages")
    refused = [e for e in events if e["error_type"] == "budget"]
    assert all(e["status"] == 429 and e["key_id"] == "agent" for e in refused), refused
    # Claude Code's one turn, refused once: a retry would repeat it (ten times, by default).
    assert len(refused) == len(events) == 1, events
    assert len([r for r in node.requests if r.method == "POST"]) == 1  # the spending one
