"""fit: trimming a conversation to a token budget."""

from __future__ import annotations

import copy
import itertools
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llmchat.conversation import fit
from llmchat.errors import InvalidArgumentError
from llmchat.messages import Message
from llmchat.templates import ChatML
from llmchat.tokens import ROLE_OVERHEAD, TokenCounter


def chars(text: str) -> list[int]:
    return [ord(c) for c in text]


def msg(role: str, content: str | None = "", **kw: Any) -> dict[str, Any]:
    return {"role": role, "content": content, **kw}


def call_turn(call_id: str) -> dict[str, Any]:
    fn = {"name": "f", "arguments": "{}"}
    return msg("assistant", None, tool_calls=[{"id": call_id, "type": "function", "function": fn}])


COUNTER = TokenCounter(chars)  # each message: len(content) + 4 (+ tool-call JSON)


def cost(counter: TokenCounter, messages: list[Message]) -> int:
    return counter.template_overhead() + sum(counter.count_message(m) for m in messages)


def contents(messages: list[Message]) -> list[Any]:
    return [m.content for m in messages]


# -- examples ------------------------------------------------------------------


def test_everything_fits() -> None:
    conv = [msg("system", "s"), msg("user", "a"), msg("assistant", "b")]
    assert fit(conv, 1000, COUNTER) == [Message.from_dict(m) for m in conv]


def test_drops_oldest_first_and_keeps_the_system_message() -> None:
    conv = [msg("system", "sys"), msg("user", "u1"), msg("assistant", "a1"), msg("user", "u2")]
    budget = (3 + ROLE_OVERHEAD) + 2 * (2 + ROLE_OVERHEAD)
    assert contents(fit(conv, budget, COUNTER)) == ["sys", "a1", "u2"]


def test_stops_at_the_first_turn_that_does_not_fit() -> None:
    # "tiny" would fit after the big one is dropped, but keeping it would leave a gap
    conv = [msg("user", "tiny"), msg("user", "x" * 50), msg("user", "new")]
    assert contents(fit(conv, 65, COUNTER)) == ["x" * 50, "new"]
    assert contents(fit(conv, 20, COUNTER)) == ["new"]


def test_template_overhead_counts_against_the_budget() -> None:
    counter = TokenCounter(chars, ChatML())
    conv = [msg("user", "a"), msg("user", "b")]
    one = counter.count_message(conv[0])
    assert len(fit(conv, counter.template_overhead() + 2 * one, counter)) == 2
    assert len(fit(conv, counter.template_overhead() + 2 * one - 1, counter)) == 1
    assert fit(conv, counter.template_overhead(), counter) == []


def test_tool_call_turn_and_its_results_go_together() -> None:
    conv = [
        msg("user", "q"),
        call_turn("c1"),
        msg("tool", "r" * 30, tool_call_id="c1"),
        msg("tool", "r2", tool_call_id="c1"),
        msg("user", "next"),
    ]
    budget = cost(COUNTER, [Message.from_dict(m) for m in conv[1:]]) - 1
    out = fit(conv, budget, COUNTER)
    assert contents(out) == ["next"]  # the whole unit went, not only the call turn
    assert len(fit(conv, budget + 1, COUNTER)) == 4


def test_sticky_predicate_and_indices() -> None:
    conv = [msg("user", "pin me"), msg("user", "old"), msg("user", "new")]
    budget = (6 + ROLE_OVERHEAD) + (3 + ROLE_OVERHEAD)
    assert contents(fit(conv, budget, COUNTER, sticky={0})) == ["pin me", "new"]
    pinned = fit(conv, budget, COUNTER, sticky=lambda m: m.content == "pin me")
    assert contents(pinned) == ["pin me", "new"]


def test_sticky_inside_a_tool_unit_keeps_the_whole_unit() -> None:
    conv = [call_turn("c1"), msg("tool", "result", tool_call_id="c1"), msg("user", "x" * 80)]
    out = fit(conv, cost(COUNTER, [Message.from_dict(m) for m in conv[:2]]), COUNTER, sticky={1})
    assert [m.role for m in out] == ["assistant", "tool"]


def test_anchored_messages_are_inserted_at_depth() -> None:
    conv = [msg("system", "s"), msg("user", "u1"), msg("assistant", "a1"), msg("user", "u2")]
    note = msg("system", "note")
    out = fit(conv, 1000, COUNTER, anchored={1: note})
    assert contents(out) == ["s", "u1", "a1", "note", "u2"]
    assert contents(fit(conv, 1000, COUNTER, anchored={0: note}))[-1] == "note"
    deep = fit(conv, 1000, COUNTER, anchored={99: note, 1: msg("user", "one")})
    assert contents(deep) == ["s", "note", "u1", "a1", "one", "u2"]  # never above the system


