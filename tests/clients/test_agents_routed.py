"""The real agents through a routed proxy (``llmchat proxy --config``) to nodes of other dialects.

Claude Code (the Anthropic face) is served by a Gemini node, Codex (the
Responses face) by an Ollama node and by a Gemini 3 node (which, like Google's,
refuses a replayed function call without its signature): the agent's turn is
translated twice,
into the node's wire and back, while the agent runs on its defaults and its
key is a client key of the config with a model policy. Each run asserts what
the one-upstream agent tests assert (the file written by the agent's own
tool, the tool's output back upstream, the final text) plus what routing adds:
the node and alias in the usage events, the client key's name as ``key_id``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from llmchat.testing import ScriptedServer

from ..support.agent_upstream import AgentUpstream, shell_plan
from .dialect_agents import GeminiAgent, OllamaAgent
from .routed_proxy import routed_proxy
from .support import bin_path
from .test_agent_claude_code import FINAL, assert_task_done, plan, run_claude
from .test_agent_codex import COMMAND, SHELL_TOOLS, run_codex
from .test_agent_codex import assert_task_done as assert_codex_done

CLAUDE_KEY = "sk-claude-code-client-0123"
CODEX_KEY = "sk-codex-client-4567"
NODE_KEY = "node-secret-89ab"


def config(node: dict[str, Any], models: dict[str, Any], allowed: list[str]) -> dict[str, Any]:
    """One node, its aliases, and two client keys: the agent's (`allowed`) and one for all."""
    return {
        "nodes": [node],
        "models": models,
        "keys": [
            {"name": "agent", "key_env": "AGENT_KEY", "models": allowed},
            {"name": "ops", "key_env": "OPS_KEY"},
        ],
        "routing": {"wait_timeout_ms": 2000, "affinity": "prefix"},
    }


def serving(script: AgentUpstream) -> Iterator[tuple[Any, ScriptedServer]]:
    """`script` on a loopback server for one test."""
    server = ScriptedServer(script).start()
    try:
        yield script, server
    finally:
        server.stop()


@pytest.fixture
def gemini() -> Iterator[tuple[GeminiAgent, ScriptedServer]]:
    yield from serving(GeminiAgent(["Bash"], plan, final=FINAL))


@pytest.mark.parametrize(
    ("upstream_model", "workers"),
    [
        pytest.param("gemini-2.5-flash", (), id="gemini-2.5"),
        pytest.param("gemini-3-flash-preview", (), id="gemini-3"),
        pytest.param(
            "gemini-3-flash-preview", ("--workers", "1", "--threads", "4"), id="gemini-3-gunicorn"
        ),
    ],
)
def test_claude_code_served_by_a_gemini_node(
    gemini: tuple[GeminiAgent, ScriptedServer],
    tmp_path: Path,
    upstream_model: str,
    workers: tuple[str, ...],
) -> None:
    claude = bin_path("@anthropic-ai/claude-code", "claude")
    if workers:
        pytest.importorskip("gunicorn")
    script, server = gemini
    node = {
        "name": "gem",
        "url": server.root + "/v1beta",
        "dialect": "gemini",
        "api_key_env": "GEM_NODE_KEY",
    }
    models = {"claude-*": [{"model": upstream_model, "nodes": ["gem"]}]}
    env = {"AGENT_KEY": CLAUDE_KEY, "OPS_KEY": "sk-ops", "GEM_NODE_KEY": NODE_KEY}
    with routed_proxy(config(node, models, ["claude-*"]), env, tmp_path, *workers) as proxy:
        run = run_claude(claude, proxy.url, tmp_path, key=CLAUDE_KEY)
        assert_task_done(run, script)
        events = proxy.usage.wait(len(script.chat_requests))
    chats = [r for r in server.requests if r.method == "POST"]
    assert {r.path.partition(":")[0] for r in chats} == {f"/v1beta/models/{upstream_model}"}
    assert {r.headers.get("x-goog-api-key") for r in chats} == {NODE_KEY}  # never the client's
    assert all(CLAUDE_KEY not in str(r.headers) for r in server.requests)
    served = [e for e in events if e.get("node") == "gem"]
    assert served and {e["key_id"] for e in served} == {"agent"}
    assert all(e["alias"].startswith("claude-") for e in served), served


