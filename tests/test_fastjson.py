"""fastjson: orjson and the stdlib give the same value (or both a ValueError) on every document."""

from __future__ import annotations

import json
import math
import os
import re
import struct
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from llmchat import fastjson

needs_orjson = pytest.mark.skipif(not fastjson.available(), reason="orjson is not installed")


@pytest.fixture
def orjson_path() -> Iterator[None]:
    before = fastjson.active()
    fastjson.use("orjson")
    yield
    fastjson.use(before)


def _same(a: Any, b: Any) -> bool:
    """Equal values of equal types, floats to the bit, object members in the same order."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return struct.pack("<d", a) == struct.pack("<d", b) or (math.isnan(a) and math.isnan(b))
    if isinstance(a, dict):
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(map(_same, a, b))
    return bool(a == b)


def _outcome(loads: Any, text: str) -> tuple[str, Any]:
    try:
        return "value", loads(text)
    except ValueError:
        return "error", None
    except RecursionError:  # the stdlib's answer to very deep nesting: the same on both paths
        return "recursion", None


def _depth(value: Any) -> int:
    if isinstance(value, dict):
        return 1 + max(map(_depth, value.values()), default=0)
    if isinstance(value, list):
        return 1 + max(map(_depth, value), default=0)
    return 0


def _replaced(value: Any) -> Any:
    if isinstance(value, str):
        return re.sub("[\ud800-\udfff]", "\ufffd", value)
    if isinstance(value, dict):
        return {_replaced(k): _replaced(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_replaced(v) for v in value]
    return value


def _reference(text: str) -> Any:
    """`json.loads` under fastjson's two rules: no nesting past MAX_DEPTH, no lone surrogate."""
    try:
        value = json.loads(text)
    except RecursionError:
        raise ValueError("too deep") from None
    if _depth(value) > fastjson.MAX_DEPTH:
        raise ValueError("too deep")
    return _replaced(value) if re.search(r"\\u[dD][89a-fA-F]", text) else value


def _check(text: str) -> None:
    got, want = _outcome(fastjson.loads, text), _outcome(_reference, text)
    assert got[0] == want[0], (text, got, want)
    assert _same(got[1], want[1]), (text, got, want)


TRICKY = [
    # numbers: past 64 bits (orjson reads them as floats), past the double range, edges
    "18446744073709551615",
    "18446744073709551616",
    "-9223372036854775808",
    "-9223372036854775809",
    '{"n": 123456789012345678901234567890}',
    '{"id": "1234567890123456789012"}',  # a long digit run in a string: still the same value
    "1e400",
    "-1e400",
    "1.7976931348623157e309",
    "4.9e-324",
    "1e-400",
    "2.2250738585072014e-308",
    "0.1000000000000000055511151231257827",
    "-0",
    "-0.0",
    "1E2",
    "1.5e+3",
    "NaN",
    "Infinity",
    "-Infinity",
    "[NaN, Infinity]",
    "01",
    "1.",
    ".5",
    "+1",
    "0x10",
    "-",
    # objects: duplicate keys (last wins, first position), nesting
    '{"a": 1, "b": 2, "a": 3}',
    '{"a": {"b": 1}, "a": [2]}',
    "[" * 200 + "]" * 200,
    "[" * 1100 + "]" * 1100,
    '{"a":' * 1100 + "1" + "}" * 1100,
    # strings: surrogates escaped and raw, control characters, escapes
    '"\\ud800"',
    '"\\udc00\\ud800"',
    '"\\ud83d\\ude00"',
    '"\ud800"',
    '{"\\ud800": 1}',
    '"\\u0000"',
    '"\x00"',
    '"\x01"',
    '"\t"',
    '"\x7f"',
    '"\\x41"',
    '"\\/"',
    '"\ufffe\uffff"',
    '"东京 🙂"',
    # whitespace: JSON's four, and others json.loads refuses
    " 1 ",
    "\n\r\t[1]\n",
    "\ufeff{}",
    "\x0c1",
    "{}\x0c",
    "[]\u00a0",
    "{}\u2028",
    "",
    "   ",
    # literals and garbage
    "true",
    "True",
    "null",
    "nul",
    "[1, 2,]",
    '{"a": 1,}',
    "{} {}",
    "[1] x",
    "// c\n1",
]


