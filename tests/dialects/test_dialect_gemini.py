"""The Gemini decoder, payload by payload: parts, calls, signatures, finishes, usage, errors."""

from __future__ import annotations

from typing import Any

import pytest

from llmchat.dialects.gemini import FINISH_REASONS
from llmchat.dialects.gemini import GeminiContent as Gemini
from llmchat.pipeline.accumulate import Accumulator
from llmchat.tools import ToolCall


def payload(*parts: dict[str, Any], finish: str | None = None, **top: Any) -> dict[str, Any]:
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": list(parts)}, "index": 0}
    if finish is not None:
        candidate["finishReason"] = finish
    return {"candidates": [candidate], **top}


def test_text_and_thought_parts() -> None:
    delta = Gemini().decode(
        payload({"text": "why", "thought": True}, {"text": "Hi"}, {"text": "!"})
    )
    assert (delta.text, delta.thinking, delta.choice, delta.finish_reason) == (
        "Hi!",
        "why",
        True,
        None,
    )


def test_model_and_id_come_from_model_version_and_response_id() -> None:
    delta = Gemini().decode(
        payload({"text": "x"}, modelVersion="gemini-2.5-flash", responseId="r1")
    )
    assert (delta.model, delta.id) == ("gemini-2.5-flash", "r1")


@pytest.mark.parametrize(
    ("wire", "mapped"),
    [
        ("STOP", "stop"),
        ("MAX_TOKENS", "length"),
        ("SAFETY", "content_filter"),
        ("RECITATION", "content_filter"),
        ("BLOCKLIST", "content_filter"),
        ("PROHIBITED_CONTENT", "content_filter"),
        ("SPII", "content_filter"),
        ("OTHER", "OTHER"),
        ("MALFORMED_FUNCTION_CALL", "MALFORMED_FUNCTION_CALL"),
        ("LANGUAGE", "LANGUAGE"),
        ("IMAGE_SAFETY", "IMAGE_SAFETY"),
        ("FINISH_REASON_UNSPECIFIED", "FINISH_REASON_UNSPECIFIED"),
    ],
)
def test_finish_reasons(wire: str, mapped: str) -> None:
    delta = Gemini().decode(payload(finish=wire))
    assert (delta.finish_reason, delta.provider_reason) == (mapped, wire)
    assert FINISH_REASONS.get(wire, wire) == mapped


def test_prompt_block_is_a_content_filter_finish() -> None:
    delta = Gemini().decode({"promptFeedback": {"blockReason": "OTHER"}})
    assert (delta.choice, delta.finish_reason, delta.provider_reason) == (
        True,
        "content_filter",
        "blockReason:OTHER",
    )


def test_prompt_feedback_without_a_block_is_nothing() -> None:
    delta = Gemini().decode({"promptFeedback": {"safetyRatings": []}})
    assert (delta.choice, delta.finish_reason) == (False, None)


def test_error_object_is_the_in_band_error() -> None:
    delta = Gemini().decode({"error": {"code": 499, "message": "cancelled", "status": "CANCELLED"}})
    assert (delta.error, delta.choice) == ("cancelled", False)


def test_whole_function_calls_are_numbered_in_order() -> None:
    dialect = Gemini()
    first = dialect.decode(payload({"functionCall": {"name": "a", "args": {"x": 1}}}))
    second = dialect.decode(
        payload(
            {"functionCall": {"name": "b", "args": {}}}, {"functionCall": {"name": "c", "id": "g1"}}
        )
    )
    assert first.calls == [ToolCall("a", {"x": 1}, "gemini-call-0")]
    assert second.calls == [ToolCall("b", {}, "gemini-call-1"), ToolCall("c", {}, "g1")]


def test_function_call_args_that_are_not_an_object_are_flagged() -> None:
    delta = Gemini().decode(payload({"functionCall": {"name": "a", "args": [1]}}))
    assert delta.calls is not None
    assert (delta.calls[0].arguments, delta.calls[0].arguments_undecodable) == ({}, True)


def test_thought_signatures_say_which_part_they_came_on() -> None:
    delta = Gemini().decode(
        payload(
            {"text": "t", "thought": True, "thoughtSignature": "S1"},
            {"text": "", "thoughtSignature": "S2"},
            {"functionCall": {"name": "f", "args": {}}, "thoughtSignature": "S3"},
        )
    )
    assert delta.parts == [
        {"dialect": "gemini", "thoughtSignature": "S1", "on": "thought"},
        {"dialect": "gemini", "thoughtSignature": "S2", "on": "text"},
        {
            "dialect": "gemini",
            "thoughtSignature": "S3",
            "on": "functionCall",
            "id": "gemini-call-0",
            "name": "f",
        },
    ]


