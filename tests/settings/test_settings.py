"""Settings: defaults and shape, each field on the wire, json_schema, refusals (copies,
merging and a cheap import: test_settings_copies.py)."""

from __future__ import annotations

import dataclasses
import json
import math
from typing import Any

import pytest

from llmchat.errors import InvalidArgumentError, InvalidTypeError, LLMChatError
from llmchat.settings import Settings, checks

from .support import API_FIELDS, SCHEMA, field_names

# -- defaults and shape -----------------------------------------------------


def test_fields_match_api_md_in_order() -> None:
    assert field_names() == API_FIELDS


def test_every_field_has_a_check() -> None:
    assert set(checks.CHECKS) == set(API_FIELDS)


def test_defaults_are_all_none_and_send_nothing() -> None:
    s = Settings()
    assert all(getattr(s, name) is None for name in API_FIELDS)
    assert s.to_body() == {}
    assert s.set_fields() == {}
    assert not any(s.is_set(name) for name in API_FIELDS)


def test_fields_are_keyword_only() -> None:
    with pytest.raises(TypeError):
        Settings(64)  # type: ignore[misc]


def test_frozen() -> None:
    s = Settings(max_tokens=8)
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.max_tokens = 9  # type: ignore[misc]
    assert s.max_tokens == 8


def test_repr_shows_only_set_fields() -> None:
    assert repr(Settings()) == "Settings()"
    assert repr(Settings(temperature=0.2, max_tokens=64)) == (
        "Settings(max_tokens=64, temperature=0.2)"
    )


def test_equality_and_hash() -> None:
    assert Settings(max_tokens=5, stop=["a"]) == Settings(max_tokens=5, stop=("a",))
    assert Settings(max_tokens=5) != Settings(max_tokens=6)
    assert hash(Settings(max_tokens=5, stop=["a"])) == hash(Settings(max_tokens=5, stop=("a",)))
    # Mapping fields are dicts, so such a Settings cannot be hashed.
    with pytest.raises(TypeError):
        hash(Settings(extra_body={"a": 1}))


# -- each field on the wire --------------------------------------------------

ROUND_TRIPS = [
    ("max_tokens", 64, "max_tokens", 64),
    ("max_tokens", 1, "max_tokens", 1),
    ("temperature", 0.2, "temperature", 0.2),
    ("temperature", 0, "temperature", 0),
    ("top_p", 0.9, "top_p", 0.9),
    ("top_p", 1, "top_p", 1),
    ("top_k", 40, "top_k", 40),
    ("top_k", 0, "top_k", 0),
    ("min_p", 0.05, "min_p", 0.05),
    ("typical_p", 1.0, "typical_p", 1.0),
    ("repetition_penalty", 1.1, "repetition_penalty", 1.1),
    ("frequency_penalty", -2, "frequency_penalty", -2),
    ("presence_penalty", 2.0, "presence_penalty", 2.0),
    ("seed", -1, "seed", -1),
    ("seed", 2**40, "seed", 2**40),
    ("stop", "###", "stop", "###"),
    ("stop", "\n", "stop", "\n"),
    ("stop", ["a", "b"], "stop", ["a", "b"]),
    ("stop", ("x",), "stop", ["x"]),
    ("logit_bias", {50256: -100, "13": 5.5}, "logit_bias", {"50256": -100, "13": 5.5}),
    ("logprobs", True, "logprobs", True),
    ("top_logprobs", 20, "top_logprobs", 20),
    ("top_logprobs", 0, "top_logprobs", 0),
    ("reasoning_effort", "high", "reasoning_effort", "high"),
    ("reasoning_effort", "xhigh", "reasoning_effort", "xhigh"),
    ("reasoning_effort", "none", "reasoning_effort", "none"),
    ("reasoning_budget_tokens", 2048, "reasoning_budget_tokens", 2048),
    ("reasoning_budget_tokens", -1, "reasoning_budget_tokens", -1),
    ("reasoning_budget_tokens", 0, "reasoning_budget_tokens", 0),
    ("id_slot", 3, "id_slot", 3),
    ("id_slot", -1, "id_slot", -1),
    ("cache_prompt", False, "cache_prompt", False),
    ("parallel_tool_calls", False, "parallel_tool_calls", False),
    ("xtc_probability", 0.5, "xtc_probability", 0.5),
    ("xtc_threshold", 0.1, "xtc_threshold", 0.1),
    ("dry_multiplier", 0.8, "dry_multiplier", 0.8),
    ("dry_base", 1.75, "dry_base", 1.75),
    ("dry_base", 1, "dry_base", 1),
    ("dry_allowed_length", 2, "dry_allowed_length", 2),
    ("dry_sequence_breakers", ("\n", ":"), "dry_sequence_breakers", ["\n", ":"]),
    ("extra_body", {"mirostat": 2, "grammar": "root ::= x"}, "mirostat", 2),
]


