"""Parsing received JSON: orjson when it is installed, else the stdlib; the same values either way.

Every stream payload and every whole body is parsed by `loads`. With the
``fast`` extra (orjson) it parses in about a quarter of the stdlib's time;
orjson refuses some documents the stdlib accepts (``NaN`` and ``Infinity``, a
float past the double range, lone surrogate escapes, nesting past 1,024
levels) and reads an integer past 64 bits as a float; a document orjson
refuses, and any with a run of 19 digits or more (every such integer has one),
is parsed by the stdlib instead, so the value, or the `ValueError`, is always
the stdlib's.
``tests/test_fastjson.py`` checks the two agree on the cases where they could
differ.

``LLMCHAT_JSON`` picks the parser when llmchat is imported: unset, empty or
``auto`` (orjson if installed), ``stdlib``, or ``orjson`` (an ImportError when
it is not installed). `use` switches at run time (tests and benchmarks).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import Any, Final

__all__ = ["ENV_VAR", "active", "available", "loads", "use"]

ENV_VAR: Final = "LLMCHAT_JSON"
_CHOICES: Final = ("auto", "stdlib", "orjson")

_orjson: Any
try:
    import orjson as _orjson
except ImportError:  # the `fast` extra is not installed
    _orjson = None


def _stdlib_loads(text: str) -> Any:
    """`json.loads(text)`, without its two whitespace regex passes in the common case."""
    try:
        value, end = _raw_decode(text)
    except ValueError:
        return json.loads(text)  # leading whitespace, or really not JSON: loads decides
    if end != len(text) and text[end:].strip(_WHITESPACE):
        return json.loads(text)  # extra data after the value: loads raises its own error
    return value


_WHITESPACE: Final = " \t\n\r"  # JSON's whitespace (RFC 8259), which is all json.loads skips


_raw_decode = json.JSONDecoder().raw_decode


# orjson reads an integer past 64 bits as a float, where the stdlib keeps the int.
# Every such literal has 19 digits or more in a row, so a document with such a
# run (digits mapped to "0", then one substring test, both in C) goes to the stdlib.
_DIGITS_TO_ZERO: Final = bytes.maketrans(b"123456789", b"000000000")
_LONG_RUN: Final = b"0" * 19


def _make_orjson_loads(parse: Callable[[bytes], Any]) -> Callable[[str], Any]:
    def orjson_loads(text: str) -> Any:
        try:
            data = text.encode()  # a lone surrogate cannot be encoded: the stdlib reads it
            if _LONG_RUN not in data.translate(_DIGITS_TO_ZERO):
                return parse(data)
        except Exception:  # refused by orjson: whatever the stdlib makes of it
            pass
        return _stdlib_loads(text)

    return orjson_loads


def available() -> bool:
    """True when orjson is installed."""
    return _orjson is not None


def use(name: str) -> None:
    """Parse with ``"stdlib"``, ``"orjson"``, or ``"auto"`` (orjson if installed) from now on.

    Raises ValueError for another name, ImportError for ``"orjson"`` when it
    is not installed.
    """
    global loads, _active
    if name not in _CHOICES:
        raise ValueError(f"{ENV_VAR} must be one of {', '.join(_CHOICES)}; got {name!r}")
    if name == "orjson" and _orjson is None:
        raise ImportError(
            f"{ENV_VAR}=orjson, but orjson is not installed (pip install llmchat[fast])"
        )
    if name == "stdlib" or _orjson is None:
        loads, _active = _stdlib_loads, "stdlib"
    else:
        loads, _active = _make_orjson_loads(_orjson.loads), "orjson"


def active() -> str:
    """The parser in use: ``"orjson"`` or ``"stdlib"``."""
    return _active


loads: Callable[[str], Any] = _stdlib_loads
"""Parse one JSON document as `json.loads` does (the same value, or a ValueError)."""
_active = "stdlib"
use(os.environ.get(ENV_VAR, "").strip().lower() or "auto")
