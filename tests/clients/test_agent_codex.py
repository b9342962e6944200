"""Codex end to end: ``codex exec`` through the proxy's Responses face, on its defaults.

The real agent (tests/js, pinned) runs non-interactively against the proxy,
which serves a loopback `AgentUpstream`: on the first turn the upstream calls
the agent's own shell tool (for the default model, the freeform ``exec`` tool
running JavaScript that calls ``tools.exec_command``; for other models
``exec_command`` itself), and answers once the tool's result comes back. Each
run asserts the exit code, the file the command wrote in the run's working
directory, the command's output reaching the upstream, and the final text
Codex printed. Codex reads no OPENAI_BASE_URL; a provider is configured with
``-c`` flags, its key in an environment variable.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from llmchat.testing import ScriptedServer

from ..support.agent_upstream import AgentUpstream, shell_plan, tool_results
from ..support.proxy_servers import serve_proxy
from .support import bin_path, run_cli

KEY = "sk-proxy-test-key"
ENV_KEY = "LLMCHAT_TEST_KEY"
COMMAND = "echo hi > out.txt && echo MARK-$((6*7))"
MARK = "MARK-42"  # only a shell that ran the command prints it
SHELL_TOOLS = ("exec", "exec_command", "shell", "shell_command")
TIMEOUT = 120.0


@dataclass
class CodexRun:
    returncode: int
    stdout: str
    stderr: str
    cwd: Path
    seconds: float

    @property
    def last_message(self) -> str:
        path = self.cwd / "last.txt"
        return path.read_text() if path.exists() else ""

    def explain(self) -> str:
        out, err = self.stdout[-4000:], self.stderr[-4000:]
        return f"exit {self.returncode}\nstdout:\n{out}\nstderr:\n{err}"


def run_codex(
    url: str, tmp_path: Path, *, key: str = KEY, model: str | None = None, provider_extra: str = ""
) -> CodexRun:
    """``codex exec`` with the proxy as its provider, in its own HOME and working directory
    (`provider_extra`: more ``key=value`` settings of the provider, comma first)."""
    codex = bin_path("@openai/codex", "codex")
    home, cwd = tmp_path / "home", tmp_path / "work"
    (home / ".codex").mkdir(parents=True)
    cwd.mkdir()
    provider = (
        f'model_providers.llmchat={{name="llmchat",base_url="{url}/v1",'
        f'env_key="{ENV_KEY}",wire_api="responses"{provider_extra}}}'
    )
    command = [codex, "exec", "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox"]
    command += ["-c", "model_provider=llmchat", "-c", provider, "--json"]
    command += ["--output-last-message", str(cwd / "last.txt")]
    if model is not None:
        command += ["-m", model]
    command.append("Write hi to out.txt.")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "CODEX_"))}
    env.update({"HOME": str(home), "CODEX_HOME": str(home / ".codex"), ENV_KEY: key})
    done, seconds = run_cli(command, cwd, env, TIMEOUT)
    return CodexRun(done.returncode, done.stdout, done.stderr, cwd, seconds)


@pytest.fixture
def scripted() -> Iterator[tuple[ScriptedServer, AgentUpstream]]:
    agent = AgentUpstream(SHELL_TOOLS, shell_plan(COMMAND))
    server = ScriptedServer(agent).start()
    try:
        yield server, agent
    finally:
        server.stop()


def assert_task_done(run: CodexRun, agent: AgentUpstream) -> None:
    assert run.returncode == 0, run.explain()
    assert (run.cwd / "out.txt").read_text() == "hi\n", run.explain()
    assert agent.tool_calls_made == 1
    results = [text for body in agent.chat_requests for text in tool_results(body)]
    assert any(MARK in text for text in results), results
    assert run.last_message.strip() == agent.final, run.explain()


@pytest.mark.parametrize(
    ("model", "shell"),
    [
        (None, "exec"),  # the default model: every tool inside `exec`'s JavaScript
        ("gpt-5.5", "exec_command"),  # a model Codex knows, with flat function tools
        ("qwen3-coder-local", "exec_command"),  # a local name: namespace and web_search too
    ],
)
def test_codex_runs_its_shell_tool_through_the_proxy(scripted, tmp_path, model, shell):
    upstream, agent = scripted
    with serve_proxy("embedded", upstream.url, tmp_path, api_key=KEY) as proxy:
        run = run_codex(proxy.url, tmp_path, model=model)
    assert_task_done(run, agent)
    first = agent.chat_requests[0]
    names = [tool["function"]["name"] for tool in first["tools"]]
    assert shell in names and len(names) == len(set(names))
    if model is not None:
        assert first["model"] == model


def test_codex_gets_the_upstreams_reasoning_back_on_the_next_turn(scripted, tmp_path):
    upstream, agent = scripted
    agent.reasoning = "The user wants a file; the shell can write it."
    with serve_proxy("embedded", upstream.url, tmp_path, api_key=KEY) as proxy:
        run = run_codex(proxy.url, tmp_path, model="qwen3-coder-local")
    assert_task_done(run, agent)
    follow_up = agent.chat_requests[-1]["messages"]
    calling = next(m for m in follow_up if m.get("tool_calls"))
    assert calling["reasoning_content"] == agent.reasoning


def test_codex_through_gunicorn(scripted, tmp_path):
    upstream, agent = scripted
    workers = ("--workers", "1", "--threads", "4")
    with serve_proxy("gunicorn", upstream.url, tmp_path, api_key=KEY, gunicorn_args=workers) as p:
        run = run_codex(p.url, tmp_path)
    assert_task_done(run, agent)


@pytest.mark.parametrize(
    ("provider_extra", "attempts", "seconds"),
    [
        # Codex 0.171.0 retries a 401 like a dropped stream (its stream_max_retries,
        # 5 by default, with back-off), x-should-retry notwithstanding: ~7 s.
        ("", 6, 15.0),
        (",stream_max_retries=0", 1, 5.0),
    ],
)
def test_a_wrong_key_fails_fast(scripted, tmp_path, provider_extra, attempts, seconds):
    upstream, agent = scripted
    with serve_proxy("embedded", upstream.url, tmp_path, api_key=KEY) as proxy:
        run = run_codex(proxy.url, tmp_path, key="sk-wrong", provider_extra=provider_extra)
        refused = proxy.usage.wait(attempts)
    assert run.returncode != 0, run.explain()
    assert run.seconds < seconds, run.explain()
    assert "401 Unauthorized" in run.stdout, run.explain()
    assert [event["status"] for event in refused] == [401] * attempts
    assert not agent.chat_requests
