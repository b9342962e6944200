"""Settings: validation, wire names, copies, merging and a cheap import."""

from __future__ import annotations

import copy
import dataclasses
import json
import math
import subprocess
import sys
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from llmchat.errors import InvalidArgumentError, InvalidTypeError, LLMChatError
from llmchat.settings import Settings, checks

from ..support.paths import REPO_ROOT

# The field list from API.md, in its order.
API_FIELDS = (
    "max_tokens temperature top_p top_k min_p typical_p repetition_penalty "
    "frequency_penalty presence_penalty seed stop logit_bias logprobs top_logprobs "
    "json_schema json_schema_name json_schema_strict reasoning_effort "
    "reasoning_budget_tokens id_slot cache_prompt parallel_tool_calls max_context "
    "xtc_probability xtc_threshold dry_multiplier dry_base dry_allowed_length "
    "dry_sequence_breakers extra_body"
).split()

SCHEMA = {
    "type": "object",
    "properties": {"answer": {"type": "string"}, "score": {"type": "integer"}},
    "required": ["answer"],
}


def field_names() -> list[str]:
    return [field.name for field in dataclasses.fields(Settings)]


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


# -- replace -------------------------------------------------------------------


def test_replace_returns_a_new_object_and_leaves_the_original() -> None:
    original = Settings(max_tokens=64, temperature=0.2)
    changed = original.replace(temperature=0.9, seed=7)
    assert changed is not original
    assert (changed.max_tokens, changed.temperature, changed.seed) == (64, 0.9, 7)
    assert original == Settings(max_tokens=64, temperature=0.2)


def test_replace_with_none_unsets() -> None:
    assert Settings(max_tokens=64, seed=1).replace(seed=None) == Settings(max_tokens=64)


def test_replace_validates_and_copies() -> None:
    with pytest.raises(InvalidArgumentError, match=r"Settings\.max_tokens"):
        Settings().replace(max_tokens=-1)
    with pytest.raises(InvalidArgumentError, match=r"Settings\.json_schema"):
        Settings().replace(json_schema={"type": "objekt"})
    extra = {"a": [1]}
    s = Settings().replace(extra_body=extra, stop=["x"])
    extra["a"].append(2)
    assert s.extra_body == {"a": [1]}
    assert s.stop == ("x",)


def test_replace_unknown_field() -> None:
    with pytest.raises(TypeError) as caught:
        Settings().replace(temprature=0.2)
    assert isinstance(caught.value, InvalidTypeError)
    assert isinstance(caught.value, LLMChatError)
    assert "'temprature'" in str(caught.value)
    assert "'temperature'" in str(caught.value)  # the suggestion


def test_is_set_unknown_field() -> None:
    with pytest.raises(InvalidTypeError, match="'top_q'"):
        Settings().is_set("top_q")


def test_set_fields_in_declaration_order_and_copied() -> None:
    s = Settings(seed=3, max_tokens=5, extra_body={"k": {"deep": 1}}, temperature=0.1)
    fields = s.set_fields()
    assert list(fields) == ["max_tokens", "temperature", "seed", "extra_body"]
    fields["extra_body"]["k"]["deep"] = 2
    assert s.extra_body == {"k": {"deep": 1}}


# -- merged --------------------------------------------------------------------


def test_merged_other_wins_and_extra_body_merges_by_key() -> None:
    base = Settings(max_tokens=100, temperature=0.2, seed=1, extra_body={"a": 1, "b": {"x": 1}})
    call = Settings(temperature=0.9, stop="END", extra_body={"b": {"y": 2}, "c": 3})
    merged = base.merged(call)
    assert merged == Settings(
        max_tokens=100,
        temperature=0.9,
        seed=1,
        stop="END",
        extra_body={"a": 1, "b": {"y": 2}, "c": 3},
    )
    assert base == Settings(
        max_tokens=100, temperature=0.2, seed=1, extra_body={"a": 1, "b": {"x": 1}}
    )
    assert call == Settings(temperature=0.9, stop="END", extra_body={"b": {"y": 2}, "c": 3})


def test_merged_extra_body_on_one_side() -> None:
    assert Settings(extra_body={"a": 1}).merged(Settings(seed=2)).extra_body == {"a": 1}
    assert Settings(seed=2).merged(Settings(extra_body={"b": 1})).extra_body == {"b": 1}


def test_merged_none_and_wrong_type() -> None:
    s = Settings(max_tokens=3)
    assert s.merged(None) is s
    assert s.merged(Settings()) == s
    with pytest.raises(InvalidTypeError, match=r"merged"):
        s.merged({"max_tokens": 4})  # type: ignore[arg-type]


def test_merged_body_is_independent_of_both_sides() -> None:
    base = Settings(extra_body={"a": {"n": 1}})
    merged = base.merged(Settings(extra_body={"b": 2}))
    body = merged.to_body()
    body["a"]["n"] = 99
    assert base.to_body() == {"a": {"n": 1}}
    assert merged.to_body() == {"a": {"n": 1}, "b": 2}


# -- field_names and extra_body ------------------------------------------------


def test_field_names_rename_and_drop() -> None:
    s = Settings(repetition_penalty=1.1, temperature=0.3, top_k=20, max_context=4096)
    names = {"repetition_penalty": "repeat_penalty", "temperature": None, "max_context": "ctx"}
    names_before = copy.deepcopy(names)
    assert s.to_body(names) == {"repeat_penalty": 1.1, "top_k": 20, "ctx": 4096}
    assert names == names_before
    assert s.to_body() == {"repetition_penalty": 1.1, "temperature": 0.3, "top_k": 20}


