"""The one capture checker every dialect's capture tests share.

Each dialect's expectations are data: ``fixtures/captures_expected/<dialect>.json``
holds ``fields`` (the Response fields its captures decide, for `snapshot`),
``defaults`` (every field an expectation has, with its usual value) and
``captures`` (per capture file in ``/work/shared/captures/<dialect>/``, the
fields that differ, and a ``note`` where the entry needs a why). A text too
long to quote is ``{"long": [length, head, tail]}``: a `Long`. JSON arrays read
back as tuples, except inside an object (tool-call arguments keep their lists).

`snapshot` reads the named fields of a settled `Response` one way for every
dialect; `mismatches` and `fail_or_known_bug` compare and report;
`assert_chunks_replay` checks the chunks say what the Response says. What a
dialect's file must come to (totals, its own reading of the wire) stays in its
test module.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from llmchat.response import Response

EXPECTED_DIR = Path(__file__).resolve().parent / "expected"
PROVENANCE = "PROVENANCE.md"


@dataclass(frozen=True)
class Long:
    """A text too long to quote: its length, head and tail (the whole comes from the wire)."""

    length: int
    head: str
    tail: str

    def matches(self, got: Any, wire: str) -> bool:
        """True when `got` is the wire's text and has this length, head and tail."""
        return (
            isinstance(got, str)
            and got == wire
            and len(got) == self.length
            and got.startswith(self.head)
            and got.endswith(self.tail)
        )

    def cut(self, wire: str) -> tuple[int, str, str]:
        """`wire`'s length, head and tail as long as this one's: equal to `astuple` when right."""
        return (len(wire), wire[: len(self.head)], wire[-len(self.tail) :])

    def astuple(self) -> tuple[int, str, str]:
        return (self.length, self.head, self.tail)


class Expect:
    """One capture's expectations, read as attributes: the defaults, overlaid with its entry."""

    __slots__ = ("_values",)

    def __init__(self, values: Mapping[str, Any]) -> None:
        self._values = dict(values)

    def __getattr__(self, name: str) -> Any:
        try:
            return self._values[name]
        except KeyError:
            raise AttributeError(name) from None

    def __repr__(self) -> str:
        return f"Expect({self._values!r})"


def _decode(value: Any, *, in_object: bool = False) -> Any:
    if isinstance(value, dict):
        if not in_object and set(value) == {"long"}:
            return Long(*value["long"])
        return {k: _decode(v, in_object=True) for k, v in value.items()}
    if isinstance(value, list):
        items = [_decode(v, in_object=in_object) for v in value]
        return items if in_object else tuple(items)
    return value


@functools.cache
def _data(dialect: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(
        (EXPECTED_DIR / f"{dialect}.json").read_text(encoding="utf-8")
    )
    return data


def load_expected(dialect: str) -> dict[str, Expect]:
    """`{capture file name: Expect}` from ``fixtures/captures_expected/<dialect>.json``."""
    data = _data(dialect)
    defaults = data["defaults"]
    return {
        name: Expect({k: _decode(v) for k, v in {**defaults, **entry}.items()})
        for name, entry in data["captures"].items()
    }


def capture_names(folder: Path) -> list[str]:
    """The capture files in `folder` (PROVENANCE.md aside), sorted; none when it is absent."""
    if not folder.is_dir():
        return []
    return sorted(p.name for p in folder.iterdir() if p.is_file() and p.name != PROVENANCE)


_READ: dict[str, Callable[[Response], Any]] = {
    "is_success": lambda r: r.is_success,
    "error_class": lambda r: r.error_class,
    "error_status": lambda r: r.error_status,
    "err": lambda r: r.err,
    "msg": lambda r: r.msg,
    "reasoning_text": lambda r: r.reasoning_text,
    "reasoning": lambda r: r.reasoning_text or "",
    "tool_calls": lambda r: [(c.name, c.arguments, c.id) for c in r.tool_calls],
    "finish_reason": lambda r: r.finish_reason,
    "provider_finish_reason": lambda r: r.provider_finish_reason,
    "prompt_tokens": lambda r: r.prompt_tokens,
    "completion_tokens": lambda r: r.completion_tokens,
    "total_tokens": lambda r: r.total_tokens,
    "cached_tokens": lambda r: r.cached_tokens,
    "reasoning_tokens": lambda r: r.reasoning_tokens,
    "usage": lambda r: (
        r.prompt_tokens,
        r.completion_tokens,
        r.total_tokens,
        r.cached_tokens,
        r.reasoning_tokens,
    ),
    "citations": lambda r: r.citations,
    "model": lambda r: r.model,
    "id": lambda r: r.id,
    "reasoning_parts": lambda r: r.reasoning_parts,
    "reasoning_part_count": lambda r: len(r.reasoning_parts or []),
    "signatures_on": lambda r: [p["on"] for p in r.reasoning_parts or []],
    "server_total_seconds": lambda r: r.timing.server_total_seconds,
    "dropped_frames": lambda r: r.dropped_frames,
}
"""Every Response field a capture test reads, by the name its snapshot gives it."""


def snapshot_fields(dialect: str) -> tuple[str, ...]:
    """The Response fields a dialect's captures decide: the data file's ``fields``."""
    return tuple(_data(dialect)["fields"])


def snapshot(response: Response, fields: Sequence[str]) -> dict[str, Any]:
    """The named fields of `response` (see `_READ`), in that order."""
    return {name: _READ[name](response) for name in fields}


def mismatches(want: Mapping[str, Any], got: Mapping[str, Any]) -> dict[str, tuple[Any, Any]]:
    """`{field: (expected, actual)}` for every field of `want` that `got` differs in."""
    return {key: (value, got[key]) for key, value in want.items() if got[key] != value}


def text_ok(want: str | Long | None, got: Any, wire: str) -> bool:
    """A quoted text is the Response's exactly; a `Long` is also the wire's own text."""
    if not isinstance(want, Long):
        return bool(got == want)
    return want.matches(got, wire)


class KnownBug(AssertionError):
    """The Response differs from the expectation in exactly the fields a known bug names."""


def fail_or_known_bug(
    label: str, wrong: Mapping[str, tuple[Any, Any]], known: frozenset[str] | None
) -> None:
    """Pass when nothing is wrong; `KnownBug` when only `known` fields are; else fail."""
    if not wrong:
        return
    report = "\n".join(f"  {key}: expected {w!r}, got {g!r}" for key, (w, g) in wrong.items())
    if known is not None and wrong.keys() <= known:
        raise KnownBug(f"{label}: the known bug, still there:\n{report}")
    pytest.fail(f"{label}: the Response is not what the capture says:\n{report}")


def assert_chunks_replay(response: Response) -> None:
    """What the Response replays chunk by chunk is what it says in aggregate."""
    chunks = list(response)
    assert "".join(c.content for c in chunks) == response.msg
    assert "".join(c.thinking or "" for c in chunks) == (response.reasoning_text or "")
    assert [c for chunk in chunks for c in chunk.tool_calls or []] == response.tool_calls