@pytest.fixture
def ollama() -> Iterator[tuple[OllamaAgent, ScriptedServer]]:
    yield from serving(OllamaAgent(SHELL_TOOLS, shell_plan(COMMAND)))


@pytest.mark.parametrize("model", [None, "local-coder"])
def test_codex_served_by_an_ollama_node(
    ollama: tuple[OllamaAgent, ScriptedServer], tmp_path: Path, model: str | None
) -> None:
    script, server = ollama
    node = {"name": "box", "url": server.root, "dialect": "ollama"}
    models = {
        "local-coder": [{"model": "qwen3-coder", "nodes": ["box"]}],
        "gpt-*": [{"model": "qwen3-coder", "nodes": ["box"]}],
    }
    env = {"AGENT_KEY": CODEX_KEY, "OPS_KEY": "sk-ops"}
    with routed_proxy(config(node, models, ["local-coder", "gpt-*"]), env, tmp_path) as proxy:
        run = run_codex(proxy.url, tmp_path, key=CODEX_KEY, model=model)
        assert_codex_done(run, script)
        events = proxy.usage.wait(len(script.chat_requests))
    chats = [r for r in server.requests if r.path == "/api/chat"]
    assert {r.json()["model"] for r in chats} == {"qwen3-coder"}
    served = [e for e in events if e.get("node") == "box"]
    assert served and {e["key_id"] for e in served} == {"agent"}


def test_codex_gets_the_ollama_nodes_thinking_back_to_it(
    ollama: tuple[OllamaAgent, ScriptedServer], tmp_path: Path
) -> None:
    """The node's ``thinking`` reaches Codex as reasoning, and Codex's next turn brings
    it back to the node as the calling turn's ``thinking`` (Ollama's member)."""
    script, server = ollama
    script.reasoning = "The user wants a file; the shell can write it."
    node = {"name": "box", "url": server.root, "dialect": "ollama"}
    models = {"local-coder": [{"model": "qwen3-coder", "nodes": ["box"]}]}
    env = {"AGENT_KEY": CODEX_KEY, "OPS_KEY": "sk-ops"}
    with routed_proxy(config(node, models, ["local-coder"]), env, tmp_path) as proxy:
        run = run_codex(proxy.url, tmp_path, key=CODEX_KEY, model="local-coder")
    assert_codex_done(run, script)
    calling = next(m for m in script.chat_requests[-1]["messages"] if m.get("tool_calls"))
    assert calling["thinking"] == script.reasoning and "reasoning_content" not in calling


@pytest.fixture
def gemini_shell() -> Iterator[tuple[GeminiAgent, ScriptedServer]]:
    yield from serving(GeminiAgent(SHELL_TOOLS, shell_plan(COMMAND)))


def test_codex_served_by_a_gemini_3_node(
    gemini_shell: tuple[GeminiAgent, ScriptedServer], tmp_path: Path
) -> None:
    """Codex's default model (its freeform ``exec`` tool) on a node that refuses unsigned
    calls: the calling turn goes back signed."""
    script, server = gemini_shell
    node = {"name": "gem", "url": server.root + "/v1beta", "dialect": "gemini"}
    models = {"gpt-*": [{"model": "gemini-3-pro-preview", "nodes": ["gem"]}]}
    env = {"AGENT_KEY": CODEX_KEY, "OPS_KEY": "sk-ops"}
    with routed_proxy(config(node, models, ["gpt-*"]), env, tmp_path) as proxy:
        run = run_codex(proxy.url, tmp_path, key=CODEX_KEY)
    assert_codex_done(run, script)
    assert script.refused == 0
