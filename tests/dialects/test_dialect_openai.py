"""dialects.openai_chat: one payload into one neutral Delta (pure, no I/O)."""

from __future__ import annotations

from typing import Any

import pytest

from llmchat.dialects.openai_chat import Delta, decode_chat, decode_text, usage_fields
from llmchat.tools import ToolCall


def chunk(delta: dict[str, Any], finish: Any = None, **extra: Any) -> dict[str, Any]:
    return {"choices": [{"index": 0, "delta": delta, "finish_reason": finish}], **extra}


def body(message: dict[str, Any], finish: Any = "stop", **extra: Any) -> dict[str, Any]:
    return {"choices": [{"index": 0, "message": message, "finish_reason": finish}], **extra}


def test_a_plain_content_frame_is_its_string() -> None:
    assert decode_chat(chunk({"role": "assistant", "content": "hi"})) == "hi"
    assert decode_chat(chunk({"content": None})) == ""


THINKING_SPELLINGS = [
    {"reasoning_content": "t"},
    {"reasoning": "t"},
    {"content": [{"type": "thinking", "thinking": "t"}]},
    {"content": [{"type": "thinking", "thinking": [{"type": "text", "text": "t"}]}]},
]


@pytest.mark.parametrize("member", THINKING_SPELLINGS)
@pytest.mark.parametrize("whole", [False, True], ids=["delta", "message"])
def test_every_thinking_spelling_in_both_modes(member: dict[str, Any], whole: bool) -> None:
    payload = body(member) if whole else chunk(member)
    delta = decode_chat(payload)
    assert isinstance(delta, Delta) and delta.thinking == "t" and delta.text == ""


def test_a_message_is_a_delta_carrying_everything() -> None:
    message = {
        "content": [{"type": "text", "text": "a"}, {"type": "thinking", "thinking": "b"}],
        "refusal": "no",
        "tool_calls": [{"id": "c", "function": {"name": "f", "arguments": "{}"}}],
    }
    whole = decode_chat(body(message, citations=["u"], error=None))
    assert isinstance(whole, Delta)
    assert (whole.text, whole.thinking, whole.refusal, whole.finish_reason) == (
        "a",
        "b",
        "no",
        "stop",
    )
    assert whole.calls == [ToolCall("f", {}, id="c", arguments_json="{}")]
    assert whole.citations == ["u"] and whole.whole and whole.fragments is None
    streamed = decode_chat(chunk(message, "stop", citations=["u"]))
    assert isinstance(streamed, Delta) and streamed.fragments == message["tool_calls"]
    assert (streamed.text, streamed.thinking, streamed.refusal) == ("a", "b", "no")


@pytest.mark.parametrize("reason", [None, "", "null"])
def test_no_finish_spellings(reason: Any) -> None:
    delta = decode_chat(chunk({"refusal": "x"}, reason))
    assert isinstance(delta, Delta) and delta.finish_reason is None


def test_inband_errors_top_level_then_choice() -> None:
    top = decode_chat({"error": {"message": "boom"}, "choices": []})
    assert isinstance(top, Delta) and top.error == "boom" and not top.choice
    choice = decode_chat({"choices": [{"index": 0, "delta": {}, "error": "bad"}]})
    assert isinstance(choice, Delta) and choice.error == "bad"


def test_text_dialect() -> None:
    delta = decode_text({"choices": [{"index": 0, "text": "x", "finish_reason": "length"}]})
    assert (delta.text, delta.finish_reason, delta.choice) == ("x", "length", True)
    assert not decode_text({"choices": []}).choice


def test_usage_fields_keep_zero() -> None:
    fields = usage_fields({"model": "m", "usage": {"prompt_tokens": 0, "completion_tokens": 2}})
    assert fields["prompt_tokens"] == 0 and fields["completion_tokens"] == 2
    assert fields["model"] == "m"


def test_usage_fields_read_the_responses_spellings_where_the_usual_ones_are_absent() -> None:
    usage = {"input_tokens": 7, "output_tokens": 3, "input_tokens_details": {"cached_tokens": 4}}
    fields = usage_fields({"usage": usage})
    assert (fields["prompt_tokens"], fields["completion_tokens"], fields["cached_tokens"]) == (
        7,
        3,
        4,
    )
    both = usage_fields({"usage": {"prompt_tokens": 5, "input_tokens": 9, "output_tokens": 1}})
    assert (both["prompt_tokens"], both["completion_tokens"]) == (5, 1)  # the usual name wins


@pytest.mark.parametrize(
    ("payload", "cached"),
    [
        ({"usage": {"prompt_tokens": 9}, "timings": {"cache_n": 6}}, 6),  # an older llama-server
        ({"timings": {"cache_n": 0, "prompt_n": 3}}, 0),  # 0 is a count; no usage block at all
        (
            {"usage": {"prompt_tokens_details": {"cached_tokens": 5}}, "timings": {"cache_n": 6}},
            5,  # the usage block says it: it wins
        ),
        ({"usage": {"prompt_tokens": 9}, "timings": {"cache_n": -1}}, None),
        ({"usage": {"prompt_tokens": 9}, "timings": "cache_n"}, None),
    ],
)
def test_usage_fields_read_llama_servers_cache_n_where_the_usage_does_not_say(
    payload: dict[str, Any], cached: int | None
) -> None:
    assert usage_fields(payload).get("cached_tokens") == cached
