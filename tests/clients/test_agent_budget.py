"""The real Claude Code and Codex against a key over its budget: each shows the 429 once.

The budget refusal is a 429 in Anthropic's shape with ``x-should-retry: false``
and ``retry-after`` (`proxy/budget_refusal.py`). A 403 would send Claude Code
to its login screen; a 429 without the header is retried, up to ten times over
minutes. Here the key's token budget is spent by one request first, then
Claude Code runs on its defaults: it must end with the budget's message, no
chat reaches the node, and each of its requests is refused once (a retry would
repeat one).

Codex (its Responses wire) retries a 429 after sleeping its ``retry-after``
(hours, for a daily budget) unless ``error.type`` is ``usage_limit_reached``,
which it shows and ends the turn on; the reason rides in the
``x-codex-promo-message`` header, which it prints inside its own sentence.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import requests

from llmchat.testing import ChatResponder, ScriptedServer

from ..support.proxy_servers import ServedProxy
from .routed_proxy import routed_proxy
from .support import bin_path
from .test_agent_claude_code import run_claude
from .test_agent_codex import run_codex

AGENT_KEY = "sk-agent-budget-0123"


def test_claude_code_shows_the_budget_429_and_does_not_retry(tmp_path: Path) -> None:
    claude = bin_path("@anthropic-ai/claude-code", "claude")
    node = ScriptedServer(ChatResponder())
    with node as node_url, spent_proxy(node_url, tmp_path) as proxy:
        run = run_claude(claude, proxy.url, tmp_path, key=AGENT_KEY)
        shown = run.done.stdout + run.done.stderr
        assert run.done.returncode != 0, run
        assert "token budget" in shown, run
        events = events_after_the_run(proxy, "/v1/messages")
    # Claude Code's one turn, refused once: a retry would repeat it (ten times, by default).
    assert_refused_once(events)
    assert len([r for r in node.requests if r.method == "POST"]) == 1  # the spending one


def test_codex_shows_the_budget_429_and_does_not_retry(tmp_path: Path) -> None:
    node = ScriptedServer(ChatResponder())
    with node as node_url, spent_proxy(node_url, tmp_path) as proxy:
        run = run_codex(proxy.url, tmp_path, key=AGENT_KEY)
        assert run.returncode != 0, run.explain()
        # Codex's own sentence around the proxy's reason: "You've hit your usage limit.
        # This API key reached its token budget, or try again at <time>."
        assert "usage limit. This API key reached its token budget" in run.stdout, run.explain()
        events = events_after_the_run(proxy, "/v1/responses")
    # Codex's one turn, refused once: any other 429 it sleeps `retry-after` and retries.
    assert_refused_once(events)
    assert len([r for r in node.requests if r.method == "POST"]) == 1  # the spending one


@contextlib.contextmanager
def spent_proxy(node_url: str, tmp_path: Path) -> Iterator[ServedProxy]:
    """A routed proxy whose key ``agent`` has a 1-token budget, spent by one chat."""
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
        yield proxy


def events_after_the_run(proxy: ServedProxy, route: str) -> list[dict[str, Any]]:
    """The usage events for `route`, once every one of the agent's run is in."""
    # A last request after the run: its event comes after every one of the run's.
    listed = requests.get(
        proxy.url + "/v1/models", headers={"Authorization": f"Bearer {AGENT_KEY}"}, timeout=30
    )
    assert listed.status_code == 200
    proxy.usage.wait(1, route="/v1/models")
    return proxy.usage.wait(1, route=route)


def assert_refused_once(events: list[dict[str, Any]]) -> None:
    refused = [e for e in events if e["error_type"] == "budget"]
    assert all(e["status"] == 429 and e["key_id"] == "agent" for e in refused), refused
    assert len(refused) == len(events) == 1, events
