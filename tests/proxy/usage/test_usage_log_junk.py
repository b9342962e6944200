"""`llmchat usage --log` on a damaged log: every line that is not an event is skipped and
counted, whatever it holds, and the events around it are summed as if it were not there.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from llmchat.cli import main
from llmchat.proxy.usage import UsageLog
from llmchat.proxy.usage.sqlite import SqliteStore
from llmchat.usage_report import _load_log

from .support import EVENTS

GOOD = EVENTS[0].as_dict()

JUNK: list[bytes] = [
    json.dumps({**GOOD, "started_at": "yesterday"}).encode(),
    json.dumps(GOOD).replace('"started_at": ', '"started_at": 1e400, "_": ').encode(),
    json.dumps({**GOOD, "started_at": float("nan")}).encode(),  # NaN, as Python writes it
    json.dumps({**GOOD, "started_at": -1}).encode(),
    json.dumps({**GOOD, "duration_ms": None}).encode(),
    json.dumps({**GOOD, "model": ["m1"]}).encode(),
    json.dumps({**GOOD, "status": "200"}).encode(),
    json.dumps({**GOOD, "ok": "yes"}).encode(),
    json.dumps({**GOOD, "stream": 1}).encode(),
    json.dumps({**GOOD, "input_tokens": 1.5}).encode(),
    json.dumps({k: v for k, v in GOOD.items() if k != "request_id"}).encode(),
    json.dumps(GOOD).encode()[:-9],  # truncated
    b'{"request_id": "\xff\xfe", "face": "ollama"}',  # not UTF-8
    b"\xc3",
    b"[1, 2]",
    b'"an event"',
    b"42",
    b"null",
    b"[" * 100_000,  # deeper than json's recursion allows
]


def test_each_malformed_line_is_skipped_and_counted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "usage.jsonl"
    log = UsageLog(path)
    for n, item in enumerate(EVENTS):
        log.emit(item)
        with path.open("ab") as out:
            out.write(b"\n".join(JUNK[n::3]) + b"\n\n")  # blank lines are not counted
    assert main(["usage", "--log", str(path), "--json"]) == 0
    captured = capsys.readouterr()
    total = json.loads(captured.out)["total"]
    assert (total["requests"], total["input_tokens"], total["output_tokens"]) == (3, 5, 8)
    assert f"skipped {len(JUNK)} malformed line(s)" in captured.err


def test_negative_counts_in_a_log_line_count_as_unknown(tmp_path: Path) -> None:
    store = SqliteStore(":memory:")
    try:
        line = json.dumps({**GOOD, "input_tokens": -5, "output_tokens": -1}).encode()
        assert _load_log(store, [line]) == 0
        [total] = store.totals("model")
    finally:
        store.close()
    assert (total.requests, total.input_tokens, total.output_tokens) == (1, 0, 0)


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner),
    max_leaves=8,
)


def _line(value: Any) -> bytes:
    return json.dumps(value).encode()


_LINES = st.one_of(
    st.binary(max_size=60),
    _JSON.map(_line),
    st.builds(lambda name, value: _line({**GOOD, name: value}), st.sampled_from(list(GOOD)), _JSON),
)


@given(st.lists(_LINES, max_size=8))
def test_any_line_is_an_event_or_counted_never_a_crash(lines: list[bytes]) -> None:
    data = b"\n".join([_line(GOOD), *lines])
    store = SqliteStore(":memory:")
    try:
        skipped = _load_log(store, io.BytesIO(data))  # read the way the command reads a file
        totals = store.totals("day") + store.totals("model") + store.totals("key_id")
    finally:
        store.close()
    events = sum(t.requests for t in totals) // 3  # each grouping sums to every event
    assert events >= 1 and events + skipped == len([ln for ln in data.split(b"\n") if ln.strip()])
