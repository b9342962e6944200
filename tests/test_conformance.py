"""Every golden vector in ../shared/conformance must pass.

The folder sits beside the repository in the project's workspace; a user's
clone does not have it, so the whole module skips (with the reason) then.
Each file is routed to a runner by name, and a file with no runner fails:
a new vector file can never be skipped silently.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from llmchat import wire_json
from llmchat.messages import normalize_messages

from .support.paths import CONFORMANCE_DIR

if not CONFORMANCE_DIR.is_dir():
    pytest.skip(
        f"golden vectors not found at {CONFORMANCE_DIR} (only the project workspace has them)",
        allow_module_level=True,
    )


def _without_none(message: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in message.items() if value is not None}


def run_wire_json(case: dict[str, Any]) -> None:
    body = case["body"]
    before = copy.deepcopy(body)
    assert wire_json.encode(body) == case["expected"].encode("utf-8")
    assert body == before


def run_normalization(case: dict[str, Any]) -> None:
    messages = case["messages"]
    before = copy.deepcopy(messages)
    result = normalize_messages(messages, **case["options"])
    assert [_without_none(m.to_dict()) for m in result] == [
        _without_none(m) for m in case["expected"]
    ]
    assert messages == before, "normalize_messages changed its input"


RUNNERS: dict[str, Callable[[dict[str, Any]], None]] = {
    "wire_json.json": run_wire_json,
    "normalization.json": run_normalization,
}


def _cases() -> list[Any]:
    params = []
    for path in sorted(CONFORMANCE_DIR.glob("*.json")):
        cases = json.loads(path.read_text(encoding="utf-8"))["cases"]
        for index, case in enumerate(cases):
            params.append(pytest.param(path, case, id=f"{path.stem}[{index}] {case['name']}"))
    return params


def test_every_vector_file_has_a_runner() -> None:
    files = sorted(path.name for path in CONFORMANCE_DIR.glob("*.json"))
    assert files, f"no vector files in {CONFORMANCE_DIR}"
    assert [name for name in files if name not in RUNNERS] == []


@pytest.mark.parametrize(("path", "case"), _cases())
def test_vector(path: Path, case: dict[str, Any]) -> None:
    RUNNERS[path.name](case)
