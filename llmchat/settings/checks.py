"""Checking each `Settings` field's value: types, bounds, JSON Schemas, JSON-only values.

Every check takes (field name, value), returns the value to store, and raises
`InvalidArgumentError` (a `ValueError`) or `InvalidTypeError` (a `TypeError`)
naming the field. `CHECKS` maps each field to its check.
"""

from __future__ import annotations

import dataclasses
import math
import re
import reprlib
from collections.abc import Callable, Mapping
from typing import Any, Final

from ..errors import InvalidArgumentError, InvalidTypeError

__all__ = ["CHECKS", "describe"]

_Check = Callable[[str, Any], Any]

# OpenAI's rule for `response_format.json_schema.name`.
_SCHEMA_NAME: Final = re.compile(r"[A-Za-z0-9_-]{1,64}")

_JSON_TYPES: Final = "dict, list, tuple, str, int, float, bool or None"


def describe(value: Any) -> str:
    return f"{type(value).__name__} {reprlib.repr(value)}"


@dataclasses.dataclass(frozen=True, slots=True)
class _Bounds:
    """An interval for a numeric field, and how to say it in an error message."""

    low: float | None = None
    high: float | None = None
    low_open: bool = False
    note: str = ""

    def __contains__(self, value: float) -> bool:
        if self.low is not None and (value <= self.low if self.low_open else value < self.low):
            return False
        return self.high is None or value <= self.high

    def describe(self, kind: str) -> str:
        if self.high is not None:
            kind += f" in [{self.low}, {self.high}]"
        elif self.low is not None:
            kind += f" {'>' if self.low_open else '>='} {self.low}"
        return kind + self.note


def _int(bounds: _Bounds) -> _Check:
    def check(name: str, value: Any) -> int:
        # bool is an int subclass, but `max_tokens=True` is a caller mistake.
        if isinstance(value, bool) or not isinstance(value, int):
            raise InvalidTypeError(
                f"Settings.{name} must be {bounds.describe('an int')}, got {describe(value)}"
            )
        if value not in bounds:
            raise InvalidArgumentError(
                f"Settings.{name} must be {bounds.describe('an int')}, got {value!r}"
            )
        return value

    return check


def _number(bounds: _Bounds) -> _Check:
    def check(name: str, value: Any) -> float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise InvalidTypeError(
                f"Settings.{name} must be {bounds.describe('a number (int or float)')}, "
                f"got {describe(value)}"
            )
        if (isinstance(value, float) and not math.isfinite(value)) or value not in bounds:
            raise InvalidArgumentError(
                f"Settings.{name} must be {bounds.describe('a finite number')}, got {value!r}"
            )
        return value

    return check


