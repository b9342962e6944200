"""Gemini's ``Schema`` (an OpenAPI 3.0 subset) as JSON Schema; pure.

Gemini's ``parameters`` and ``responseSchema`` write types in upper case
(``"OBJECT"``, ``"STRING"``) and nullability as ``nullable: true``; an
OpenAI upstream wants JSON Schema: ``"object"``, ``["string", "null"]``.
Walked through ``properties``, ``items`` and ``anyOf``; ``propertyOrdering``
(Gemini's own) and ``example`` (OpenAPI's) are left out, every other keyword
is kept as given. ``parametersJsonSchema``/``responseJsonSchema`` are JSON
Schema already and are sent as given but for their type names
(`json_schema_types`): Gemini CLI's routing classifier writes ``"OBJECT"``
there, which Google accepts and llama-server refuses ("unrecognized type").
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from ...field_checks import require_mapping

__all__ = ["json_schema", "json_schema_types"]

_LEFT_OUT: Final = frozenset({"propertyOrdering", "example", "nullable"})


def json_schema(value: Any, where: str) -> dict[str, Any]:
    """The Gemini `Schema` at `where` as a JSON Schema (a new dict)."""
    schema = require_mapping(value, where)
    out: dict[str, Any] = {}
    for key, member in schema.items():
        if key in _LEFT_OUT:
            continue
        if key == "type":
            if member != "TYPE_UNSPECIFIED":
                out[key] = _type(member)
        elif key == "properties" and isinstance(member, Mapping):
            out[key] = {
                name: json_schema(sub, f"{where}.properties.{name}") for name, sub in member.items()
            }
        elif key == "items" and isinstance(member, Mapping):
            out[key] = json_schema(member, f"{where}.items")
        elif key == "anyOf" and isinstance(member, list):
            out[key] = [json_schema(sub, f"{where}.anyOf[{i}]") for i, sub in enumerate(member)]
        else:
            out[key] = member
    if schema.get("nullable") is True and isinstance(out.get("type"), str):
        out["type"] = [out["type"], "null"]
    return out


# Where a JSON Schema nests schemas: one, a list of them, or a map of names to them.
_ONE: Final = ("items", "additionalProperties", "not", "contains", "if", "then", "else")
_LISTS: Final = ("anyOf", "oneOf", "allOf", "prefixItems")
_MAPS: Final = ("properties", "$defs", "definitions", "patternProperties")
_TYPES: Final = frozenset({"OBJECT", "ARRAY", "STRING", "INTEGER", "NUMBER", "BOOLEAN", "NULL"})


def json_schema_types(value: Any) -> Any:
    """A JSON Schema with Gemini's upper-case type names (``"OBJECT"``) in lower case; a
    new dict where anything changed, every other keyword as given."""
    if not isinstance(value, Mapping):
        return value
    out = dict(value)
    kind = out.get("type")
    if isinstance(kind, str) and kind in _TYPES:
        out["type"] = kind.lower()
    elif isinstance(kind, list):
        out["type"] = [k.lower() if isinstance(k, str) and k in _TYPES else k for k in kind]
    for key in _ONE:
        if isinstance(out.get(key), Mapping):
            out[key] = json_schema_types(out[key])
    for key in _LISTS:
        if isinstance(out.get(key), list):
            out[key] = [json_schema_types(sub) for sub in out[key]]
    for key in _MAPS:
        if isinstance(out.get(key), Mapping):
            out[key] = {name: json_schema_types(sub) for name, sub in out[key].items()}
    return out


def _type(value: Any) -> Any:
    if isinstance(value, str):
        return value.lower()
    if isinstance(value, list):
        return [item.lower() if isinstance(item, str) else item for item in value]
    return value
