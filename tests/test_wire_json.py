"""wire_json.encode: fixed bytes, schema order, refusals."""

from __future__ import annotations

import json
import math
import random
import subprocess
import sys
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from llmchat import wire_json
from llmchat.errors import InvalidArgumentError, InvalidTypeError, LLMChatError

# -- strategies -------------------------------------------------------------

keys = st.text(max_size=8)
scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12)
)
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(keys, inner, max_size=4),
    max_leaves=25,
)

SCHEMA_MAPS = ("$defs", "definitions", "patternProperties", "dependentSchemas")
SCHEMA_LISTS = ("allOf", "anyOf", "oneOf", "prefixItems")
SCHEMA_ONE = ("additionalProperties", "not", "if", "then", "else", "contains", "propertyNames")


@st.composite
def schemas(draw: st.DrawFn, depth: int = 2) -> dict[str, Any]:
    """A random JSON Schema object with properties, required and nested sub-schemas."""
    schema: dict[str, Any] = {"type": draw(st.sampled_from(["object", "array", "string"]))}
    names = draw(st.lists(st.text(min_size=1, max_size=6), unique=True, max_size=5))
    if names or draw(st.booleans()):
        leaf = st.just({"type": "string"})
        children = leaf if depth == 0 else st.one_of(leaf, schemas(depth=depth - 1))
        schema["properties"] = {name: draw(children) for name in names}
        required = draw(st.permutations(names)) if names else []
        required = required[: draw(st.integers(0, len(required)))]
        if draw(st.booleans()):
            required = [*required, "ghost-name"]
        if required or draw(st.booleans()):
            schema["required"] = required
    if depth > 0:
        if draw(st.booleans()):
            schema["items"] = draw(schemas(depth=depth - 1))
        keyword = draw(st.sampled_from(SCHEMA_MAPS + SCHEMA_LISTS + SCHEMA_ONE))
        if keyword in SCHEMA_MAPS:
            schema[keyword] = {"A": draw(schemas(depth=depth - 1)), "b": {"type": "null"}}
        elif keyword in SCHEMA_LISTS:
            schema[keyword] = [draw(schemas(depth=depth - 1)), draw(schemas(depth=depth - 1))]
        else:
            schema[keyword] = draw(schemas(depth=depth - 1))
    if draw(st.booleans()):
        schema["default"] = draw(st.dictionaries(keys, scalars, max_size=3))
    if draw(st.booleans()):
        schema["enum"] = [draw(st.dictionaries(keys, scalars, max_size=3))]
    return schema


@st.composite
def bodies(draw: st.DrawFn) -> dict[str, Any]:
    """A request body with a schema in every position wire_json knows."""
    body: dict[str, Any] = {
        "model": draw(st.text(max_size=10)),
        "messages": draw(st.lists(st.dictionaries(keys, scalars, max_size=4), max_size=3)),
    }
    if draw(st.booleans()):
        body["tools"] = [
            {"type": "function", "function": {"name": "f", "parameters": draw(schemas())}}
        ]
    if draw(st.booleans()):
        body["functions"] = [{"name": "g", "parameters": draw(schemas())}]
    which = draw(st.sampled_from(["json_schema", "schema", "top", None]))
    if which == "json_schema":
        body["response_format"] = {
            "type": "json_schema",
            "json_schema": {"name": "r", "schema": draw(schemas()), "strict": True},
        }
    elif which == "schema":
        body["response_format"] = {"type": "json_object", "schema": draw(schemas())}
    elif which == "top":
        body["json_schema"] = draw(schemas())
    return body


def shuffled(value: Any, rnd: random.Random) -> Any:
    """The same JSON value with every object's members inserted in a random order."""
    if isinstance(value, dict):
        items = list(value.items())
        rnd.shuffle(items)
        return {key: shuffled(member, rnd) for key, member in items}
    if isinstance(value, list):
        return [shuffled(member, rnd) for member in value]
    return value


def pairs(data: bytes) -> Any:
    """Parse keeping member order: objects become lists of (key, value)."""
    return json.loads(data, object_pairs_hook=list)


# -- an independent reading of where schemas are -------------------------------