@pytest.mark.parametrize(("field", "value", "wire", "wire_value"), ROUND_TRIPS)
def test_valid_value_reaches_the_body(field: str, value: Any, wire: str, wire_value: Any) -> None:
    s = Settings(**{field: value})
    body = s.to_body()
    assert body[wire] == wire_value
    assert type(body[wire]) is type(wire_value)
    if field != "extra_body":
        assert body == {wire: wire_value}
    assert s.is_set(field)
    assert list(s.set_fields()) == [field]


@pytest.mark.parametrize(
    ("field", "value"),
    [("json_schema_name", "answer"), ("json_schema_strict", True), ("max_context", 8192)],
)
def test_fields_not_sent_by_themselves(field: str, value: Any) -> None:
    s = Settings(**{field: value})
    assert s.is_set(field)
    assert s.to_body() == {}


def test_stored_sequences_are_tuples() -> None:
    s = Settings(stop=["a", "b"], dry_sequence_breakers=["\n"])
    assert s.stop == ("a", "b")
    assert s.dry_sequence_breakers == ("\n",)
    assert Settings(stop="a").stop == "a"


def test_full_body_is_json_ready() -> None:
    s = Settings(
        max_tokens=10,
        temperature=0.5,
        stop=("a", "b"),
        logit_bias={1: 2, "x": -3.5},
        json_schema=SCHEMA,
        dry_sequence_breakers=("\n",),
        extra_body={"nested": {"tuple": (1, 2)}},
    )
    body = s.to_body()
    # A tuple anywhere would come back as a list and break the equality.
    assert json.loads(json.dumps(body, allow_nan=False)) == body


# -- json_schema -> response_format ------------------------------------------


def test_json_schema_defaults_in_response_format() -> None:
    assert Settings(json_schema=SCHEMA).to_body() == {
        "response_format": {
            "type": "json_schema",
            "json_schema": {"name": "response", "schema": SCHEMA, "strict": False},
        }
    }


def test_json_schema_with_name_and_strict() -> None:
    s = Settings(json_schema=SCHEMA, json_schema_name="verdict-v2_1", json_schema_strict=True)
    assert s.to_body() == {
        "response_format": {
            "type": "json_schema",
            "json_schema": {"name": "verdict-v2_1", "schema": SCHEMA, "strict": True},
        }
    }


def test_json_schema_strict_false_is_sent_as_false() -> None:
    body = Settings(json_schema=SCHEMA, json_schema_strict=False).to_body()
    assert body["response_format"]["json_schema"]["strict"] is False


def test_known_schema_dialect_is_accepted() -> None:
    schema = {"$schema": "http://json-schema.org/draft-07/schema#", "type": "string"}
    assert Settings(json_schema=schema).json_schema == schema


@pytest.mark.parametrize(
    ("schema", "fragment"),
    [
        ({"type": "objekt"}, "'objekt'"),
        ({"properties": 5}, "5 is not of type 'object'"),
        ({"required": "answer"}, "'answer' is not of type 'array'"),
        ({"minimum": "3"}, "'3' is not of type 'number'"),
        ({"type": "object", "properties": {"a": {"type": 7}}}, "7"),
    ],
)
def test_invalid_json_schema_names_the_field(schema: dict[str, Any], fragment: str) -> None:
    with pytest.raises(ValueError) as caught:
        Settings(json_schema=schema)
    assert isinstance(caught.value, InvalidArgumentError)
    assert isinstance(caught.value, LLMChatError)
    message = str(caught.value)
    assert "Settings.json_schema" in message
    assert fragment in message
    # jsonschema's short message, not its multi-line dump.
    assert "Failed validating" not in message
    assert "\n" not in message


def test_invalid_json_schema_reports_where() -> None:
    with pytest.raises(InvalidArgumentError, match=r"\$\.properties"):
        Settings(json_schema={"properties": 5})


@pytest.mark.parametrize("dialect", ["https://example.com/my-schema", 5, ["x"]])
def test_unknown_schema_dialect_is_refused(dialect: Any) -> None:
    with pytest.raises(InvalidArgumentError, match=r"Settings\.json_schema .*\$schema"):
        Settings(json_schema={"$schema": dialect, "type": "string"})


@pytest.mark.parametrize("schema", [True, [SCHEMA], "object"])
def test_json_schema_must_be_a_mapping(schema: Any) -> None:
    with pytest.raises(TypeError) as caught:
        Settings(json_schema=schema)
    assert isinstance(caught.value, InvalidTypeError)
    assert "Settings.json_schema" in str(caught.value)


def test_json_schema_must_hold_json() -> None:
    with pytest.raises(InvalidArgumentError, match=r"Settings\.json_schema\['maximum'\]"):
        Settings(json_schema={"type": "number", "maximum": math.inf})
    with pytest.raises(InvalidTypeError, match=r"Settings\.json_schema\['properties'\] keys"):
        Settings(json_schema={"type": "object", "properties": {1: {"type": "string"}}})


# -- refusals ------------------------------------------------------------------

