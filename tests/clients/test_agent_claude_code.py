"""Claude Code itself, end to end: ``claude -p`` through ``llmchat proxy`` over a scripted upstream.

The agent (tests/js, pinned) runs on its defaults against the real proxy
server on loopback; `AgentUpstream` plays the model: it calls the agent's
Bash tool with a command that writes a file in the agent's working
directory, then answers once the tool's result comes back. Each run asserts
what a user would see (exit code 0, the file on disk, the final text) and
what reached the upstream (the tool's output as a tool message).

The only settings that are not Claude Code's defaults: its own HOME and
working directory per run (nothing leaks between runs or from the machine),
``IS_SANDBOX=1`` (Claude Code refuses ``--dangerously-skip-permissions`` as
root without it, and this machine runs tests as root), and the two
variables that point it at the proxy with a key.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from llmchat.backends.openai_common import OpenAICommon
from llmchat.testing import RecordedRequest, Reply, ScriptedServer

from ..support.agent_upstream import AgentUpstream, tool_results
from ..support.paths import REPO_ROOT
from ..support.proxy import running_proxy
from .support import bin_path

WRITTEN = "made-by-claude.txt"
SAID = "wrote-it"
COMMAND = f"printf 'hello from the tool' > {WRITTEN} && echo {SAID}"
FINAL = "All done: the file is written."
RUN_TIMEOUT = 90.0  # a hang fails the test; a good run takes a few seconds


def plan(tool: Mapping[str, Any]) -> dict[str, Any]:
    """Bash's arguments: the command, and the description its schema asks for."""
    assert "command" in tool["parameters"]["properties"], tool
    return {"command": COMMAND, "description": "Write the file"}


@pytest.fixture
def claude() -> str:
    return bin_path("@anthropic-ai/claude-code", "claude")


@pytest.fixture
def agent() -> Iterator[tuple[AgentUpstream, ScriptedServer]]:
    script = AgentUpstream(["Bash"], plan, final=FINAL)
    server = ScriptedServer(script).start()
    yield script, server
    server.stop()


class Run:
    """One finished ``claude -p`` run: its process, working directory and duration."""

    def __init__(self, done: subprocess.CompletedProcess[str], cwd: Path, seconds: float) -> None:
        self.done = done
        self.cwd = cwd
        self.seconds = seconds

    def __repr__(self) -> str:
        return (
            f"claude exited {self.done.returncode} after {self.seconds:.1f}s\n"
            f"stdout:\n{self.done.stdout[-3000:]}\nstderr:\n{self.done.stderr[-3000:]}"
        )


