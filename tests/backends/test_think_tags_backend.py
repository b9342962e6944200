"""`think_tags` on a backend: inline reasoning leaves `msg` in both modes, at any split."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llmchat import OpenAICommon
from llmchat.pipeline.think_tags import ThinkTags
from llmchat.transport import MockResponse, MockTransport

TEXT = "<think>first plan</think>\n\nThe answer."


def _frames(pieces: list[str], finish: str | None = "stop") -> bytes:
    out = []
    for piece in pieces:
        chunk = {"choices": [{"index": 0, "delta": {"content": piece}}]}
        out.append(b"data: " + json.dumps(chunk).encode() + b"\n\n")
    if finish is not None:
        end = {"choices": [{"index": 0, "delta": {}, "finish_reason": finish}]}
        out.append(b"data: " + json.dumps(end).encode() + b"\n\ndata: [DONE]\n\n")
    return b"".join(out)


def _backend(answer: MockResponse, think_tags: Any = True) -> OpenAICommon:
    return OpenAICommon(
        "http://x.test/v1", think_tags=think_tags, transport=MockTransport(lambda q: answer)
    )


def _stream(pieces: list[str], think_tags: Any = True, finish: str | None = "stop") -> Any:
    answer = MockResponse(
        headers={"Content-Type": "text/event-stream"}, body=_frames(pieces, finish)
    )
    r = _backend(answer, think_tags).chat_completion_stream([{"role": "user", "content": "q"}])
    return r.wait(5)


def _blocking(text: str, think_tags: Any = True) -> Any:
    body = json.dumps(
        {"choices": [{"index": 0, "finish_reason": "stop", "message": {"content": text}}]}
    )
    answer = MockResponse(headers={"Content-Type": "application/json"}, body=body)
    return _backend(answer, think_tags).chat_completion([{"role": "user", "content": "q"}])


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=len(TEXT)), max_size=6))
def test_any_split_of_the_frames_gives_the_blocking_answer(cuts: list[int]) -> None:
    points = sorted(set(cuts))
    pieces = [
        TEXT[a:b] for a, b in zip([0, *points], [*points, len(TEXT)], strict=True) if TEXT[a:b]
    ]
    streamed = _stream(pieces)
    blocking = _blocking(TEXT)
    assert streamed.is_success and blocking.is_success
    assert (streamed.msg, streamed.reasoning_text) == ("The answer.", "first plan")
    assert (blocking.msg, blocking.reasoning_text) == ("The answer.", "first plan")


def test_off_by_default_the_tags_stay_in_the_text() -> None:
    assert _blocking(TEXT, think_tags=False).msg == TEXT


def test_an_unclosed_tag_at_the_end_was_thinking() -> None:
    r = _stream(["<think>still ", "going"])
    assert r.msg == "" and r.reasoning_text == "still going"


def test_custom_tags_and_a_prompt_that_opened_the_block() -> None:
    tags = ThinkTags("<reasoning>", "</reasoning>", starts_inside=True)
    r = _stream(["plan</reason", "ing>done"], think_tags=tags)
    assert (r.msg, r.reasoning_text) == ("done", "plan")
    pair = _stream(["<r>x</r>y"], think_tags=("<r>", "</r>"))
    assert (pair.msg, pair.reasoning_text) == ("y", "x")


def test_a_body_cut_mid_tag_keeps_the_held_text() -> None:
    r = _stream(["answer <thi"], finish=None)
    assert not r.is_success and r.error_class == "response"
    assert r.msg == "answer <thi"  # nothing is lost


def test_bad_think_tags_raise_naming_the_field_and_clone_keeps_them() -> None:
    with pytest.raises(TypeError, match="think_tags"):
        OpenAICommon("http://x.test/v1", think_tags="yes")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="think_tags"):
        OpenAICommon("http://x.test/v1", think_tags=("<t>", "<t>"))
    backend = OpenAICommon("http://x.test/v1", think_tags=("<t>", "</t>"))
    assert backend.clone().think_tags == ThinkTags("<t>", "</t>")
    assert backend.clone(think_tags=False).think_tags is None