def test_streamed_partial_args_land_whole_at_the_empty_call() -> None:
    dialect = Gemini()
    begin = dialect.decode(
        payload({"functionCall": {"name": "w", "willContinue": True}, "thoughtSignature": "S"})
    )
    assert begin.calls is None
    assert begin.parts == [
        {
            "dialect": "gemini",
            "thoughtSignature": "S",
            "on": "functionCall",
            "id": "gemini-call-0",
            "name": "w",
        }
    ]
    pieces = [
        {"jsonPath": "$.city", "stringValue": "Bos", "willContinue": True},
        {"jsonPath": "$.city", "stringValue": "ton"},
        {"jsonPath": "$.days", "numberValue": 3},
        {"jsonPath": "$.opts.metric", "boolValue": True},
        {"jsonPath": "$.tags[1]", "stringValue": "b"},
        {"jsonPath": "$.none", "nullValue": None},
        {"jsonPath": "not-a-path", "stringValue": "ignored"},
    ]
    middle = dialect.decode(
        payload({"functionCall": {"partialArgs": pieces, "willContinue": True}})
    )
    assert middle.calls is None
    end = dialect.decode(payload({"functionCall": {}}))
    assert end.calls == [
        ToolCall(
            "w",
            {
                "city": "Boston",
                "days": 3,
                "opts": {"metric": True},
                "tags": [None, "b"],
                "none": None,
            },
            "gemini-call-0",
        )
    ]


def test_an_open_streamed_call_lands_at_the_finish() -> None:
    dialect = Gemini()
    dialect.decode(payload({"functionCall": {"name": "w", "willContinue": True}}))
    end = dialect.decode(payload(finish="STOP"))
    assert end.calls == [ToolCall("w", {}, "gemini-call-0")]


def test_citations_accumulate_each_url_once() -> None:
    dialect = Gemini()
    first = dialect.decode(
        {
            "candidates": [
                {"citationMetadata": {"citationSources": [{"uri": "https://a"}, {"startIndex": 1}]}}
            ]
        }
    )
    again = dialect.decode(
        {"candidates": [{"citationMetadata": {"citationSources": [{"uri": "https://a"}]}}]}
    )
    grounded = dialect.decode(
        {
            "candidates": [
                {
                    "groundingMetadata": {
                        "groundingChunks": [{"web": {"uri": "https://b", "title": "b"}}, {"x": {}}]
                    }
                }
            ]
        }
    )
    assert (first.citations, again.citations, grounded.citations) == (
        ["https://a"],
        None,
        ["https://a", "https://b"],
    )


@pytest.mark.parametrize(
    "odd",
    [
        {},
        {"candidates": None},
        {"candidates": [None, 3]},
        {"candidates": [{"content": None}]},
        {
            "candidates": [
                {"content": {"parts": [None, 1, {"inlineData": {}}, {"executableCode": {}}]}}
            ]
        },
        {"candidates": [{"index": 1, "content": {"parts": [{"text": "other candidate"}]}}]},
        {"somethingNew": {"x": 1}, "usageMetadata": "odd"},
    ],
)
def test_unknown_or_odd_payloads_decode_to_nothing(odd: dict[str, Any]) -> None:
    delta = Gemini().decode(odd)
    assert (delta.text, delta.thinking, delta.calls, delta.finish_reason, delta.error) == (
        "",
        "",
        None,
        None,
        None,
    )
    assert isinstance(Gemini.usage_fields(odd), dict)


def test_usage_fields_in_openai_names() -> None:
    usage = {
        "promptTokenCount": 10,
        "candidatesTokenCount": 5,
        "thoughtsTokenCount": 7,
        "cachedContentTokenCount": 0,
        "totalTokenCount": 22,
        "serviceTier": "standard",
    }
    assert Gemini.usage_fields({"usageMetadata": usage, "modelVersion": "g"}) == {
        "model": "g",
        "usage": usage,
        "prompt_tokens": 10,
        "completion_tokens": 12,  # candidates + thoughts, as OpenAI's includes reasoning
        "total_tokens": 22,
        "reasoning_tokens": 7,
        "cached_tokens": 0,
    }


def test_usage_without_candidates_or_thoughts_has_no_completion_count() -> None:
    fields = Gemini.usage_fields({"usageMetadata": {"promptTokenCount": 3, "totalTokenCount": 3}})
    assert "completion_tokens" not in fields and fields["prompt_tokens"] == 3


def test_through_the_accumulator_a_repeated_finish_keeps_the_later_text() -> None:
    # Some Gemini-compatible servers put finishReason on every chunk (the Vertex
    # fixture fb_vertex_error_mid_stream does): nothing after it is dropped, and the
    # latest reason is the one that counts.
    acc = Accumulator(Gemini())
    chunks = acc.feed_payload(payload({"text": "a"}))
    chunks += acc.feed_payload(payload({"text": "b"}, finish="STOP"))
    chunks += acc.feed_payload(payload({"text": "late"}, finish="MAX_TOKENS"))
    assert "".join(c.content for c in chunks) == "ablate"
    assert (acc.finish_reason, acc.provider_reason) == ("length", "MAX_TOKENS")
