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

Two rules hold for every document either parser reads, because received JSON
comes from a server llmchat does not trust (spec: HOSTILE JSON):

- **Depth.** A document nested deeper than `MAX_DEPTH` arrays/objects is not
  read: a `ValueError`, never the stdlib's `RecursionError`, so each caller's
  "not JSON" path (a failed Response, ``response``) holds for it, and nothing
  parsed is too deep for a later recursive walk or encoder.
- **UTF-8.** A lone surrogate escape (``"\\ud800"``) is read as U+FFFD, in
  values and keys alike: every string a decoder produces can be encoded to
  UTF-8 (a proxy face, a log line, a re-sent request). Escaped pairs are still
  joined into one character. Only a document whose text holds such an escape
  is walked for it, so the per-token path pays one substring test.

``LLMCHAT_JSON`` picks the parser when llmchat is imported: unset, empty or
``auto`` (orjson if installed), ``stdlib``, or ``orjson`` (an ImportError when
it is not installed). `use` switches at run time (tests and benchmarks).
Under ``auto``, orjson is imported at the first parse, not with this module:
it loads ``uuid``, ``platform`` and more, which a script that parses nothing
(``llmchat --help``, an import) should not pay for.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from typing import Any, Final

__all__ = ["ENV_VAR", "MAX_DEPTH", "TooDeepError", "active", "available", "loads", "use"]

ENV_VAR: Final = "LLMCHAT_JSON"
MAX_DEPTH: Final = 256
"""Deepest nesting of arrays and objects read; no provider sends more than a few dozen."""
_CHOICES: Final = ("auto", "stdlib", "orjson")

_NOT_LOADED: Final[Any] = object()
_orjson: Any = _NOT_LOADED
"""The orjson module; None when it is not installed; `_NOT_LOADED` until first needed."""


def _orjson_module() -> Any:
    """orjson, imported on first use, or None when the `fast` extra is not installed."""
    global _orjson
    if _orjson is _NOT_LOADED:
        module: Any
        try:
            import orjson as module
        except ImportError:
            module = None
        _orjson = module
    return _orjson


def _stdlib_loads(text: str) -> Any:
    """`json.loads(text)`, without its two whitespace regex passes in the common case."""
    try:
        try:
            value, end = _raw_decode(text)
        except ValueError:
            return json.loads(text)  # leading whitespace, or really not JSON: loads decides
    except RecursionError:
        raise _too_deep() from None
    if end != len(text) and text[end:].strip(_WHITESPACE):
        return json.loads(text)  # extra data after the value: loads raises its own error
    return value


class TooDeepError(ValueError):
    """A document nested deeper than `MAX_DEPTH`: a `ValueError`, so "not JSON" paths hold."""


def _too_deep() -> ValueError:
    return TooDeepError(f"JSON nested more than {MAX_DEPTH} levels deep is not read")


def _guarded(parse: Callable[[str], Any]) -> Callable[[str], Any]:
    """`parse` under the depth and UTF-8 rules of this module (see its docstring)."""

    def loads(text: str) -> Any:
        value = parse(text)
        # Cheap tests first: the walk runs only for a document that could be
        # too deep (long enough, and enough brackets) or could hold a surrogate
        # escape (a backslash, found by memchr, then the regex). A stream
        # frame is shorter than 2 * MAX_DEPTH, so it pays one memchr in the
        # common case.
        deep = len(text) > 2 * MAX_DEPTH and text.count("[") + text.count("{") > MAX_DEPTH
        surrogates = "\\" in text and _SURROGATE_ESCAPE.search(text) is not None
        if deep or surrogates:
            return _walk(value, surrogates=surrogates)
        return value

    return loads


_SURROGATE_ESCAPE: Final = re.compile(r"\\u[dD][89a-fA-F]")
_SURROGATE: Final = re.compile("[\ud800-\udfff]")


def _clean(text: str) -> str:
    return _SURROGATE.sub("\ufffd", text)


