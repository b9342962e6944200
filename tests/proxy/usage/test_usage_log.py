"""The JSON-lines usage log: one write per event, so concurrent appenders never tear a line."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from llmchat.cli import main
from llmchat.proxy.usage import UsageLog
from llmchat.proxy.usage.fields import MAX_TEXT

from ...support.usage import event, race_processes

# Models of every size, cut to MAX_TEXT by the writer: a line written in two
# pieces, or glued to another, would show up as a torn or interleaved line.
_SIZES = (10, 3000, 5000, 9000, 70000)

_WRITER = """
import sys
from llmchat.proxy.usage import UsageEvent, UsageLog
path, worker, n, sizes = sys.argv[1], sys.argv[2], int(sys.argv[3]), eval(sys.argv[4])
log = UsageLog(path)
sys.stdin.readline()  # the go signal, so every writer appends at the same time
for i in range(n):
    size = sizes[i % len(sizes)]
    log.emit(UsageEvent(request_id=f"{worker}-{i}", face="ollama", route="/api/chat",
                        model=worker[-1] * size, output_tokens=size))
print("done", flush=True)
"""


def test_processes_appending_at_once_lose_and_tear_no_line(tmp_path: Path) -> None:
    path = tmp_path / "usage.jsonl"
    processes, each = 6, 300
    race_processes(
        _WRITER, [[str(path), f"w{n}", str(each), repr(_SIZES)] for n in range(processes)]
    )
    lines = path.read_bytes().split(b"\n")
    assert lines[-1] == b""  # ends with a newline
    records = [json.loads(line) for line in lines[:-1]]  # every line parses whole
    assert len(records) == processes * each
    seen = {r["request_id"] for r in records}
    assert seen == {f"w{n}-{i}" for n in range(processes) for i in range(each)}
    for record in records:
        worker, size = record["request_id"].split("-")[0], record["output_tokens"]
        assert record["model"] == (worker[-1] * size)[:MAX_TEXT], record["request_id"]


def test_each_event_is_one_write_of_the_whole_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    writes: list[bytes] = []
    opened: list[int] = []
    real_write, real_open = os.write, os.open

    def spy_write(fd: int, data: bytes) -> int:
        writes.append(bytes(data))
        return real_write(fd, data)

    def spy_open(path: str, flags: int, mode: int = 0o777) -> int:
        opened.append(flags)
        return real_open(path, flags, mode)

    monkeypatch.setattr(os, "write", spy_write)
    monkeypatch.setattr(os, "open", spy_open)
    path = tmp_path / "usage.jsonl"
    path.write_bytes(b"earlier\n")
    UsageLog(path).emit(event("one", model="m" * 20000))
    assert len(writes) == 1 and writes[0].endswith(b"\n")
    assert opened and all(flags & os.O_APPEND for flags in opened)
    assert path.read_bytes() == b"earlier\n" + writes[0]


def test_a_short_write_is_reported_not_silent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    real_write = os.write
    monkeypatch.setattr(os, "write", lambda fd, data: real_write(fd, data[:5]))
    with caplog.at_level("WARNING", logger="llmchat.proxy"):
        UsageLog(tmp_path / "usage.jsonl").emit(event("short"))
    assert any("short" in r.getMessage() and r.exc_info for r in caplog.records)
    assert any("short write" in str(r.exc_info[1]) for r in caplog.records if r.exc_info)


_TORN = """
import os, resource, signal, sys
from llmchat.proxy.usage import UsageEvent, UsageLog
path = sys.argv[1]
sys.stdin.readline()
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit is short, not fatal
log = UsageLog(path)
def emit(name):
    log.emit(UsageEvent(request_id=name, face="ollama", route="/api/chat", model="m",
                        output_tokens=7, started_at=1.7e9))
emit("before")
soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
resource.setrlimit(resource.RLIMIT_FSIZE, (os.path.getsize(path) + 40, hard))
emit("torn")  # the file can grow by 40 bytes: the disk is full part-way through the line
resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))  # room again
emit("after")
print("done", flush=True)
"""


def test_after_a_torn_write_the_next_event_starts_a_new_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "usage.jsonl"
    race_processes(_TORN, [[str(path)]])
    lines = path.read_bytes().split(b"\n")
    assert len(lines[1]) == 40  # the torn line, as the full disk left it
    assert [json.loads(lines[i])["request_id"] for i in (0, 2)] == ["before", "after"]
    assert lines[3:] == [b""]
    assert main(["usage", "--log", str(path), "--json"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["total"]["output_tokens"] == 14
    assert "skipped 1 malformed line(s)" in captured.err
