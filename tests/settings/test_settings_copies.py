"""Settings as values: replace, merged, field_names and extra_body, copies, the numeric
properties, and a cheap import (validation and wire names: test_settings.py).
"""

from __future__ import annotations

import copy
import subprocess
import sys
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from llmchat.errors import InvalidArgumentError, InvalidTypeError, LLMChatError
from llmchat.settings import Settings

from ..support.paths import REPO_ROOT
from .support import SCHEMA, field_names

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