def _walk(root: Any, *, surrogates: bool) -> Any:
    """Refuse nesting past `MAX_DEPTH`; with `surrogates`, replace lone ones in place."""
    if type(root) is str:
        return _clean(root) if surrogates else root
    stack: list[tuple[Any, int]] = [(root, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise _too_deep()
        if type(node) is dict:
            if surrogates and any(_SURROGATE.search(key) for key in node):
                members = [(_clean(key), value) for key, value in node.items()]
                node.clear()  # rebuilt in place, so its parent's reference stays good
                node.update(members)
            items: Any = node.items()
        elif type(node) is list:
            items = enumerate(node)
        else:
            continue
        for slot, child in list(items):
            if type(child) is str:
                if surrogates:
                    node[slot] = _clean(child)
            elif type(child) is dict or type(child) is list:
                stack.append((child, depth + 1))
    return root


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


# What ``raw_decode`` calls (the C scanner when the stdlib has it): one value at an index.
_scan_once: Callable[[str, int], tuple[Any, int]] = json.JSONDecoder().scan_once  # type: ignore[attr-defined]


def _lean(
    guarded: Callable[[str], Any], parse: Callable[[bytes], Any] | None
) -> Callable[[str], Any]:
    """`guarded`, with the common document read in one Python frame (it runs per token).

    The common document: no leading whitespace, nothing after the value, no
    backslash, short. It is parsed by the stdlib's C scanner (what
    ``raw_decode`` calls), or by orjson when `parse` is given; the depth and
    UTF-8 rules cannot apply to it (too short to be too deep, no escape).
    Anything else, and any failure, goes through `guarded`, so the value or
    the error is the same.
    """
    limit = 2 * MAX_DEPTH

    if parse is None:

        def loads(text: str) -> Any:
            if len(text) <= limit and "\\" not in text:
                try:
                    value, end = _scan_once(text, 0)
                except (ValueError, StopIteration, RecursionError):
                    return guarded(text)
                if end == len(text):
                    return value
            return guarded(text)

        return loads

    def orjson_loads(text: str) -> Any:
        if len(text) <= limit and "\\" not in text:
            try:
                data = text.encode()
                if _LONG_RUN not in data.translate(_DIGITS_TO_ZERO):
                    return parse(data)
            except Exception:  # refused by orjson: the stdlib's value, or its error
                pass
        return guarded(text)

    return orjson_loads


def available() -> bool:
    """True when orjson is installed."""
    return _orjson_module() is not None


def use(name: str) -> None:
    """Parse with ``"stdlib"``, ``"orjson"``, or ``"auto"`` (orjson if installed) from now on.

    Raises ValueError for another name, ImportError for ``"orjson"`` when it
    is not installed.
    """
    global loads, _active
    if name not in _CHOICES:
        raise ValueError(f"{ENV_VAR} must be one of {', '.join(_CHOICES)}; got {name!r}")
    orjson = None if name == "stdlib" else _orjson_module()
    if name == "orjson" and orjson is None:
        raise ImportError(
            f"{ENV_VAR}=orjson, but orjson is not installed (pip install llmchat[fast])"
        )
    if orjson is None:
        loads, _active = _lean(_guarded(_stdlib_loads), None), "stdlib"
    else:
        orjson_loads = _make_orjson_loads(orjson.loads)
        loads, _active = _lean(_guarded(orjson_loads), orjson.loads), "orjson"


def _auto_loads(text: str) -> Any:
    """`loads` under ``auto`` until the first parse: pick the parser (importing orjson), parse."""
    use("auto")
    return loads(text)


def active() -> str:
    """The parser in use: ``"orjson"`` or ``"stdlib"``."""
    if loads is _auto_loads:
        use("auto")
    return _active


loads: Callable[[str], Any] = _stdlib_loads
"""Parse one JSON document as `json.loads` does (the same value, or a ValueError)."""
_active = "stdlib"
_choice = os.environ.get(ENV_VAR, "").strip().lower() or "auto"
if _choice == "auto":
    loads = _auto_loads
else:
    use(_choice)  # a named parser is checked, and orjson imported, now
