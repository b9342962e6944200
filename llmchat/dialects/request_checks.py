"""The checks request builders make of what a caller passes, in one wording.

Each raises llmchat's `InvalidTypeError` / `InvalidArgumentError` naming where
the value sits (``messages[2].tool_calls[0]``, ``tools[1].function``), never
the value itself.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..errors import InvalidArgumentError, InvalidTypeError

__all__ = ["mapping_at", "name_at"]


def mapping_at(value: object, where: str) -> Mapping[str, Any]:
    """`value` when it is a mapping; `InvalidTypeError` naming `where` otherwise."""
    if not isinstance(value, Mapping):
        raise InvalidTypeError(f"{where} must be a mapping")
    return value


def name_at(mapping: Mapping[str, Any], where: str, *, noun: str = "str") -> str:
    """``mapping["name"]`` when it is a non-empty str; `InvalidArgumentError` otherwise.

    `noun` is the word the message uses for the type (Ollama's builder has
    always said "string").
    """
    name = mapping.get("name")
    if not isinstance(name, str) or not name:
        raise InvalidArgumentError(f"{where}.name must be a non-empty {noun}")
    return name
