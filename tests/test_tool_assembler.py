"""ToolCallAssembler: streamed tool-call fragments into whole `ToolCall`s."""

from __future__ import annotations

import json
from itertools import pairwise
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from llmchat.tools import ToolCall, ToolCallAssembler


def assemble(*deltas: list[Any]) -> list[ToolCall]:
    """Feed each delta's ``tool_calls`` list in order, then finish."""
    assembler = ToolCallAssembler()
    for fragments in deltas:
        assembler.feed(fragments)
    return assembler.finish()


def frag(index: int | None = None, **kw: Any) -> dict[str, Any]:
    """A fragment: `index`, `id`, `type` at top level; `name`, `arguments` under ``function``."""
    out: dict[str, Any] = {} if index is None else {"index": index}
    function = {k: kw.pop(k) for k in ("name", "arguments") if k in kw}
    if function:
        out["function"] = function
    return {**out, **kw}


# -- matching fragments to calls -------------------------------------------------------


def test_by_index() -> None:
    calls = assemble(
        [frag(0, id="a", type="function", name="f", arguments='{"x":')],
        [frag(1, id="b", name="g", arguments="{")],
        [frag(0, arguments=" 1}")],
        [frag(1, arguments="}")],
    )
    assert calls == [
        ToolCall("f", {"x": 1}, id="a", arguments_json='{"x": 1}'),
        ToolCall("g", {}, id="b", arguments_json="{}"),
    ]


def test_by_index_with_the_id_repeated_on_every_fragment() -> None:
    calls = assemble([frag(0, id="a", name="f", arguments="{")], [frag(0, id="a", arguments="}")])
    assert [(c.id, c.arguments_json) for c in calls] == [("a", "{}")]


def test_index_order_is_the_order_begun_not_the_index_value() -> None:
    calls = assemble([frag(3, id="late", name="f")], [frag(0, id="early", name="g")])
    assert [c.id for c in calls] == ["late", "early"]


def test_by_id_without_index() -> None:
    calls = assemble(
        [frag(id="a", name="f", arguments='{"k"'), frag(id="b", name="g", arguments="{")],
        [frag(id="b", arguments="}"), frag(id="a", arguments=': "v"}')],
    )
    assert [(c.id, c.name, c.arguments) for c in calls] == [("a", "f", {"k": "v"}), ("b", "g", {})]


def test_by_position_without_index_or_id() -> None:
    calls = assemble(
        [frag(name="f", arguments="{"), frag(name="g", arguments="[")],
        [frag(arguments="}"), frag(arguments="]")],
    )
    assert [(c.name, c.arguments_json, c.arguments_undecodable) for c in calls] == [
        ("f", "{}", False),
        ("g", "[]", True),
    ]


def test_a_new_id_under_an_occupied_index_starts_a_new_call() -> None:
    calls = assemble(
        [frag(0, id="call_1", name="f", arguments='{"x": 1}')],
        [frag(0, id="call_2", name="g", arguments='{"y":')],
        [frag(0, arguments=" 2}")],  # follows the newest call under index 0
    )
    assert [(c.id, c.name, c.arguments) for c in calls] == [
        ("call_1", "f", {"x": 1}),
        ("call_2", "g", {"y": 2}),
    ]


def test_an_id_arriving_after_the_first_fragment_joins_the_call() -> None:
    calls = assemble([frag(0, name="f", arguments="{")], [frag(0, id="late", arguments="}")])
    assert [(c.id, c.name, c.arguments_json) for c in calls] == [("late", "f", "{}")]


# -- arguments, name, type -------------------------------------------------------------


def test_string_arguments_are_appended_in_order() -> None:
    text = '{"path": "/tmp/a b", "n": [1, 2, 3]}'
    (call,) = assemble(*[[frag(0, arguments=ch)] for ch in text])
    assert call.arguments == json.loads(text) and call.arguments_json == text


def test_an_object_replaces_what_came_before() -> None:
    (call,) = assemble(
        [frag(0, name="f", arguments='{"partial":')],
        [frag(0, arguments={"a": 1})],
        [frag(0, arguments={"b": 2})],
    )
    assert call.arguments == {"b": 2} and call.arguments_json is None
    assert not call.arguments_undecodable


def test_the_name_is_given_once() -> None:
    # The first name stands; a server that repeats it on later fragments does not double it.
    (call,) = assemble(
        [frag(0, name="get_weather", arguments="{")],
        [frag(0, name="get_weather", arguments="}")],
        [frag(0, name="", arguments="")],
    )
    assert call.name == "get_weather" and call.arguments_json == "{}"


def test_type_defaults_to_function_and_is_kept_when_given() -> None:
    calls = assemble([frag(0, name="f"), frag(1, type="custom", name="g")])
    assert [c.type for c in calls] == ["function", "custom"]


