"""The command line: `wire` prints the exact bytes; `demo` runs offline."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from llmchat import OpenAICommon, Settings

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


def run(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "llmchat", *args],
        input=None if stdin is None else stdin.encode(),
        capture_output=True,
        check=False,
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


def test_demo_runs() -> None:
    result = run("demo")
    assert result.returncode == 0, result.stderr
    assert b"/chat/completions" in result.stdout
    assert result.stdout.index(b'"evidence"') < result.stdout.index(b'"change"')