def test_field_names_send_bare_json_schema() -> None:
    s = Settings(json_schema=SCHEMA, json_schema_name="x", max_tokens=5)
    assert s.to_body({"json_schema": "json_schema"}) == {"json_schema": SCHEMA, "max_tokens": 5}
    assert s.to_body({"json_schema": None}) == {"max_tokens": 5}
    assert s.to_body({"json_schema_name": "schema_name"}) == {
        "response_format": {
            "type": "json_schema",
            "json_schema": {"name": "x", "schema": SCHEMA, "strict": False},
        },
        "schema_name": "x",
        "max_tokens": 5,
    }


def test_field_names_for_unset_fields_change_nothing() -> None:
    assert Settings(seed=1).to_body({"temperature": "temp", "stop": None}) == {"seed": 1}


def test_field_names_can_drop_extra_body_only() -> None:
    s = Settings(seed=1, extra_body={"a": 1})
    assert s.to_body({"extra_body": None}) == {"seed": 1}
    with pytest.raises(InvalidArgumentError, match="extra_body"):
        s.to_body({"extra_body": "extra"})


@pytest.mark.parametrize("names", [{"temprature": "t"}, {"seed": 5}, {"seed": ""}, [("seed", "s")]])
def test_field_names_refusals(names: Any) -> None:
    with pytest.raises(InvalidTypeError, match="field_names"):
        Settings(seed=1).to_body(names)


def test_extra_body_overrides_everything() -> None:
    s = Settings(
        temperature=0.2,
        json_schema=SCHEMA,
        extra_body={"temperature": 1, "response_format": {"type": "json_object"}, "x": None},
    )
    assert s.to_body() == {
        "temperature": 1,
        "response_format": {"type": "json_object"},
        "x": None,
    }
    assert s.to_body({"temperature": "temp"}) == {
        "temp": 0.2,
        "temperature": 1,
        "response_format": {"type": "json_object"},
        "x": None,
    }


# -- copies --------------------------------------------------------------------


def test_caller_mutation_changes_neither_settings_nor_earlier_body() -> None:
    schema = copy.deepcopy(SCHEMA)
    bias = {7: 1.5}
    extra = {"opts": {"mirostat": 2}}
    stop = ["a"]
    s = Settings(json_schema=schema, logit_bias=bias, extra_body=extra, stop=stop)
    body = s.to_body()
    expected = copy.deepcopy(body)

    schema["properties"]["answer"]["type"] = "integer"
    schema["required"].append("score")
    bias[8] = 2
    extra["opts"]["mirostat"] = 1
    extra["new"] = True
    stop.append("b")

    assert s == Settings(
        json_schema=SCHEMA, logit_bias={7: 1.5}, extra_body={"opts": {"mirostat": 2}}, stop=["a"]
    )
    assert body == expected
    assert s.to_body() == expected


def test_to_body_returns_a_fresh_dict_each_call() -> None:
    s = Settings(
        json_schema=SCHEMA,
        logit_bias={7: 1.5},
        stop=["a"],
        dry_sequence_breakers=["\n"],
        extra_body={"opts": {"k": [1]}},
    )
    first = s.to_body()
    expected = copy.deepcopy(first)
    first["response_format"]["json_schema"]["schema"]["required"].append("score")
    first["response_format"]["json_schema"]["name"] = "changed"
    first["logit_bias"]["9"] = 1
    first["stop"].append("b")
    first["dry_sequence_breakers"].clear()
    first["opts"]["k"].append(2)
    first["extra"] = 1
    second = s.to_body()
    assert second is not first
    assert second == expected
    assert s.json_schema == SCHEMA


# -- properties ----------------------------------------------------------------

NUMERIC = {
    "max_tokens": st.integers(min_value=1, max_value=1 << 20),
    "temperature": st.floats(min_value=0, max_value=5, allow_nan=False),
    "top_p": st.floats(min_value=0, max_value=1),
    "top_k": st.integers(min_value=0, max_value=1000),
    "min_p": st.floats(min_value=0, max_value=1),
    "repetition_penalty": st.floats(min_value=0, max_value=3, exclude_min=True),
    "frequency_penalty": st.floats(min_value=-2, max_value=2),
    "seed": st.integers(),
    "id_slot": st.integers(min_value=-1, max_value=64),
    "dry_base": st.floats(min_value=1, max_value=4),
}
combos = st.fixed_dictionaries({name: st.none() | values for name, values in NUMERIC.items()})


@given(combos)
def test_body_has_exactly_the_set_fields(values: dict[str, Any]) -> None:
    s = Settings(**values)
    chosen = {name: value for name, value in values.items() if value is not None}
    assert s.to_body() == chosen
    assert list(s.to_body()) == [name for name in field_names() if name in chosen]
    assert s.set_fields() == chosen


@given(combos, combos)
def test_merged_is_a_field_by_field_overlay(low: dict[str, Any], high: dict[str, Any]) -> None:
    merged = Settings(**low).merged(Settings(**high))
    expected = {k: v for k, v in low.items() if v is not None}
    expected.update({k: v for k, v in high.items() if v is not None})
    assert merged.set_fields() == expected
    assert merged == Settings(**expected)


# -- import cost ---------------------------------------------------------------


def test_import_does_not_load_jsonschema() -> None:
    script = "import sys, llmchat.settings; print('jsonschema' in sys.modules)"
    result = subprocess.run(
        [sys.executable, "-c", script],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    assert result.stdout.strip() == "False"


def test_schema_check_loads_jsonschema_on_demand() -> None:
    script = (
        "import sys\n"
        "from llmchat.settings import Settings\n"
        "Settings(json_schema={'type': 'string'})\n"
        "print('jsonschema' in sys.modules)"
    )
    result = subprocess.run(
        [sys.executable, "-c", script],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    assert result.stdout.strip() == "True"
