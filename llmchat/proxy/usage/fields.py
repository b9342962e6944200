"""What each usage event field may hold: one rule per field, for the writer and the reader.

A usage event is built from what clients and the upstream sent (a path, a model
name, token counts), so every field has a rule: its type, whether it may be
null, and its bounds. The writer (`clean`) normalizes an event before any sink
sees it: a string is cut to its field's length, a count that is negative, not
an int or absurdly large becomes None (unknown, not a measured zero), a
duration that is not a finite, non-negative number becomes 0. So one event is a
few hundred bytes whatever a client sends. The reader (`parse`, for
``llmchat usage --log``) refuses a line whose value has the wrong type — a
string ``started_at``, a null ``duration_ms``, a list ``model`` — and applies
the same bounds to the rest, so an old or hand-edited line reads as the writer
would have written it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

__all__ = ["MAX_TEXT", "UNKNOWN_ROUTE", "clean", "parse"]

MAX_TEXT: Final = 256
"""The longest string any field holds, in characters (a model name's bound)."""

UNKNOWN_ROUTE: Final = "(unknown)"
"""The route of a request for a path the proxy does not serve: never the raw path."""

MAX_COUNT: Final = 2**40
"""Above this a token or byte count is nonsense (and sums of such would overflow BIGINT)."""

_LAST_TIME: Final = 253402300799.0
"""9999-12-31T23:59:59Z: the last instant a UTC day (``YYYY-MM-DD``) can name."""


@dataclass(frozen=True)
class _Rule:
    kind: type
    """str, bool, int or float (a float field takes an int too; no int field takes a bool)."""
    nullable: bool = False
    required: bool = False
    """A log line without this field is not an event; otherwise the default is used."""
    default: Any = None
    limit: float = MAX_TEXT
    """A string's length, or a number's largest value."""
    low: float = 0
    """A number's smallest value."""

    def holds(self, value: Any) -> bool:
        """Whether `value` is this field's already, as it is (the common case, checked first)."""
        if value is None:
            return self.nullable
        kind = type(value)
        if kind is str:
            return self.kind is str and len(value) <= self.limit
        if kind is bool:
            return self.kind is bool
        # NaN fails both comparisons; an int in a float field is made a float by `bound`.
        return kind is self.kind and kind in (int, float) and self.low <= value <= self.limit

    def fits(self, value: Any) -> bool:
        if value is None:
            return self.nullable
        if self.kind is float:
            return isinstance(value, (int, float)) and not isinstance(value, bool)
        if self.kind is int:
            return isinstance(value, int) and not isinstance(value, bool)
        return isinstance(value, self.kind)

    def bound(self, value: Any) -> Any:
        """`value` (which `fits`) within this field's bounds, or its fallback."""
        if isinstance(value, str):
            return value[: int(self.limit)]
        if value is None or isinstance(value, bool):
            return value
        if not (math.isfinite(value) and self.low <= value <= self.limit):
            return None if self.nullable else self.default
        return float(value) if self.kind is float else value


RULES: Final[Mapping[str, _Rule]] = {
    "request_id": _Rule(str, required=True, default="", limit=128),
    "face": _Rule(str, required=True, default="", limit=32),
    "route": _Rule(str, required=True, default=UNKNOWN_ROUTE, limit=64),
    "model": _Rule(str, nullable=True),
    "stream": _Rule(bool, default=False),
    "status": _Rule(int, default=0, low=0, limit=999),
    "ok": _Rule(bool, default=True),
    "duration_ms": _Rule(float, default=0.0, limit=1e12),
    "input_tokens": _Rule(int, nullable=True, limit=MAX_COUNT),
    "output_tokens": _Rule(int, nullable=True, limit=MAX_COUNT),
    "content_bytes": _Rule(int, default=0, limit=MAX_COUNT),
    "error_type": _Rule(str, nullable=True, limit=64),
    "started_at": _Rule(float, required=True, default=0.0, limit=_LAST_TIME),
    "key_id": _Rule(str, nullable=True, limit=64),
    "node": _Rule(str, nullable=True, limit=64),
    "tier": _Rule(int, nullable=True, limit=999),
    "alias": _Rule(str, nullable=True),
    "cached_tokens": _Rule(int, nullable=True, limit=MAX_COUNT),
    "cache_write_tokens": _Rule(int, nullable=True, limit=MAX_COUNT),
    "reasoning_tokens": _Rule(int, nullable=True, limit=MAX_COUNT),
    # 1e9 units: `money.MAX_NANOS`, so a cost's nanos fit a BIGINT.
    "cost": _Rule(float, nullable=True, limit=1e9),
    "ttfb_ms": _Rule(float, nullable=True, limit=1e12),
    "wait_ms": _Rule(float, nullable=True, limit=1e12),
}
"""One rule per `UsageEvent` field (`event` checks the two lists agree)."""


def clean(values: Mapping[str, Any]) -> dict[str, Any]:
    """An event's fields as every sink gets them: each within its rule; never raises."""
    out: dict[str, Any] = {}
    for name, rule in RULES.items():
        value = values.get(name, rule.default)
        if not rule.holds(value):
            value = rule.bound(value) if rule.fits(value) else rule.default
        out[name] = value
    return out


def parse(record: Any) -> dict[str, Any]:
    """A usage log line's JSON value as event fields; ValueError naming the field if it is not one.

    Fields the rules do not know are ignored (a newer writer's); a missing one
    takes its default unless the event needs it.
    """
    if not isinstance(record, dict):
        raise ValueError(f"a usage event is a JSON object, not {type(record).__name__}")
    out: dict[str, Any] = {}
    for name, rule in RULES.items():
        if name not in record:
            if rule.required:
                raise ValueError(f"{name} is missing")
            out[name] = rule.default
            continue
        value = record[name]
        if not rule.fits(value):
            raise ValueError(f"{name} must be {_expected(rule)}, not {type(value).__name__}")
        bounded = rule.bound(value)
        if rule.required and not isinstance(value, str) and bounded != value:
            # An event without its time cannot be put on a day: not an event.
            raise ValueError(f"{name} is out of range")
        out[name] = bounded
    return out


def _expected(rule: _Rule) -> str:
    name = {str: "a string", bool: "true or false", int: "an integer", float: "a number"}
    return name[rule.kind] + (" or null" if rule.nullable else "")