def test_anchor_never_lands_inside_a_tool_unit() -> None:
    conv = [msg("user", "q"), call_turn("c1"), msg("tool", "r", tool_call_id="c1")]
    out = fit(conv, 1000, COUNTER, anchored={1: msg("system", "note")})
    assert [m.role for m in out] == ["user", "system", "assistant", "tool"]


def test_anchored_messages_count_against_the_budget() -> None:
    conv = [msg("user", "old"), msg("user", "new")]
    note = msg("system", "n" * 10)
    budget = (10 + ROLE_OVERHEAD) + (3 + ROLE_OVERHEAD)
    assert contents(fit(conv, budget, COUNTER, anchored={0: note})) == ["new", "n" * 10]


def test_sticky_part_too_big_raises_naming_the_budget() -> None:
    conv = [msg("system", "x" * 100), msg("user", "hi")]
    with pytest.raises(InvalidArgumentError, match="budget=50") as info:
        fit(conv, 50, COUNTER)
    assert isinstance(info.value, ValueError)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"budget": -1}, ValueError, "budget"),
        ({"budget": 1.5}, TypeError, "budget"),
        ({"budget": True}, TypeError, "budget"),
        ({"sticky": {5}}, ValueError, "sticky index 5"),
        ({"sticky": "0"}, TypeError, "sticky"),
        ({"anchored": {-1: msg("user", "x")}}, ValueError, "depth"),
        ({"anchored": [msg("user", "x")]}, TypeError, "anchored"),
    ],
)
def test_bad_arguments(kwargs: dict[str, Any], error: type[Exception], match: str) -> None:
    args: dict[str, Any] = {"budget": 100, **kwargs}
    with pytest.raises(error, match=match):
        fit([msg("user", "a")], args.pop("budget"), COUNTER, **args)


# -- properties ----------------------------------------------------------------------

text = st.text(alphabet="abcdef ", max_size=12)


@st.composite
def unit(draw: Any) -> list[dict[str, Any]]:
    kind = draw(st.sampled_from(["system", "user", "assistant", "tools"]))
    if kind != "tools":
        return [msg(kind, draw(text))]
    call_id = f"c{draw(st.integers(0, 10**6))}"
    results = draw(st.integers(1, 3))
    return [call_turn(call_id)] + [msg("tool", draw(text), tool_call_id=call_id)] * results


conversations = st.lists(unit(), max_size=8).map(lambda units: [m for u in units for m in u])


def unit_starts(messages: list[Message]) -> list[int]:
    """Indices where a unit begins (a tool result never begins one here)."""
    return [i for i, m in enumerate(messages) if m.role != "tool"]


def is_subsequence(small: list[Any], big: list[Any]) -> bool:
    it = iter(big)
    return all(any(x is y for y in it) for x in small)


@settings(max_examples=300, deadline=None)
@given(conversations, st.integers(0, 200), st.booleans())
def test_fit_properties(conv: list[dict[str, Any]], budget: int, templated: bool) -> None:
    counter = TokenCounter(chars, ChatML() if templated else None)
    snapshot = copy.deepcopy(conv)
    messages = [Message.from_dict(m) for m in conv]
    sticky = [m for m in messages if m.role == "system"]
    if cost(counter, sticky) > budget:
        with pytest.raises(InvalidArgumentError, match=f"budget={budget}"):
            fit(messages, budget, counter)
        return
    out = fit(messages, budget, counter)
    assert conv == snapshot  # input unchanged
    assert cost(counter, out) <= budget
    assert is_subsequence(out, messages)  # order kept, nothing invented
    assert all(any(m is s for m in out) for s in sticky)
    # tool units are whole: every kept call turn has all its results, and vice versa
    kept_ids = {id(m) for m in out}
    starts = [*unit_starts(messages), len(messages)]
    for a, b in itertools.pairwise(starts):
        flags = {id(m) in kept_ids for m in messages[a:b]}
        assert len(flags) == 1
    # the kept droppable units are the newest ones: a suffix
    droppable = [i for i in starts[:-1] if messages[i].role != "system"]
    kept = [id(messages[i]) in kept_ids for i in droppable]
    assert kept == sorted(kept)


@settings(max_examples=200, deadline=None)
@given(conversations, st.integers(0, 8))
def test_fit_with_an_anchor(conv: list[dict[str, Any]], depth: int) -> None:
    note = Message(role="system", content="note")
    out = fit(conv, 10_000, COUNTER, anchored={depth: note})
    assert [m for m in out if m is not note] == [Message.from_dict(m) for m in conv]
    assert sum(m is note for m in out) == 1
    position = next(i for i, m in enumerate(out) if m is note)
    after = out[position + 1 :]
    assert not after or after[0].role != "tool"  # never inside a tool unit
    leading = next((i for i, m in enumerate(conv) if m["role"] != "system"), len(conv))
    assert position >= leading  # never above the leading system messages
    assert len(after) >= min(depth, len(conv) - leading)  # at depth, or deeper to skip a unit
