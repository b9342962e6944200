"""wire_json: every dialect's schema positions send properties in `required` order."""

from __future__ import annotations

import json
from typing import Any

import pytest

from llmchat import wire_json

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "zeta": {"type": "string"},
        "alpha": {"type": "object", "properties": {"y": {}, "x": {}}, "required": ["y", "x"]},
        "mid": {"type": "integer"},
    },
    "required": ["zeta", "alpha"],
}
WIRE_ORDER = ["zeta", "alpha", "mid"]


def _find_schemas(value: Any) -> list[dict[str, Any]]:
    """Every decoded object that has a `properties` member, depth first."""
    found: list[dict[str, Any]] = []
    if isinstance(value, dict):
        if "properties" in value and "zeta" in value["properties"]:
            found.append(value)
        for member in value.values():
            found += _find_schemas(member)
    elif isinstance(value, list):
        for item in value:
            found += _find_schemas(item)
    return found


BODIES = {
    "anthropic tools": {"tools": [{"name": "f", "input_schema": SCHEMA}]},
    "anthropic output_format": {"output_format": {"type": "json_schema", "schema": SCHEMA}},
    "responses tools": {"tools": [{"type": "function", "name": "f", "parameters": SCHEMA}]},
    "responses text.format": {
        "text": {"format": {"type": "json_schema", "name": "out", "schema": SCHEMA}}
    },
    "ollama format": {"format": SCHEMA},
    "ollama tools": {"tools": [{"type": "function", "function": {"parameters": SCHEMA}}]},
    "gemini functionDeclarations": {
        "tools": [{"functionDeclarations": [{"name": "f", "parameters": SCHEMA}]}]
    },
    "gemini parametersJsonSchema": {
        "tools": [{"functionDeclarations": [{"name": "f", "parametersJsonSchema": SCHEMA}]}]
    },
    "gemini responseSchema": {"generationConfig": {"responseSchema": SCHEMA, "topK": 2}},
    "gemini responseJsonSchema": {"generationConfig": {"responseJsonSchema": SCHEMA}},
}


@pytest.mark.parametrize("name", sorted(BODIES))
def test_each_dialect_position_keeps_required_order(name: str) -> None:
    data = wire_json.encode(BODIES[name])
    decoded = json.loads(data)  # dicts keep the wire order
    (schema,) = _find_schemas(decoded)
    assert list(schema["properties"]) == WIRE_ORDER
    assert list(schema["properties"]["alpha"]["properties"]) == ["y", "x"]
    assert decoded == BODIES[name]  # nothing else changes
    assert wire_json.encode(BODIES[name]) == data  # deterministic


def test_ollama_format_json_string_is_data() -> None:
    assert wire_json.encode({"format": "json"}) == b'{"format":"json"}'


def test_schema_outside_a_position_is_sorted_data() -> None:
    data = wire_json.encode({"metadata": {"schema": SCHEMA}})
    (schema,) = _find_schemas(json.loads(data))
    assert list(schema["properties"]) == sorted(WIRE_ORDER)
