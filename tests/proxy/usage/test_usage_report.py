"""`llmchat usage`: the same totals from an SQLite file, PostgreSQL and a JSON-lines log."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from llmchat.cli import main
from llmchat.proxy.usage import UsageLog
from llmchat.proxy.usage.backend import open_store

from ...support.paths import REPO_ROOT
from ...support.usage import fresh_target
from .support import EVENTS


@pytest.fixture(params=["sqlite", "postgres", "log"])
def source(request: pytest.FixtureRequest, tmp_path: Path) -> list[str]:
    """The command-line arguments naming a source that holds `EVENTS`."""
    if request.param == "log":
        path = tmp_path / "usage.jsonl"
        log = UsageLog(path)
        for item in EVENTS:
            log.emit(item)
        return ["--log", str(path)]
    target = fresh_target(request.param, tmp_path)
    store = open_store(target)
    for item in EVENTS:
        store.record(item)
    store.close()
    return ["--db", target]


def test_json_totals_per_model_day_and_key(
    source: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["usage", *source, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["total"] == {
        "requests": 3,
        "ok": 2,
        "failed": 1,
        "input_tokens": 5,
        "cached_tokens": 0,
        "output_tokens": 8,
        "content_bytes": 37,
        "duration_ms": 2250.0,
        "cost": None,
    }
    assert [(r["model"], r["requests"], r["failed"]) for r in out["by_model"]] == [
        ("m1", 2, 1),
        ("m2", 1, 0),
    ]
    assert [(r["day"], r["requests"], r["input_tokens"]) for r in out["by_day"]] == [
        ("2026-05-01", 1, 4),
        ("2026-05-02", 2, 1),
    ]
    assert [(r["key_id"], r["requests"], r["output_tokens"]) for r in out["by_key_id"]] == [
        ("key_aaa", 2, 6),
        (None, 1, 2),
    ]


def test_text_tables_and_date_range(source: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["usage", *source, "--since", "2026-05-02", "--until", "2026-05-02"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "2026-05-02 to 2026-05-02" in lines[0]
    assert lines[2].split() == ["per", "model", *_COLUMNS]
    assert lines[3].split() == ["m1", "1", "0", "1", "0", "0", "0", "0", "0.250", "-"]
    assert lines[4].split() == ["m2", "1", "1", "0", "1", "0", "2", "7", "0.500", "-"]
    assert lines[5].split() == ["total", "2", "1", "1", "1", "0", "2", "7", "0.750", "-"]
    assert ["2026-05-01"] not in [line.split()[:1] for line in lines]
    assert ["(none)", "1", "1", "0", "1", "0", "2", "7", "0.500", "-"] in [
        line.split() for line in lines
    ]
    # No routing in these records: no per-node or per-alias table of "(none)".
    assert not [line for line in lines if line.startswith(("per node", "per alias"))]


_COLUMNS = [
    "requests",
    "ok",
    "failed",
    "input_tokens",
    "cached_tokens",
    "output_tokens",
    "content_bytes",
    "duration_s",
    "cost",
]


def test_as_a_subprocess(tmp_path: Path) -> None:
    path = tmp_path / "usage.jsonl"
    log = UsageLog(path)
    for item in EVENTS:
        log.emit(item)
    with path.open("a", encoding="utf-8") as out:
        out.write('{"torn": \n')
    done = subprocess.run(
        [sys.executable, "-m", "llmchat", "usage", "--log", str(path), "--json"],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["total"]["requests"] == 3
    assert "skipped 1 malformed line(s)" in done.stderr


def test_a_missing_database_is_not_created(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "typo.db"
    assert main(["usage", "--db", str(path)]) == 2
    assert "no usage database at" in capsys.readouterr().err
    assert not path.exists()


def test_a_backwards_range_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "usage.jsonl"
    path.write_text("")
    assert (
        main(["usage", "--log", str(path), "--since", "2026-02-02", "--until", "2026-02-01"]) == 2
    )
    assert "since (2026-02-02) is after until (2026-02-01)" in capsys.readouterr().err


def test_a_bad_date_and_no_source_are_usage_errors(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["usage", "--log", "x.jsonl", "--since", "May 1st"])
    assert exited.value.code == 2 and "not a date (YYYY-MM-DD)" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exited:
        main(["usage"])
    assert exited.value.code == 2 and "--db" in capsys.readouterr().err


def test_a_postgres_password_is_never_printed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = fresh_target("postgres", tmp_path).replace("llmchat@", "llmchat:hunter2@")
    assert main(["usage", "--db", url]) == 0
    assert main(["usage", "--db", url, "--json"]) == 0
    captured = capsys.readouterr()
    assert "hunter2" not in captured.out + captured.err
    assert "postgresql://llmchat@" in captured.out
