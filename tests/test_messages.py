"""Message and normalize_messages: shape, validation and the normalization properties."""

from __future__ import annotations

import copy
import itertools
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from llmchat.errors import InvalidMessageError, LLMChatError
from llmchat.messages import Message, coerce_messages, normalize_messages

CALL = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}

# -- strategies -------------------------------------------------------------

texts = st.sampled_from(["", " ", "a", "b c", "\n", "é", "x\n\ny"]) | st.text(max_size=6)


@st.composite
def message_dicts(draw: st.DrawFn) -> dict[str, Any]:
    kind = draw(
        st.sampled_from(
            ["system", "user", "assistant", "user", "assistant", "call", "tool", "named", "parts"]
        )
    )
    if kind == "call":
        return {"role": "assistant", "content": None, "tool_calls": [dict(CALL)]}
    if kind == "tool":
        return {"role": "tool", "content": draw(texts), "tool_call_id": "c1"}
    if kind == "named":
        return {"role": "user", "content": draw(texts), "name": "bob"}
    if kind == "parts":
        return {"role": "user", "content": [{"type": "text", "text": draw(texts)}]}
    return {"role": kind, "content": draw(texts)}


conversations = st.lists(message_dicts(), max_size=12)
options = st.fixed_dictionaries(
    {
        "folded_system_marker": st.sampled_from(["[System message]\n", "", ">> "]),
        "tool_result_acknowledgement": st.sampled_from(["Understood.", "", "ok"]),
        "system_message_mode": st.sampled_from(["as-is", "leading"]),
    }
)
as_is_options = options.map(lambda o: {**o, "system_message_mode": "as-is"})


def as_messages(items: list[dict[str, Any]]) -> list[Any]:
    """Mix dicts and Message objects, as callers do."""
    return [Message.from_dict(m) if i % 2 else m for i, m in enumerate(items)]


# -- properties -------------------------------------------------------------


@given(conversations, options)
def test_pure(items: list[dict[str, Any]], opts: dict[str, Any]) -> None:
    given_list = as_messages(items)
    before = copy.deepcopy(given_list)
    result = normalize_messages(given_list, **opts)
    assert given_list == before
    for message in result:  # changing the output must not reach the input
        if message.tool_calls:
            message.tool_calls[0]["id"] = "changed"
    assert given_list == before


@given(conversations, options)
def test_deterministic(items: list[dict[str, Any]], opts: dict[str, Any]) -> None:
    assert normalize_messages(items, **opts) == normalize_messages(copy.deepcopy(items), **opts)


@given(conversations, conversations, as_is_options)
def test_prefix_stable(
    head: list[dict[str, Any]], tail: list[dict[str, Any]], opts: dict[str, Any]
) -> None:
    before = normalize_messages(head, **opts)
    after = normalize_messages(head + tail, **opts)
    if not before:
        return
    assert after[: len(before) - 1] == before[:-1]
    last, grown = before[-1], after[len(before) - 1]
    assert grown.role == last.role
    if isinstance(last.content, str):
        assert isinstance(grown.content, str) and grown.content.startswith(last.content)
    else:
        assert grown == last


@given(conversations, options)
def test_no_text_lost(items: list[dict[str, Any]], opts: dict[str, Any]) -> None:
    result = normalize_messages(items, **opts)
    haystack = "\x00".join(m.content for m in result if isinstance(m.content, str))
    position = 0
    expected = (
        [m for m in items if m["role"] == "system"] + [m for m in items if m["role"] != "system"]
        if opts["system_message_mode"] == "leading"
        else items
    )
    for message in expected:
        if isinstance(message["content"], str) and message["content"]:
            found = haystack.find(message["content"], position)
            assert found >= 0, f"lost {message['content']!r}"
            position = found + len(message["content"])


@given(conversations, options)
def test_non_plain_messages_pass_through_in_order(
    items: list[dict[str, Any]], opts: dict[str, Any]
) -> None:
    result = normalize_messages(items, **opts)
    given_non_plain = [m for m in coerce_messages(items) if not m.is_plain]
    if opts["system_message_mode"] == "leading":
        given_non_plain = [m for m in given_non_plain if m.role == "system"] + [
            m for m in given_non_plain if m.role != "system"
        ]
    assert [m for m in result if not m.is_plain] == given_non_plain


@given(conversations, options)
def test_plain_roles_alternate_outside_tool_turns(
    items: list[dict[str, Any]], opts: dict[str, Any]
) -> None:
    result = normalize_messages(items, **opts)
    for previous, current in itertools.pairwise(result):
        if previous.is_plain and current.is_plain:
            assert previous.role != current.role
        if current.role == "user" and opts["tool_result_acknowledgement"]:
            assert previous.role != "tool"


