"""Gemini CLI run headless against a base URL, and the upstream that plays its model.

Gemini CLI (npm ``@google/gemini-cli``, pinned in tests/js) talks to the
Gemini API through google-genai's JavaScript SDK: ``GOOGLE_GEMINI_BASE_URL``
is the server's origin (the SDK appends ``/v1beta/models/...``; plain http
only on loopback) and ``GEMINI_API_KEY`` goes out as ``x-goog-api-key``.
The settings file says ``gemini-api-key`` as the auth type: with only the
base URL set, the CLI picks its "gateway" type, which its headless mode
refuses ("Invalid auth method selected.", exit 41). ``--skip-trust``: a new
directory is untrusted, and there ``--yolo`` is lowered to asking, which a
headless run cannot. Usage statistics and update checks are off, so a run
sends nothing anywhere but the base URL.

On its default model ("auto") the CLI first asks a flash-lite model for a
complexity score (a ``generateContent`` with ``responseJsonSchema``, no
tools), then runs the turn on the model the score picks. `GeminiCliUpstream`
answers that classifier with the JSON it asks for and plays the turn like any
`AgentUpstream`.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from llmchat.testing import Reply

from ..support.agent_upstream import AgentUpstream, chat_reply, tool_results
from .support import bin_path, run_cli

PACKAGE = "@google/gemini-cli"
TIMEOUT = 120.0  # a hang fails the run; a good one takes a few seconds
SETTINGS: dict[str, Any] = {
    "security": {"auth": {"selectedType": "gemini-api-key"}},
    "privacy": {"usageStatisticsEnabled": False},
    "general": {"enableAutoUpdate": False, "enableAutoUpdateNotification": False},
}
WRITTEN = "out.txt"
CONTENT = "hi from gemini\n"
# The shell tool refuses $(...) and backticks ("Command injection detected"); the
# printf's output differs from its text, so only a shell that ran it says MARK-42.
COMMAND = f"echo hi > {WRITTEN} && printf 'MARK-%s\\n' 42"
MARK = "MARK-42"
CLASSIFIER_ANSWER = {"complexity_reasoning": "One small file.", "complexity_score": 10}


def write_plan(tool: Mapping[str, Any]) -> dict[str, Any]:
    """write_file's arguments: a path relative to the working directory, and the content."""
    assert {"file_path", "content"} <= set(tool["parameters"]["properties"]), tool
    return {"file_path": WRITTEN, "content": CONTENT}


def shell_plan(tool: Mapping[str, Any]) -> dict[str, Any]:
    """run_shell_command's arguments: the command and the description it asks for."""
    assert "command" in tool["parameters"]["properties"], tool
    return {"command": COMMAND, "description": "Write the file"}


PLANS = {"write_file": write_plan, "run_shell_command": shell_plan}


class GeminiCliUpstream(AgentUpstream):
    """`AgentUpstream` calling one of Gemini CLI's tools, which also answers its router.

    A request with a ``response_format`` and no tools is the routing
    classifier: it gets `CLASSIFIER_ANSWER` as its JSON text and is kept in
    `classifier_requests`, not `chat_requests`.
    """

    def __init__(self, tool: str, **options: Any) -> None:
        super().__init__((tool,), PLANS[tool], **options)
        self.tool = tool
        self.classifier_requests: list[dict[str, Any]] = []
        self._classifier_lock = threading.Lock()

    def respond(self, body: dict[str, Any]) -> Reply:
        if body.get("response_format") and not body.get("tools"):
            with self._classifier_lock:
                self.classifier_requests.append(body)
            content = json.dumps(CLASSIFIER_ANSWER)
            return chat_reply(body, {"content": content}, "stop", usage=self.usage)
        return super().respond(body)


@dataclass
class GeminiRun:
    """One finished ``gemini -p`` run."""

    returncode: int
    stdout: str
    stderr: str
    cwd: Path
    seconds: float

    def explain(self) -> str:
        out, err = self.stdout[-4000:], self.stderr[-4000:]
        head = f"gemini exited {self.returncode} after {self.seconds:.1f}s"
        return f"{head}\nstdout:\n{out}\nstderr:\n{err}"


def run_gemini(
    url: str, tmp_path: Path, *args: str, key: str, model: str | None = None
) -> GeminiRun:
    """``gemini --yolo --skip-trust [-m model] [args] -p <task>`` against the origin `url`,
    in its own HOME, TMPDIR (its error reports land there) and working directory."""
    gemini = bin_path(PACKAGE, "gemini")
    home, cwd, tmp = tmp_path / "home", tmp_path / "work", tmp_path / "tmp"
    (home / ".gemini").mkdir(parents=True)
    cwd.mkdir()
    tmp.mkdir()
    (home / ".gemini" / "settings.json").write_text(json.dumps(SETTINGS))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GEMINI_", "GOOGLE_"))}
    env.update({"HOME": str(home), "TMPDIR": str(tmp), "NO_COLOR": "1"})
    env.update({"GEMINI_API_KEY": key, "GOOGLE_GEMINI_BASE_URL": url})
    command = [gemini, "--yolo", "--skip-trust", *args]
    if model is not None:
        command += ["-m", model]
    command += ["-p", f"Write the file {WRITTEN} in this directory."]
    done, seconds = run_cli(command, cwd, env, TIMEOUT)
    return GeminiRun(done.returncode, done.stdout, done.stderr, cwd, seconds)


def assert_task_done(run: GeminiRun, agent: GeminiCliUpstream) -> None:
    """Exit 0, the tool's effect on disk, its result upstream in the next turn, the last text."""
    assert run.returncode == 0, run.explain()
    if agent.tool == "write_file":
        assert (run.cwd / WRITTEN).read_text() == CONTENT, run.explain()
    else:
        assert (run.cwd / WRITTEN).read_text() == "hi\n", run.explain()
    assert agent.tool_calls_made == 1, run.explain()
    results = tool_results(agent.chat_requests[-1])
    expected = "Successfully created" if agent.tool == "write_file" else MARK
    assert len(results) == 1 and expected in results[0], results
    assert agent.final in run.stdout, run.explain()