def run_claude(
    claude: str,
    url: str,
    tmp_path: Path,
    *args: str,
    key: str = "sk-proxy-test",
    key_variable: str = "ANTHROPIC_API_KEY",
) -> Run:
    """``claude -p <task> --dangerously-skip-permissions [args]`` against `url`.

    The key goes in `key_variable`: ``ANTHROPIC_API_KEY`` (sent as ``x-api-key``)
    or ``ANTHROPIC_AUTH_TOKEN`` (sent as ``Authorization: Bearer``).
    """
    home, cwd = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    cwd.mkdir()
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "IS_SANDBOX": "1",
        "ANTHROPIC_BASE_URL": url,
        key_variable: key,
    }
    task = f"Write the words 'hello from the tool' to {WRITTEN} in this directory."
    started = time.monotonic()
    done = subprocess.run(
        [claude, "-p", task, "--dangerously-skip-permissions", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT,
        check=False,
    )
    return Run(done, cwd, time.monotonic() - started)


def assert_task_done(run: Run, script: AgentUpstream) -> None:
    """Exit 0, the file really written by the tool, its output upstream, the final text shown."""
    assert run.done.returncode == 0, run
    assert (run.cwd / WRITTEN).read_text() == "hello from the tool", run
    assert script.tool_calls_made == 1, run
    last = script.chat_requests[-1]
    assert any(SAID in result for result in tool_results(last)), last["messages"][-2:]
    assert FINAL in run.done.stdout, run


@pytest.mark.parametrize(
    ("args", "model"),
    [
        pytest.param((), "claude-opus-", id="default-model"),
        pytest.param(("--model", "sonnet"), "claude-sonnet-", id="alias"),
        pytest.param(("--model", "qwen3-coder-30b"), "qwen3-coder-30b", id="local-name"),
    ],
)
def test_claude_code_writes_a_file_through_the_proxy(
    claude: str,
    agent: tuple[AgentUpstream, ScriptedServer],
    tmp_path: Path,
    args: tuple[str, ...],
    model: str,
) -> None:
    script, server = agent
    with OpenAICommon(server.url) as backend, running_proxy(backend) as url:
        run = run_claude(claude, url, tmp_path, *args)
    assert_task_done(run, script)
    # With no model of its own the upstream gets the name Claude Code sent:
    # its default or the alias resolved to a Claude id, or the local name as typed.
    assert {r["model"] for r in script.chat_requests} == {script.chat_requests[0]["model"]}
    assert script.chat_requests[0]["model"].startswith(model)
    first = script.chat_requests[0]["messages"]
    # Claude Code's mid-conversation system turn (its environment) is user-side text in place.
    assert [m["role"] for m in first] == ["system", "user"]
    texts = [part["text"] for part in first[1]["content"] if part["type"] == "text"]
    assert any(text.startswith("[System message]\n# Environment") for text in texts), texts


def test_thinking_goes_back_upstream_and_cached_tokens_are_counted(
    claude: str, tmp_path: Path
) -> None:
    reasoning = "The user wants a file; Bash with printf writes it."
    usage = {"prompt_tokens": 900, "completion_tokens": 12, "prompt_tokens_details": {}}
    usage["prompt_tokens_details"] = {"cached_tokens": 640}
    script = AgentUpstream(["Bash"], plan, final=FINAL, reasoning=reasoning, usage=usage)
    server = ScriptedServer(script).start()
    try:
        with OpenAICommon(server.url) as backend, running_proxy(backend) as url:
            run = run_claude(claude, url, tmp_path, "--output-format", "json")
    finally:
        server.stop()
    assert run.done.returncode == 0, run
    result = json.loads(run.done.stdout)
    assert result["result"] == FINAL and not result["is_error"], result
    assert (run.cwd / WRITTEN).read_text() == "hello from the tool"
    # The tool-call turn's thinking came back as that turn's reasoning, next to its call.
    [call_turn] = [m for m in script.chat_requests[-1]["messages"] if m.get("tool_calls")]
    assert call_turn["reasoning_content"] == reasoning
    assert call_turn["tool_calls"][0]["function"]["name"] == "Bash"
    # What Claude Code counted, summed over its two turns: cached tokens as cache reads.
    assert result["usage"]["cache_read_input_tokens"] == 2 * 640, result["usage"]
    assert result["usage"]["input_tokens"] == 2 * (900 - 640), result["usage"]
    assert result["usage"]["output_tokens"] == 2 * 12, result["usage"]


def test_a_budget_over_the_context_is_lowered_and_retried(claude: str, tmp_path: Path) -> None:
    """vLLM refuses a max_tokens that does not fit beside the prompt; the proxy says so in
    Anthropic's words, and Claude Code retries with context - prompt - 1000 (its rule)
    rather than compacting a prompt that fits."""
    script = AgentUpstream(["Bash"], plan, final=FINAL)
    budgets: list[int] = []

    def vllm(request: RecordedRequest) -> Reply:
        body = request.json()
        if isinstance(body, dict) and request.path.endswith("/chat/completions"):
            budgets.append(body["max_tokens"])
            if body["max_tokens"] > 32768 - 4000:
                said = (
                    "This model's maximum context length is 32768 tokens. However, you "
                    f"requested {4000 + body['max_tokens']} tokens (4000 in the messages, "
                    f"{body['max_tokens']} in the completion)."
                )
                return Reply.error(400, said, "BadRequestError")
        return script(request)

    server = ScriptedServer(vllm).start()
    try:
        with OpenAICommon(server.url) as backend, running_proxy(backend) as url:
            run = run_claude(claude, url, tmp_path)
    finally:
        server.stop()
    assert_task_done(run, script)
    assert budgets[:2] == [128000, 32768 - 4000 - 1000], budgets


def test_a_prompt_over_the_context_is_told_in_claude_codes_words(
    claude: str, agent: tuple[AgentUpstream, ScriptedServer], tmp_path: Path
) -> None:
    """llama-server's refusal of a prompt over its context reaches Claude Code as
    Anthropic's ``prompt is too long: N tokens > M maximum``: it reads both counts and,
    with nothing to compact in a first turn, says why at once instead of retrying."""
    script, server = agent
    overflow = "request (40000 tokens) exceeds the available context size (32768 tokens)"
    server.push(Reply.error(400, overflow, "exceed_context_size_error"))
    with OpenAICommon(server.url) as backend, running_proxy(backend) as url:
        run = run_claude(claude, url, tmp_path)
    assert run.done.returncode != 0 and run.seconds < 20, run
    assert "Prompt is too long" in run.done.stdout, run
    assert "~40000 tokens (limit 32768)" in run.done.stdout, run
    chats = [r for r in server.requests if r.path.endswith("/chat/completions")]
    assert len(chats) == 1 and not script.chat_requests  # refused once, not sent again


@pytest.fixture
def gunicorn_proxy(agent: tuple[AgentUpstream, ScriptedServer]) -> Iterator[str]:
    """``llmchat proxy --model served-model --workers 1 --threads 4``, with a proxy key."""
    pytest.importorskip("gunicorn")
    _, server = agent
    root = REPO_ROOT
    env = {
        **os.environ,
        "PYTHONPATH": str(root),
        "LLMCHAT_PROXY_KEY": "sk-proxy-test",
        "LLMCHAT_API_KEY": "",
    }
    command = [sys.executable, "-m", "llmchat", "proxy", "--upstream", server.url]
    command += ["--host", "127.0.0.1", "--port", "0", "--workers", "1", "--threads", "4"]
    command += ["--model", "served-model"]
    process = subprocess.Popen(
        command, env=env, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True
    )
    announced: list[str] = []
    seen = threading.Event()
    reader = threading.Thread(
        target=_read_announcement, args=(process, announced, seen), daemon=True
    )
    reader.start()
    try:
        yield _served_url(process, announced, seen)
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=5)
        reader.join(timeout=5)  # its stderr ended with the process
        assert process.stderr is not None
        process.stderr.close()


