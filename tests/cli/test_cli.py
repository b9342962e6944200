"""The command line: `wire` prints the exact bytes; `demo` runs offline."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from llmchat import OpenAICommon, Settings
from llmchat.testing import ChatResponder, Reply, ScriptedServer

from ..support.paths import REPO_ROOT

CONVERSATION = {
    "model": "m",
    "messages": [
        {"role": "user", "content": "a"},
        {"role": "user", "content": "é"},
    ],
    "settings": {
        "max_tokens": 7,
        "json_schema": {"properties": {"b": {}, "a": {}}, "required": ["b"]},
    },
}


def run(
    *args: str, stdin: str | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[bytes]:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("LLMCHAT_")}
    environment.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "llmchat", *args],
        input=None if stdin is None else stdin.encode(),
        capture_output=True,
        check=False,
        env=environment,
    )


def test_wire_prints_the_exact_bytes(tmp_path: Path) -> None:
    path = tmp_path / "conversation.json"
    path.write_text(json.dumps(CONVERSATION), encoding="utf-8")
    result = run("wire", str(path), "--normalize", "alternate-roles")
    assert result.returncode == 0, result.stderr
    expected = (
        OpenAICommon("http://127.0.0.1:8080/v1", model="m", message_normalization="alternate-roles")
        .prepare_chat_request(
            CONVERSATION["messages"], settings=Settings(**CONVERSATION["settings"])
        )
        .data
    )
    assert result.stdout == expected
    assert b'"content":"a\\n\\n\xc3\xa9"' in result.stdout


def test_wire_reads_a_plain_list_from_stdin() -> None:
    result = run("wire", "-", "--stream", stdin=json.dumps(CONVERSATION["messages"]))
    assert result.returncode == 0, result.stderr
    body = json.loads(result.stdout)
    assert body["stream"] is True and len(body["messages"]) == 2


def test_wire_reports_bad_input_and_exits_2() -> None:
    result = run("wire", "-", stdin='[{"role": "bot", "content": "x"}]')
    assert result.returncode == 2
    assert b"messages[0]" in result.stderr and b"role" in result.stderr
    assert result.stdout == b""


def test_demo_is_a_round_trip_against_the_embedded_server() -> None:
    result = run("demo")
    assert result.returncode == 0, result.stderr
    assert b"embedded loopback server" in result.stdout
    assert b"is_success=True finish_reason='stop'" in result.stdout
    request_line = next(line for line in result.stdout.splitlines() if b'"messages"' in line)
    assert request_line.index(b'"evidence"') < request_line.index(b'"change"')


def test_demo_uses_the_configured_server() -> None:
    with ScriptedServer(ChatResponder("from the configured server")) as url:
        result = run("demo", env={"LLMCHAT_API_URL": url, "LLMCHAT_API_KEY": "sk-cli-SECRET"})
        assert result.returncode == 0, result.stderr
        assert b"from the configured server" in result.stdout
        assert b"embedded" not in result.stdout
        assert b"sk-cli-SECRET" not in result.stdout + result.stderr


def test_chat_prints_the_answer_and_reads_the_key_from_the_environment() -> None:
    server = ScriptedServer(ChatResponder("an answer"))
    with server as url:
        result = run(
            "chat",
            "hello",
            "world",
            "--system",
            "be brief",
            env={"LLMCHAT_API_URL": url, "LLMCHAT_API_KEY": "sk-cli-SECRET"},
        )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == b"an answer"
    seen = server.requests[0]
    assert seen.headers["Authorization"] == "Bearer sk-cli-SECRET"
    assert seen.json()["messages"] == [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "hello world"},
    ]


def test_a_key_ending_in_a_newline_is_refused_naming_the_variable() -> None:
    result = run(
        "chat",
        "hi",
        env={"LLMCHAT_API_URL": "http://127.0.0.1:9/v1", "LLMCHAT_API_KEY": "sk-cli-SECRET\n"},
    )
    assert result.returncode != 0
    assert b"LLMCHAT_API_KEY" in result.stderr and b"control character" in result.stderr
    assert b"sk-cli-SECRET" not in result.stdout + result.stderr


def test_chat_failure_exits_1_with_the_error() -> None:
    with ScriptedServer(Reply.error(503, "overloaded")) as url:
        result = run("chat", "--api-url", url, "--json", stdin="hi")
    assert result.returncode == 1
    outcome = json.loads(result.stdout)
    assert (outcome["error_class"], outcome["error_status"], outcome["err"]) == (
        "http",
        503,
        "overloaded",
    )


def test_chat_without_a_server_is_a_usage_error() -> None:
    result = run("chat", "hi")
    assert result.returncode == 2 and b"LLMCHAT_API_URL" in result.stderr


def test_probe_prints_the_limits() -> None:
    with ScriptedServer(ChatResponder(n_ctx=2048, total_slots=3)) as url:
        result = run("probe", "--api-url", url)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {"source": "llama.cpp", "context_length": 2048, "slots": 3}


def test_chat_stream_prints_as_it_arrives() -> None:
    with ScriptedServer(ChatResponder("streamed answer", chunk_size=2)) as url:
        result = run("chat", "--stream", "--api-url", url, "hi")
    assert result.returncode == 0, result.stderr
    assert result.stdout == b"streamed answer\n"


def test_demo_streams_too() -> None:
    result = run("demo")
    assert b"3. The same request streamed" in result.stdout
    assert result.stdout.count(b"is_success=True") == 2


def test_the_command_line_starts_without_the_proxy() -> None:
    # The proxy (and gunicorn behind it) loads only when `llmchat proxy` runs.
    code = (
        "import sys, llmchat.cli, llmchat.cli.workers; "
        "print(sorted(m for m in sys.modules if m.startswith('llmchat.proxy') or m == 'gunicorn'))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        cwd=REPO_ROOT,
    )
    assert result.stdout.strip() == "[]"