REFUSALS = [
    ({"max_tokens": -1}, InvalidArgumentError),
    ({"max_tokens": 0}, InvalidArgumentError),
    ({"max_tokens": True}, InvalidTypeError),
    ({"max_tokens": 1.5}, InvalidTypeError),
    ({"max_tokens": "64"}, InvalidTypeError),
    ({"temperature": True}, InvalidTypeError),
    ({"temperature": "0.2"}, InvalidTypeError),
    ({"temperature": math.nan}, InvalidArgumentError),
    ({"temperature": math.inf}, InvalidArgumentError),
    ({"temperature": -0.1}, InvalidArgumentError),
    ({"top_p": 1.5}, InvalidArgumentError),
    ({"top_p": -0.01}, InvalidArgumentError),
    ({"top_p": False}, InvalidTypeError),
    ({"top_k": -1}, InvalidArgumentError),
    ({"min_p": 2}, InvalidArgumentError),
    ({"typical_p": -1}, InvalidArgumentError),
    ({"repetition_penalty": 0}, InvalidArgumentError),
    ({"frequency_penalty": 2.5}, InvalidArgumentError),
    ({"presence_penalty": -2.01}, InvalidArgumentError),
    ({"seed": 1.0}, InvalidTypeError),
    ({"seed": False}, InvalidTypeError),
    ({"top_logprobs": 21}, InvalidArgumentError),
    ({"top_logprobs": -1}, InvalidArgumentError),
    ({"reasoning_budget_tokens": -2}, InvalidArgumentError),
    ({"id_slot": -2}, InvalidArgumentError),
    ({"max_context": 0}, InvalidArgumentError),
    ({"xtc_probability": 1.01}, InvalidArgumentError),
    ({"xtc_threshold": 1.1}, InvalidArgumentError),
    ({"dry_multiplier": -1}, InvalidArgumentError),
    ({"dry_base": 0.5}, InvalidArgumentError),
    ({"dry_allowed_length": -1}, InvalidArgumentError),
    ({"logprobs": 1}, InvalidTypeError),
    ({"cache_prompt": "yes"}, InvalidTypeError),
    ({"parallel_tool_calls": 0}, InvalidTypeError),
    ({"json_schema_strict": "true"}, InvalidTypeError),
    ({"stop": ""}, InvalidArgumentError),
    ({"stop": 5}, InvalidTypeError),
    ({"stop": {"a"}}, InvalidTypeError),
    ({"stop": ["a", 3]}, InvalidTypeError),
    ({"stop": ["a", ""]}, InvalidArgumentError),
    ({"dry_sequence_breakers": "abc"}, InvalidTypeError),
    ({"dry_sequence_breakers": [None]}, InvalidTypeError),
    ({"logit_bias": [1, 2]}, InvalidTypeError),
    ({"logit_bias": {1: 101}}, InvalidArgumentError),
    ({"logit_bias": {1: -100.5}}, InvalidArgumentError),
    ({"logit_bias": {1: math.nan}}, InvalidArgumentError),
    ({"logit_bias": {1: "x"}}, InvalidTypeError),
    ({"logit_bias": {-1: 1}}, InvalidArgumentError),
    ({"logit_bias": {"": 1}}, InvalidArgumentError),
    ({"logit_bias": {True: 1}}, InvalidTypeError),
    ({"logit_bias": {1.0: 1}}, InvalidTypeError),
    ({"logit_bias": {1: 1, "1": 2}}, InvalidArgumentError),
    ({"json_schema_name": "has space"}, InvalidArgumentError),
    ({"json_schema_name": "a" * 65}, InvalidArgumentError),
    ({"json_schema_name": "name\n"}, InvalidArgumentError),
    ({"json_schema_name": ""}, InvalidArgumentError),
    ({"json_schema_name": 5}, InvalidTypeError),
    ({"reasoning_effort": ""}, InvalidArgumentError),
    ({"reasoning_effort": 3}, InvalidTypeError),
    ({"extra_body": [("a", 1)]}, InvalidTypeError),
    ({"extra_body": {1: 2}}, InvalidTypeError),
    ({"extra_body": {"a": {1, 2}}}, InvalidTypeError),
    ({"extra_body": {"a": [math.nan]}}, InvalidArgumentError),
]


@pytest.mark.parametrize(("kwargs", "error"), REFUSALS)
def test_invalid_value_is_refused_naming_the_field(
    kwargs: dict[str, Any], error: type[LLMChatError]
) -> None:
    (field,) = kwargs
    builtin = ValueError if error is InvalidArgumentError else TypeError
    with pytest.raises(builtin) as caught:
        Settings(**kwargs)
    assert type(caught.value) is error
    assert isinstance(caught.value, LLMChatError)
    assert f"Settings.{field}" in str(caught.value)


def test_refusal_messages_say_the_fix() -> None:
    with pytest.raises(InvalidArgumentError) as caught:
        Settings(max_tokens=-1)
    assert str(caught.value) == "Settings.max_tokens must be an int >= 1, got -1"
    with pytest.raises(InvalidTypeError) as caught_type:
        Settings(temperature=True)
    assert str(caught_type.value).endswith("got bool True")
    with pytest.raises(InvalidArgumentError, match=r"in \[0, 1\], got 1\.5$"):
        Settings(top_p=1.5)