def _read_announcement(
    process: subprocess.Popen[str], announced: list[str], seen: threading.Event
) -> None:
    """Note the URL the proxy announces on stderr; `seen` is set then, or at its end."""
    assert process.stderr is not None
    for line in process.stderr:
        if not announced and "serving http://" in line:
            announced.append(line.split("serving ", 1)[1].split()[0])
            seen.set()
    seen.set()  # the process ended without announcing


def _served_url(process: subprocess.Popen[str], announced: list[str], seen: threading.Event) -> str:
    """The announced URL, once a worker answers ``/health`` (or fail within 30 s)."""
    assert seen.wait(30) and announced, f"the proxy did not start (exit {process.poll()})"
    url = announced[0]
    deadline = time.monotonic() + 30
    while True:
        try:
            with urllib.request.urlopen(url + "/health", timeout=5) as answer:
                if answer.status == 200:
                    return url
        except OSError:
            pass
        assert time.monotonic() < deadline and process.poll() is None, "no worker answered"
        time.sleep(0.1)  # polling a socket that is not yet served: nothing to wait on


def test_claude_code_under_gunicorn(
    claude: str,
    agent: tuple[AgentUpstream, ScriptedServer],
    gunicorn_proxy: str,
    tmp_path: Path,
) -> None:
    script, _ = agent
    run = run_claude(claude, gunicorn_proxy, tmp_path, key_variable="ANTHROPIC_AUTH_TOKEN")
    assert_task_done(run, script)
    # The proxy's --model wins over whatever Claude Code names (its default here).
    assert {body["model"] for body in script.chat_requests} == {"served-model"}


def test_a_wrong_proxy_key_fails_fast(
    claude: str, agent: tuple[AgentUpstream, ScriptedServer], tmp_path: Path
) -> None:
    script, server = agent
    with OpenAICommon(server.url) as backend, running_proxy(backend, api_key="sk-right") as url:
        run = run_claude(claude, url, tmp_path, key="sk-wrong")
    # x-should-retry: false on the 401, so no back-off over minutes.
    assert run.done.returncode != 0, run
    assert run.seconds < 20, run
    assert "API Error: 401 Missing or wrong API key" in run.done.stdout, run
    assert not script.chat_requests and not (run.cwd / WRITTEN).exists()
