"""Checks on a client's JSON body, with errors that name the field as the client wrote it.

Shared by the Ollama and Anthropic faces: every message reads
``<field path>: must be ...`` so a client can find its mistake.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, TypeVar

from ..errors import InvalidArgumentError, InvalidTypeError

__all__ = [
    "integer",
    "json_type",
    "number",
    "optional_list",
    "require_bool",
    "require_list",
    "require_mapping",
    "require_str",
]

T = TypeVar("T")


def require_mapping(value: Any, where: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise InvalidTypeError(f"{where}: must be an object, not {json_type(value)}")
    return value


def require_str(value: Any, where: str) -> str:
    return _typed(value, where, str, "a string")


def require_bool(value: Any, where: str) -> bool:
    return _typed(value, where, bool, "a boolean")


def require_list(value: Any, where: str, what: str = "a list") -> list[Any]:
    """`value` when it is a JSON array; `what` names what the array must hold, for the error."""
    return _typed(value, where, list, what)


def optional_list(value: Any, where: str, what: str = "a list") -> list[Any]:
    """`require_list`, with an absent field (None) read as an empty list."""
    return [] if value is None else require_list(value, where, what)


def _typed(value: Any, where: str, kind: type[T], what: str) -> T:
    if not isinstance(value, kind):
        raise InvalidTypeError(f"{where}: must be {what}, not {json_type(value)}")
    return value


def number(value: Any, where: str) -> int | float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidTypeError(f"{where}: must be a number, not {json_type(value)}")
    if not math.isfinite(value):
        raise InvalidArgumentError(f"{where}: must be a finite number")
    return value


def integer(value: Any, where: str) -> int:
    if isinstance(value, float) and value.is_integer():
        # JSON has one number type; 40.0 is a fine way to write 40.
        return int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidTypeError(f"{where}: must be an integer, not {json_type(value)}")
    return value


def json_type(value: Any) -> str:
    """The JSON name of `value`'s type, as the client would recognise it."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, (list, tuple)):
        return "array"
    if isinstance(value, Mapping):
        return "object"
    return type(value).__name__
