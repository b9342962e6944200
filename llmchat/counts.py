"""What counts as a count a server reports (a context size, a slot count, a token limit).

A server's JSON may put anything where a count belongs: a string, a float,
``true`` (a bool is an int to Python), zero or a negative number. The
backends and the probe accept only a positive int and ignore the rest.
"""

from __future__ import annotations

from typing import Any

__all__ = ["is_positive_int"]


def is_positive_int(value: Any) -> bool:
    """True for an int above zero that is not a bool."""
    return isinstance(value, int) and not isinstance(value, bool) and value > 0