def schema_nodes(body: list[tuple[str, Any]]) -> list[list[tuple[str, Any]]]:
    """Every schema object in a parsed body (objects as pair lists), at any depth."""
    found: list[list[tuple[str, Any]]] = []
    top = dict(body)

    def visit(node: Any) -> None:
        if not isinstance(node, list) or (node and not isinstance(node[0], tuple)):
            return
        found.append(node)
        for key, member in node:
            if key in ("properties", *SCHEMA_MAPS):
                for _, sub in member:
                    visit(sub)
            elif key in (*SCHEMA_LISTS, "items"):
                subs = (
                    member
                    if isinstance(member, list) and (not member or not isinstance(member[0], tuple))
                    else [member]
                )
                for sub in subs:
                    visit(sub)
            elif key in SCHEMA_ONE:
                visit(member)

    for tool in top.get("tools", []):
        visit(dict(dict(tool)["function"])["parameters"])
    for function in top.get("functions", []):
        visit(dict(function)["parameters"])
    response_format = dict(top.get("response_format", []))
    if "json_schema" in response_format:
        visit(dict(response_format["json_schema"])["schema"])
    if "schema" in response_format:
        visit(response_format["schema"])
    if "json_schema" in top:
        visit(top["json_schema"])
    return found


def all_objects_sorted(node: Any) -> bool:
    if isinstance(node, list) and node and isinstance(node[0], tuple):
        names = [key for key, _ in node]
        return names == sorted(names) and all(all_objects_sorted(v) for _, v in node)
    if isinstance(node, list):
        return all(all_objects_sorted(v) for v in node)
    return True


# -- properties -------------------------------------------------------------


@given(bodies(), st.randoms(use_true_random=False))
def test_insertion_order_never_changes_the_bytes(body: dict[str, Any], rnd: random.Random) -> None:
    assert wire_json.encode(shuffled(body, rnd)) == wire_json.encode(body)


@given(json_values)
def test_round_trips_any_json_value(value: Any) -> None:
    assert json.loads(wire_json.encode(value)) == value


@given(bodies())
def test_round_trips_bodies(body: dict[str, Any]) -> None:
    assert json.loads(wire_json.encode(body)) == body


@given(bodies())
def test_properties_follow_required_at_every_depth(body: dict[str, Any]) -> None:
    nodes = schema_nodes(pairs(wire_json.encode(body)))
    for node in nodes:
        members = dict(node)
        names = [key for key, _ in node]
        assert names == sorted(names), "a schema's own members are sorted"
        if "properties" not in members:
            continue
        written = [name for name, _ in members["properties"]]
        required = members.get("required", [])
        head = list(dict.fromkeys(name for name in required if name in written))
        assert written == head + sorted(name for name in written if name not in head)


@given(bodies())
def test_messages_are_data(body: dict[str, Any]) -> None:
    body["messages"].append(
        {"role": "user", "properties": {"b": 1, "a": 2}, "required": ["b"], "content": "x"}
    )
    parsed = dict(pairs(wire_json.encode(body)))
    assert all_objects_sorted(parsed["messages"])
    assert [key for key, _ in dict(parsed["messages"][-1])["properties"]] == ["a", "b"]


def test_required_order_is_the_order_the_model_writes() -> None:
    schema = {
        "type": "object",
        "properties": {"change": {}, "evidence": {}, "note": {}},
        "required": ["evidence", "change"],
    }
    body = {"response_format": {"type": "json_schema", "json_schema": {"schema": schema}}}
    text = wire_json.encode(body).decode()
    assert text.index('"evidence"') < text.index('"change"') < text.index('"note"')