@given(conversations, options)
def test_mode_none_only_lifts_system_messages(
    items: list[dict[str, Any]], opts: dict[str, Any]
) -> None:
    result = normalize_messages(items, mode="none", **opts)
    assert sorted(map(repr, result)) == sorted(map(repr, coerce_messages(items)))
    if opts["system_message_mode"] == "as-is":
        assert result == coerce_messages(items)


# -- examples ---------------------------------------------------------------


def test_leading_block_merges_and_later_system_folds() -> None:
    result = normalize_messages(
        [
            {"role": "system", "content": "a"},
            {"role": "system", "content": "b"},
            {"role": "user", "content": "u"},
            {"role": "system", "content": "c"},
        ]
    )
    assert [(m.role, m.content) for m in result] == [
        ("system", "a\n\nb"),
        ("user", "u\n\n[System message]\nc"),
    ]


def test_non_plain_system_message_is_kept_and_blocks_merging() -> None:
    result = normalize_messages(
        [
            {"role": "system", "content": "a"},
            {"role": "system", "content": "b", "name": "rules"},
            {"role": "system", "content": "c"},
        ]
    )
    assert [m.content for m in result] == ["a", "b", "c"]


def test_user_with_list_content_after_tool_result_is_acknowledged() -> None:
    result = normalize_messages(
        [
            {"role": "assistant", "content": None, "tool_calls": [CALL]},
            {"role": "tool", "content": "r", "tool_call_id": "c1"},
            {"role": "user", "content": [{"type": "text", "text": "hi"}]},
        ]
    )
    assert [m.role for m in result] == ["assistant", "tool", "assistant", "user"]
    assert result[2].content == "Understood."


def test_options_are_checked_before_anything_else() -> None:
    with pytest.raises(ValueError, match="tool_result_acknowledgement"):
        normalize_messages([], tool_result_acknowledgement=None)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="mode must be"):
        normalize_messages([], mode="alternate")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="system_message_mode"):
        normalize_messages([], system_message_mode="first")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="folded_system_marker"):
        normalize_messages([], folded_system_marker=None)  # type: ignore[arg-type]


# -- Message ----------------------------------------------------------------


def test_round_trip_keeps_unknown_keys() -> None:
    data = {"role": "user", "content": "hi", "name": "n", "cache_control": {"type": "x"}}
    message = Message.from_dict(data)
    assert message.extra == {"cache_control": {"type": "x"}}
    assert message.to_dict() == data
    assert Message.from_dict(message.to_dict()) == message


def test_to_dict_always_carries_content() -> None:
    message = Message("assistant", tool_calls=[CALL])
    assert message.to_dict() == {"role": "assistant", "content": None, "tool_calls": [CALL]}


def test_from_dict_copies_deeply() -> None:
    data = {"role": "assistant", "content": None, "tool_calls": [copy.deepcopy(CALL)]}
    message = Message.from_dict(data)
    data["tool_calls"][0]["id"] = "changed"
    assert message.tool_calls is not None and message.tool_calls[0]["id"] == "c1"


@pytest.mark.parametrize(
    ("bad", "field"),
    [
        ({"role": "bot", "content": "x"}, "role"),
        ({"role": "user", "content": 5}, "content"),
        ({"role": "user", "content": {"text": "x"}}, "content"),
        ({"content": "x"}, "role"),
        ({"role": "tool", "content": "x", "tool_call_id": 7}, "tool_call_id"),
        ({"role": "assistant", "tool_calls": {"id": "x"}}, "tool_calls"),
    ],
)
def test_bad_messages_name_index_and_field(bad: dict[str, Any], field: str) -> None:
    messages = [{"role": "user", "content": "ok"}, bad]
    with pytest.raises(ValueError, match=rf"messages\[1\]: Message\.{field}") as info:
        normalize_messages(messages)
    assert isinstance(info.value, InvalidMessageError)
    assert isinstance(info.value, TypeError) and isinstance(info.value, LLMChatError)


def test_constructor_validates() -> None:
    with pytest.raises(ValueError, match=r"Message\.role"):
        Message("robot", "hi")
    with pytest.raises(ValueError, match=r"Message\.extra must not hold 'role'"):
        Message("user", "hi", extra={"role": "system"})


def test_a_single_message_is_not_a_conversation() -> None:
    with pytest.raises(TypeError, match="messages must be a list"):
        normalize_messages({"role": "user", "content": "hi"})  # type: ignore[arg-type]
