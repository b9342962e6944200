"""Deterministic ids for the stream translators, so two runs of one stream compare byte for byte.

`fix_ids` makes the Responses item ids come from a counter, its ``created_at``
one fixed second (two runs straddling a second differed), and Anthropic's
fallback message id all zeros; `restart_ids` starts the counter over (call it
before each run).
"""

from __future__ import annotations

import itertools
import types
from collections.abc import Iterator

import pytest

from llmchat.protocols import anthropic, responses, responses_objects

__all__ = ["fix_ids", "restart_ids"]

_ids: list[Iterator[int]] = [itertools.count()]


def _counted(prefix: str) -> str:
    return f"{prefix}_{next(_ids[0])}"


class _FixedUuid:
    hex = "0" * 32


def fix_ids(monkeypatch: pytest.MonkeyPatch) -> None:
    """Counted Responses ids, a fixed ``created_at`` and Anthropic message id, for this test."""
    monkeypatch.setattr(responses, "new_id", _counted)
    monkeypatch.setattr(responses_objects, "new_id", _counted)
    monkeypatch.setattr(anthropic.uuid, "uuid4", _FixedUuid)
    monkeypatch.setattr(responses, "time", types.SimpleNamespace(time=lambda: 1_767_225_600.0))


def restart_ids() -> None:
    """The next counted id is ``<prefix>_0`` again."""
    _ids[0] = itertools.count()