@needs_orjson
@pytest.mark.parametrize("text", TRICKY)
def test_orjson_path_matches_the_stdlib_on_tricky_documents(orjson_path: None, text: str) -> None:
    _check(text)


def test_stdlib_path_matches_json_loads_on_tricky_documents() -> None:
    before = fastjson.active()
    fastjson.use("stdlib")
    try:
        for text in TRICKY:
            _check(text)
    finally:
        fastjson.use(before)


_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text()
)
_values = st.recursive(
    _scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12,
)


@needs_orjson
@given(_values, st.booleans())
def test_orjson_path_matches_the_stdlib_on_generated_documents(
    value: Any, ascii_only: bool
) -> None:
    before = fastjson.active()
    fastjson.use("orjson")
    try:
        _check(json.dumps(value, ensure_ascii=ascii_only))
    finally:
        fastjson.use(before)


_JSONISH = st.text(alphabet=st.sampled_from(list('{}[]",:0123456789.eE+-\\u dtrfalsn\t\n\ud800')))


@needs_orjson
@given(_JSONISH)
def test_orjson_path_matches_the_stdlib_on_generated_text(text: str) -> None:
    before = fastjson.active()
    fastjson.use("orjson")
    try:
        _check(text)
    finally:
        fastjson.use(before)


def test_use_refuses_an_unknown_parser() -> None:
    with pytest.raises(ValueError, match="LLMCHAT_JSON"):
        fastjson.use("simdjson")


def test_use_stdlib_and_auto() -> None:
    before = fastjson.active()
    try:
        fastjson.use("stdlib")
        assert fastjson.active() == "stdlib"
        fastjson.use("auto")
        assert fastjson.active() == ("orjson" if fastjson.available() else "stdlib")
    finally:
        fastjson.use(before)


def test_use_orjson_without_it_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    # Runs whether or not orjson is installed: the module is made to look as if it were not.
    before = fastjson.active()
    monkeypatch.setattr(fastjson, "_orjson", None)
    try:
        assert not fastjson.available()
        with pytest.raises(ImportError, match="fast"):
            fastjson.use("orjson")
        fastjson.use("auto")
        assert fastjson.active() == "stdlib"
    finally:
        monkeypatch.undo()
        fastjson.use(before)


def _in_fresh_interpreter(code: str, choice: str | None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != fastjson.ENV_VAR}
    if choice is not None:
        env[fastjson.ENV_VAR] = choice
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)


_FIRST_PARSE = (
    "import sys; from llmchat import fastjson; before = 'orjson' in sys.modules; "
    "value = fastjson.loads('[1]'); "
    "print(before, 'orjson' in sys.modules, fastjson.active(), value)"
)


@pytest.mark.parametrize("choice", [None, "auto"])
def test_auto_imports_orjson_at_the_first_parse(choice: str | None) -> None:
    """Under ``auto`` the import costs nothing of orjson's; the first parse picks the parser."""
    done = _in_fresh_interpreter(_FIRST_PARSE, choice)
    assert done.returncode == 0, done.stderr
    parser = "orjson" if fastjson.available() else "stdlib"
    assert done.stdout.split() == ["False", str(parser == "orjson"), parser, "[1]"]


def test_active_names_the_parser_before_any_parse() -> None:
    code = "from llmchat import fastjson; print(fastjson.active())"
    done = _in_fresh_interpreter(code, None)
    assert done.stdout.strip() == ("orjson" if fastjson.available() else "stdlib"), done.stderr


@pytest.mark.parametrize(
    ("choice", "error"), [("simdjson", "ValueError: LLMCHAT_JSON must be one of"), ("stdlib", "")]
)
def test_a_named_parser_is_checked_at_import(choice: str, error: str) -> None:
    done = _in_fresh_interpreter("from llmchat import fastjson", choice)
    assert (done.returncode != 0) == bool(error)
    assert error in done.stderr