def test_same_bytes_in_every_process() -> None:
    """String hashing is randomised per process; the bytes must not be."""
    script = (
        "import sys, hashlib; from llmchat import wire_json; "
        "body = {'b': {'z': 1, 'y': [{'q': 1, 'p': 2}]}, 'a': 'é', "
        "'tools': [{'function': {'parameters': {'properties': {'x': {}, 'w': {}, 'v': {}}, "
        "'required': ['w']}}}]}; "
        "sys.stdout.write(hashlib.sha256(wire_json.encode(body)).hexdigest())"
    )
    digests = {
        subprocess.run(
            [sys.executable, "-c", script],
            env={"PYTHONHASHSEED": seed, "PATH": ""},
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for seed in ("1", "2", "3", "random")
    }
    assert len(digests) == 1


# -- refusals ---------------------------------------------------------------


@pytest.mark.parametrize("number", [math.nan, math.inf, -math.inf])
def test_non_finite_floats_are_refused_with_their_path(number: float) -> None:
    with pytest.raises(ValueError, match=r"body\.messages\[1\]\.x") as info:
        wire_json.encode({"messages": [{}, {"x": number}]})
    assert isinstance(info.value, InvalidArgumentError)
    assert isinstance(info.value, LLMChatError)


@pytest.mark.parametrize("key", [1, 1.5, None, True, ("t",)])
def test_non_string_keys_are_refused(key: Any) -> None:
    with pytest.raises(ValueError, match=r"body\.tools\[0\]: object keys must be strings"):
        wire_json.encode({"tools": [{key: 1}]})


def test_top_level_non_string_key_is_refused() -> None:
    with pytest.raises(ValueError, match="object keys must be strings"):
        wire_json.encode({1: 2})


def test_unsupported_values_are_a_type_error_naming_the_path() -> None:
    with pytest.raises(TypeError, match=r"body\.a\.b: a set cannot be sent") as info:
        wire_json.encode({"a": {"b": {1, 2}}})
    assert isinstance(info.value, InvalidTypeError)


def test_lone_surrogate_is_refused() -> None:
    with pytest.raises(ValueError, match="lone surrogate"):
        wire_json.encode({"content": "a\ud800b"})


def test_any_mapping_and_tuples_are_accepted() -> None:
    body: Mapping[str, Any] = MappingProxyType(
        {"b": MappingProxyType({"y": 1, "x": (1, 2)}), "a": [MappingProxyType({"k": None})]}
    )
    assert wire_json.encode(body) == b'{"a":[{"k":null}],"b":{"x":[1,2],"y":1}}'


def test_input_is_not_changed() -> None:
    body = {"json_schema": {"properties": {"b": {}, "a": {}}, "required": ["b"]}}
    snapshot = json.dumps(body)
    wire_json.encode(body)
    assert json.dumps(body) == snapshot


def test_non_schema_values_in_schema_positions_are_data() -> None:
    body = {
        "tools": [{"function": {"parameters": True}}, "odd"],
        "response_format": {"json_schema": {"schema": None}},
        "json_schema": {"properties": [1, 2], "items": 3, "anyOf": {"b": 1, "a": 2}},
    }
    assert json.loads(wire_json.encode(body)) == body


# -- encode_data: the translators' line encoder ----------------------------------

_SCHEMA_POSITIONS = {"tools", "functions", "response_format", "json_schema"}


@given(json_values)
def test_encode_data_matches_encode_on_plain_data(value: Any) -> None:
    if isinstance(value, dict) and _SCHEMA_POSITIONS & set(value):
        return  # encode reads those top-level members as schemas; encode_data never does
    assert wire_json.encode_data(value) == wire_json.encode(value)


def test_encode_data_never_reorders_a_schema() -> None:
    arguments = {
        "tools": [
            {"function": {"parameters": {"required": ["b", "a"], "properties": {"a": {}, "b": {}}}}}
        ]
    }
    text = wire_json.encode_data(arguments).decode()
    assert text.index('"a"') < text.index('"b"')  # sorted data, not required order
    assert json.loads(text) == arguments


@pytest.mark.parametrize(
    ("value", "error", "words"),
    [
        ({"a": [float("nan")]}, InvalidArgumentError, "body.a[0]"),
        ({"a": "\ud800"}, InvalidArgumentError, "lone surrogate"),
        ({"a": {"b": object()}}, InvalidTypeError, "body.a.b"),
    ],
)
def test_encode_data_refuses_what_encode_refuses(value: Any, error: type, words: str) -> None:
    with pytest.raises(error, match=words.replace("[", r"\[").replace("]", r"\]")):
        wire_json.encode_data(value)