def test_a_call_with_no_arguments_decodes_to_an_empty_object() -> None:
    (call,) = assemble([frag(0, id="a", name="ping")])
    assert call.arguments == {} and not call.arguments_undecodable


def test_undecodable_arguments_are_flagged_and_kept() -> None:
    calls = assemble(
        [frag(0, name="f", arguments='{"tz":')],  # cut off, as by max_tokens
        [frag(1, name="g", arguments="[1, 2]")],  # JSON, but not an object
        [frag(2, name="h", arguments="{'single': 'quotes'}")],
    )
    assert [(c.arguments, c.arguments_undecodable, c.arguments_json) for c in calls] == [
        ({}, True, '{"tz":'),
        ({}, True, "[1, 2]"),
        ({}, True, "{'single': 'quotes'}"),
    ]


def test_fragments_that_are_not_objects_are_ignored() -> None:
    assembler = ToolCallAssembler()
    assembler.feed(None)
    assembler.feed({"index": 0})
    assembler.feed(["junk", 3, None])
    assert not assembler.pending and assembler.finish() == []
    assembler.feed([frag(0, name="f", function="not a mapping")])
    assert assembler.pending  # the call began even though its function part was unusable


# -- finish and pending ----------------------------------------------------------------


def test_finish_returns_each_call_once_and_empties_the_assembler() -> None:
    assembler = ToolCallAssembler()
    assert not assembler.pending
    assembler.feed([frag(0, id="a", name="f", arguments="{}")])
    assert assembler.pending
    first = assembler.finish()
    assert [c.id for c in first] == ["a"]
    assert not assembler.pending and assembler.finish() == []
    # Index 0 after a finish is a fresh call, not a continuation of the old one.
    assembler.feed([frag(0, id="b", name="g", arguments='{"z": 0}')])
    assert [(c.id, c.arguments) for c in assembler.finish()] == [("b", {"z": 0})]


# -- property: any fragmentation and interleaving reassembles the originals ----------------

_JSON_LEAF = (
    st.none()
    | st.booleans()
    | st.integers(-(2**53), 2**53)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12)
)
_JSON = st.recursive(
    _JSON_LEAF,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=8,
)
_ARGS = st.dictionaries(st.text(max_size=10), _JSON, max_size=4)
_NAME = st.text("abcdefghijklmnopqrstuvwxyz_ABCXYZ0123456789", min_size=1, max_size=20)


@st.composite
def streamed_calls(draw: st.DrawFn) -> tuple[list[ToolCall], list[list[dict[str, Any]]], str]:
    """Original calls, and the deltas a server could have streamed them as."""
    keyed_by = draw(st.sampled_from(["index", "id"]))
    originals: list[ToolCall] = []
    per_call: list[list[dict[str, Any]]] = []
    for i in range(draw(st.integers(1, 4))):
        arguments = draw(_ARGS)
        text = json.dumps(arguments, ensure_ascii=draw(st.booleans()))
        call_id = f"call_{i}_{draw(st.text('abcdef0123456789', min_size=4, max_size=8))}"
        originals.append(ToolCall(draw(_NAME), arguments, id=call_id, arguments_json=text))
        cuts = sorted(draw(st.sets(st.integers(0, len(text)), max_size=8)))
        bounds = [0, *cuts, len(text)]
        pieces = [text[a:b] for a, b in pairwise(bounds)]
        key = {"index": i} if keyed_by == "index" else {}
        fragments = [
            {**key, "id": call_id, "type": "function", "function": {"name": originals[-1].name}}
        ]
        for piece in pieces:
            # With ids as the only key, every fragment carries the id.
            extra = {"id": call_id} if keyed_by == "id" else {}
            fragments.append({**key, **extra, "function": {"arguments": piece}})
        per_call.append(fragments)
    # Interleave: each call's fragments stay in order; calls mix freely.
    order = draw(st.permutations([i for i, frags in enumerate(per_call) for _ in frags]))
    cursors = [0] * len(per_call)
    stream: list[dict[str, Any]] = []
    for i in order:
        stream.append(per_call[i][cursors[i]])
        cursors[i] += 1
    # Group the interleaved fragments into deltas of one or more fragments.
    cuts = sorted(draw(st.sets(st.integers(1, len(stream) - 1), max_size=len(stream))))
    bounds = [0, *cuts, len(stream)]
    deltas = [stream[a:b] for a, b in pairwise(bounds)]
    # Calls come out in the order they began.
    begun = list(dict.fromkeys(order))
    return [originals[i] for i in begun], deltas, keyed_by


@given(streamed_calls())
def test_any_fragmentation_reassembles_the_original_calls(
    case: tuple[list[ToolCall], list[list[dict[str, Any]]], str],
) -> None:
    originals, deltas, _ = case
    assembler = ToolCallAssembler()
    for delta in deltas:
        assembler.feed(delta)
        assert assembler.pending
    assert assembler.finish() == originals
    assert not assembler.pending