def _bool(name: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise InvalidTypeError(f"Settings.{name} must be True or False, got {describe(value)}")
    return value


def _text(name: str, value: Any) -> str:
    if not isinstance(value, str):
        raise InvalidTypeError(f"Settings.{name} must be a non-empty str, got {describe(value)}")
    if not value:
        raise InvalidArgumentError(f"Settings.{name} must be a non-empty str, got {value!r}")
    return value


def _schema_name(name: str, value: Any) -> str:
    text = _text(name, value)
    # fullmatch, not `$`: `$` would let a trailing newline through.
    if not _SCHEMA_NAME.fullmatch(text):
        raise InvalidArgumentError(
            f"Settings.{name} must be 1-64 characters from A-Z, a-z, 0-9, '_' and '-', got {text!r}"
        )
    return text


def _strings(name: str, value: Any) -> tuple[str, ...]:
    if not isinstance(value, (list, tuple)):
        raise InvalidTypeError(
            f"Settings.{name} must be a list or tuple of str, got {describe(value)}"
        )
    for index, item in enumerate(value):
        # An empty stop string (or DRY breaker) matches everywhere.
        _text(f"{name}[{index}]", item)
    return tuple(value)


def _stop(name: str, value: Any) -> str | tuple[str, ...]:
    if isinstance(value, str):
        return _text(name, value)
    if not isinstance(value, (list, tuple)):
        raise InvalidTypeError(
            f"Settings.{name} must be a str or a list/tuple of str, got {describe(value)}"
        )
    return _strings(name, value)


def _mapping(name: str, value: Any, what: str) -> Mapping[Any, Any]:
    if not isinstance(value, Mapping):
        raise InvalidTypeError(f"Settings.{name} must be {what}, got {describe(value)}")
    return value


_BIAS: Final = _number(_Bounds(-100, 100))


def _logit_bias(name: str, value: Any) -> dict[int | str, float]:
    mapping = _mapping(name, value, "a mapping of token id (int or str) to a number")
    out: dict[int | str, float] = {}
    wire_keys: set[str] = set()
    for token, bias in mapping.items():
        if isinstance(token, bool) or not isinstance(token, (int, str)):
            raise InvalidTypeError(
                f"Settings.{name} keys must be token ids (int or str), got {describe(token)}"
            )
        if token == "" or (isinstance(token, int) and token < 0):
            raise InvalidArgumentError(
                f"Settings.{name} keys must be an int >= 0 or a non-empty str, got {token!r}"
            )
        # The wire form has string keys, so 5 and "5" would silently collide.
        if str(token) in wire_keys:
            raise InvalidArgumentError(f"Settings.{name} has token {str(token)!r} twice")
        wire_keys.add(str(token))
        out[token] = _BIAS(f"{name}[{token!r}]", bias)
    return out


def _json_copy(value: Any, where: str) -> Any:
    """Return a deep copy of `value` made of dicts and lists, or raise if it is not JSON."""
    if value is None or isinstance(value, (str, int)):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise InvalidArgumentError(f"{where} must be a finite number, got {value!r}")
        return value
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise InvalidTypeError(f"{where} keys must be str, got {describe(key)}")
            out[key] = _json_copy(item, f"{where}[{key!r}]")
        return out
    if isinstance(value, (list, tuple)):
        return [_json_copy(item, f"{where}[{index}]") for index, item in enumerate(value)]
    raise InvalidTypeError(f"{where} must hold only {_JSON_TYPES}, got {describe(value)}")


def _extra_body(name: str, value: Any) -> dict[str, Any]:
    _mapping(name, value, "a mapping with str keys")
    copied: dict[str, Any] = _json_copy(value, f"Settings.{name}")
    return copied


def _json_schema(name: str, value: Any) -> dict[str, Any]:
    # A bare `true`/`false` schema is valid JSON Schema, but `response_format`
    # needs an object.
    _mapping(name, value, "a JSON Schema object (a mapping)")
    schema: dict[str, Any] = _json_copy(value, f"Settings.{name}")
    # Imported here: jsonschema takes ~150 ms to import, and `import llmchat`
    # must stay cheap for callers who never send a schema.
    from jsonschema.exceptions import SchemaError
    from jsonschema.validators import validator_for

    dialect = schema.get("$schema")
    # Given a default, validator_for reports an unknown `$schema` by returning it
    # instead of warning and quietly validating against the latest draft.
    validator = None
    if isinstance(dialect, str):
        # The stub's `default` type omits None, which the runtime accepts.
        validator = validator_for(schema, default=None)  # type: ignore[arg-type]
    if "$schema" in schema and validator is None:
        raise InvalidArgumentError(
            f"Settings.{name} has an unknown $schema {dialect!r}; "
            "use a known draft's URI or leave $schema out"
        )
    try:
        (validator or validator_for(schema)).check_schema(schema)
    except SchemaError as error:
        raise InvalidArgumentError(
            f"Settings.{name} is not a valid JSON Schema: {error.message} (at {error.json_path})"
        ) from error
    return schema


CHECKS: Final[dict[str, _Check]] = {
    # Each takes (field name, value) and returns the value to store.
    "max_tokens": _int(_Bounds(1)),
    "temperature": _number(_Bounds(0)),
    "top_p": _number(_Bounds(0, 1)),
    "top_k": _int(_Bounds(0)),
    "min_p": _number(_Bounds(0, 1)),
    "typical_p": _number(_Bounds(0, 1)),
    "repetition_penalty": _number(_Bounds(0, low_open=True)),
    "frequency_penalty": _number(_Bounds(-2, 2)),
    "presence_penalty": _number(_Bounds(-2, 2)),
    "seed": _int(_Bounds()),
    "stop": _stop,
    "logit_bias": _logit_bias,
    "logprobs": _bool,
    "top_logprobs": _int(_Bounds(0, 20)),
    "json_schema": _json_schema,
    "json_schema_name": _schema_name,
    "json_schema_strict": _bool,
    "reasoning_effort": _text,
    "reasoning_budget_tokens": _int(_Bounds(-1, note=" (-1 means unlimited)")),
    "id_slot": _int(_Bounds(-1, note=" (-1 lets the server choose)")),
    "cache_prompt": _bool,
    "parallel_tool_calls": _bool,
    "max_context": _int(_Bounds(1)),
    "xtc_probability": _number(_Bounds(0, 1)),
    "xtc_threshold": _number(_Bounds(0, 1)),
    "dry_multiplier": _number(_Bounds(0)),
    # DRY's penalty is multiplier * base ** (repeat length - allowed length): a
    # base below 1 would shrink the penalty as the repeat grows, inverting it.
    "dry_base": _number(_Bounds(1)),
    "dry_allowed_length": _int(_Bounds(0)),
    "dry_sequence_breakers": _strings,
    "extra_body": _extra_body,
}
