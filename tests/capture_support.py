"""What the capture tests of every dialect share: a text too long to quote in an expectation."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


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
