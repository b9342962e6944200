"""The Ollama decoders, pure: every line type, stop reason, count, error and unknown member."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from llmchat.dialects.base import Delta
from llmchat.dialects.ollama import (
    ERR_NOT_DONE,
    OllamaChat,
    OllamaGenerate,
    ollama_usage_fields,
)
from llmchat.pipeline.judge import EOF_ENDING, FINISHED, judge
from llmchat.tools import ToolCall

from ..support.ollama import call, chat_line, final, ndjson, run_pieces


def delta(payload: dict[str, Any], dialect: OllamaChat | None = None, whole: bool = False) -> Delta:
    out = (dialect or OllamaChat()).decode(payload, whole=whole)
    return out if isinstance(out, Delta) else Delta(text=out, choice=True)


# -- lines -------------------------------------------------------------------------


def test_a_plain_content_line_is_its_text_alone() -> None:
    assert OllamaChat().decode(chat_line("Hel")) == "Hel"
    assert OllamaChat().decode(chat_line("")) == ""


def test_thinking_is_reasoning_and_content_is_text() -> None:
    got = delta(chat_line("A", thinking="because"))
    assert (got.text, got.thinking, got.finish_reason, got.end) == ("A", "because", None, False)


def test_tool_calls_arrive_whole_with_object_arguments_and_numbered_ids() -> None:
    dialect = OllamaChat()
    first = delta(chat_line(calls=[call("a", x=1), call("b")]), dialect)
    second = delta(chat_line(calls=[{"id": "given", **call("c", y=[1])}]), dialect)
    third = delta(chat_line(calls=[call("d")]), dialect)
    assert first.calls == [ToolCall("a", {"x": 1}, "call_0"), ToolCall("b", {}, "call_1")]
    assert second.calls == [ToolCall("c", {"y": [1]}, "given")]  # a given id is kept
    assert third.calls == [ToolCall("d", {}, "call_3")]  # the count goes on past it


def test_string_arguments_are_decoded_and_bad_ones_kept_flagged() -> None:
    line = chat_line(
        calls=[
            {"function": {"name": "s", "arguments": '{"q": "x"}'}},
            {"function": {"name": "bad", "arguments": "{nope"}},
        ]
    )
    good, bad = delta(line).calls or []
    assert good.arguments == {"q": "x"} and not good.arguments_undecodable
    assert bad.arguments == {} and bad.arguments_undecodable and bad.arguments_json == "{nope"


def test_unknown_members_are_ignored() -> None:
    line = chat_line("t", future={"x": 1}, logprobs=[{"token": "t"}])
    line["message"]["images"] = None
    line["message"]["extra"] = "?"
    got = delta(line)
    assert (got.text, got.error, got.finish_reason) == ("t", None, None)
    assert delta({"what": "is this"}).text == ""


# -- done: the finish and the end ---------------------------------------------------------


@pytest.mark.parametrize(
    ("wire", "finish", "provider"),
    [
        ("stop", "stop", None),
        ("length", "length", None),
        (None, "stop", None),  # older servers: done with no done_reason
        ("", "stop", None),
        ("weird", "weird", None),  # unmapped: the judge fails it as unknown
    ],
)
def test_done_is_the_finish_and_the_end(
    wire: str | None, finish: str, provider: str | None
) -> None:
    line = final(None) if wire is None else final(wire)
    got = delta(line)
    assert (got.finish_reason, got.provider_reason, got.end, got.error) == (
        finish,
        provider,
        True,
        None,
    )


def test_load_with_no_answer_is_a_failure_with_a_clear_message() -> None:
    for reason in ("load", "unload"):
        got = delta(chat_line(done=True, done_reason=reason))
        assert got.end and got.finish_reason == reason
        assert got.error is not None and f"only {reason}ed the model" in got.error


def test_load_after_an_answer_is_a_stop_keeping_the_wire_value() -> None:
    dialect = OllamaChat()
    delta(chat_line("hi"), dialect)
    got = delta(chat_line(done=True, done_reason="load"), dialect)
    assert (got.finish_reason, got.provider_reason, got.error) == ("stop", "load", None)


def test_a_whole_body_without_done_true_fails() -> None:
    got = delta(chat_line("partial"), whole=True)
    assert got.text == "partial" and got.error == ERR_NOT_DONE and got.finish_reason is None


def test_the_reasoning_goes_back_as_one_part_on_the_done_line() -> None:
    dialect = OllamaChat()
    delta(chat_line(thinking="a"), dialect)
    delta(chat_line(thinking="b"), dialect)
    got = delta(final(), dialect)
    assert got.parts == [{"dialect": "ollama", "thinking": "ab"}]
    assert delta(final()).parts is None  # no reasoning, no part


# -- errors -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("error", "message"),
    [("model 'x' not found", "model 'x' not found"), ({"message": "boom"}, "boom")],
)
def test_an_error_line_fails_and_ends(error: Any, message: str) -> None:
    got = delta({"error": error})
    assert (got.error, got.end, got.text) == (message, True, "")


def test_an_empty_error_is_no_error() -> None:
    assert delta({**chat_line("x"), "error": ""}).error is None


# -- usage -----------------------------------------------------------------------------


def test_counts_are_lifted_in_openai_names_with_the_raw_block() -> None:
    line = final(prompt=11, completion=4, prompt_eval_cached_count=6)
    fields = OllamaChat.usage_fields(line)
    assert fields["prompt_tokens"] == 11 and fields["completion_tokens"] == 4
    assert fields["cached_tokens"] == 6 and "total_tokens" not in fields  # derived later
    assert fields["usage"] == {
        "prompt_eval_count": 11,
        "eval_count": 4,
        "prompt_eval_cached_count": 6,
        "total_duration": 2_000_000_000,
        "load_duration": 500_000_000,
        "prompt_eval_duration": 250_000_000,
        "eval_duration": 1_000_000_000,
    }
    assert fields["model"] == "m"
    assert OllamaChat.derives_total


def test_zero_is_a_count_and_a_line_without_counts_has_only_the_model() -> None:
    assert ollama_usage_fields({"eval_count": 0})["completion_tokens"] == 0
    assert OllamaChat.usage_fields(chat_line("x")) == {"model": "m"}
    assert ollama_usage_fields({"eval_count": True}) == {}  # a bool is no count


# -- the generate dialect ---------------------------------------------------------------


def test_generate_reads_response_and_thinking() -> None:
    dialect = OllamaGenerate()
    assert dialect.decode({"model": "m", "response": "A", "done": False}) == "A"
    got = delta({"response": "B", "thinking": "t", "done": False}, dialect)
    assert (got.text, got.thinking) == ("B", "t")
    end = delta({"response": "", "done": True, "done_reason": "stop", "context": [1, 2]}, dialect)
    assert end.end and end.finish_reason == "stop"
    assert end.parts == [{"dialect": "ollama", "thinking": "t"}]


def test_generate_load_only_fails() -> None:
    got = delta(
        {"model": "m", "response": "", "done": True, "done_reason": "load"}, OllamaGenerate()
    )
    assert got.error is not None and "loaded the model" in got.error


# -- through the accumulator -----------------------------------------------------------


STREAM = [
    chat_line("Hé"),
    chat_line("llo", thinking="hm"),
    chat_line(calls=[call("f", city="Köln")]),
    final("stop", prompt_eval_cached_count=2),
]


def test_a_stream_through_the_accumulator() -> None:
    chunks, acc = run_pieces(ndjson(STREAM))
    assert "".join(c.content for c in chunks) == "Héllo"
    assert [c for ch in chunks for c in ch.tool_calls or []] == [
        ToolCall("f", {"city": "Köln"}, "call_0")
    ]
    assert chunks[-1].is_final and chunks[-1].finish_reason == "stop"
    assert chunks[-1].usage is not None and chunks[-1].cached_tokens == 2
    assert (
        acc.done
        and acc.finish_reason == "stop"
        and acc.parts == [{"dialect": "ollama", "thinking": "hm"}]
    )
    assert judge(EOF_ENDING, acc) == FINISHED


def test_lines_after_the_end_are_ignored() -> None:
    chunks, acc = run_pieces(ndjson([chat_line("a"), final(), chat_line("late")]))
    assert "".join(c.content for c in chunks) == "a" and acc.done


def test_a_midstream_error_line_keeps_the_text_and_fails() -> None:
    chunks, acc = run_pieces(ndjson([chat_line("so far"), {"error": "runner died"}]))
    assert "".join(c.content for c in chunks) == "so far"
    assert acc.error == "runner died" and acc.done
    assert judge(EOF_ENDING, acc).err == "runner died"


def test_a_stream_without_done_is_the_stream_closed_failure() -> None:
    _, acc = run_pieces(ndjson([chat_line("cut")]))
    verdict = judge(EOF_ENDING, acc)
    assert verdict.error_class == "response" and verdict.err is not None
    assert verdict.err.startswith("Stream closed")


@given(st.data())
def test_any_split_of_the_bytes_gives_the_same_chunks(data: st.DataObject) -> None:
    body = b"".join(ndjson(STREAM))
    cuts = sorted(data.draw(st.sets(st.integers(1, len(body) - 1), max_size=12)))
    pieces = [body[a:b] for a, b in zip([0, *cuts], [*cuts, len(body)], strict=True)]
    whole, _ = run_pieces([body])
    split, _ = run_pieces(pieces)
    assert split == whole
