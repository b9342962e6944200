"""stream_parser on crafted events: [DONE], drops and the end of the body, in-band errors,
deltas, tool calls (golden transcripts and finishes: test_stream_parser.py).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from llmchat.pipeline.judge import Ending, judge, judge_reason
from llmchat.sse import SSEEvent
from llmchat.stream_parser import StreamParser
from llmchat.tools import ToolCall

from .support.golden_sse import (
    decode,
)
from .support.stream_events import (
    DONE,
    content,
    ev,
    frame,
    run,
    tool_fragment,
    tools_frame,
)

# -- [DONE], drops, end of body ------------------------------------------------------


def test_done_sets_done_and_nothing_after_it_is_taken() -> None:
    parser, chunks = run([content("a"), DONE, content("b"), frame({}, "stop")])
    assert parser.done and [c.content for c in chunks] == ["a"]
    assert not parser.finished and parser.payload is not None  # read, not acted on


def test_done_with_surrounding_whitespace() -> None:
    assert run([SSEEvent(data=" [DONE] ")])[0].done


def test_a_garbage_frame_is_one_drop_and_the_stream_goes_on() -> None:
    body = b'data: {"choices":[{"delta":{"content":"a"}}]}\n\ndata: {not json\n\n'
    body += (
        b'data: {"choices":[{"delta":{"content":"b"},"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n'
    )
    parser, chunks = run(decode([body]))
    assert parser.dropped == 1
    assert "".join(c.content for c in chunks) == "ab"
    assert parser.finished and parser.done and parser.error is None


@pytest.mark.parametrize("data", ["42", '"text"', "[1, 2]", "null", "true", " "])
def test_json_that_is_not_an_object_is_a_drop(data: str) -> None:
    parser, chunks = run([SSEEvent(data=data), content("a")])
    assert parser.dropped == 1 and [c.content for c in chunks] == ["a"]


def test_an_event_with_empty_data_is_not_dispatched() -> None:
    # WHATWG SSE: an event whose data buffer is empty is not dispatched (not a drop).
    parser, chunks = run([SSEEvent(data=""), content("a")])
    assert parser.dropped == 0 and [c.content for c in chunks] == ["a"]


def test_a_frame_cut_mid_json_at_end_of_body_is_a_drop() -> None:
    body = b'data: {"choices":[{"delta":{"content":"a"}}]}\n\ndata: {"choices":[{"delta":{"con'
    events = decode([body])
    assert events[-1].terminated is False
    parser, chunks = run(events)
    assert parser.dropped == 1 and [c.content for c in chunks] == ["a"]
    assert not parser.done and not parser.finished


def test_an_unterminated_done_at_end_of_body_still_sets_done() -> None:
    # KoboldCpp ends with `data: [DONE]` and no blank line.
    parser, _ = run(
        decode([b'data: {"choices":[{"delta":{},"finish_reason":"stop"}]}\n\ndata: [DONE]'])
    )
    assert parser.done and parser.finished and parser.dropped == 0


def test_an_unterminated_whole_json_frame_is_still_parsed() -> None:
    parser, chunks = run(
        decode([b'data: {"choices":[{"delta":{"content":"a"},"finish_reason":"stop"}]}'])
    )
    assert [(c.content, c.is_final) for c in chunks] == [("a", True)] and parser.dropped == 0


def test_an_undecodable_event_is_a_drop_and_the_next_one_is_not() -> None:
    parser, chunks = run(
        decode([b'data: \xff\xfe\n\ndata: {"choices":[{"delta":{"content":"a"}}]}\n\n'])
    )
    assert parser.dropped == 1 and [c.content for c in chunks] == ["a"]
    parser2, _ = run([SSEEvent(data='{"choices":[]}', undecodable=True)])
    assert parser2.dropped == 1 and parser2.payload is None


def test_comments_and_field_only_events_are_not_frames() -> None:
    parser, chunks = run(
        [SSEEvent(comment="ping"), SSEEvent(comment=""), SSEEvent(event="ping"), SSEEvent(id="3")]
    )
    assert chunks == [] and parser.comments == 2 and parser.dropped == 0
    assert parser.payload is None and not parser.done


def test_payload_is_the_last_json_object() -> None:
    parser = StreamParser()
    payload = {"choices": [{"delta": {"content": "a"}}]}
    parser.feed(ev(payload))
    assert parser.payload == payload
    for event in (SSEEvent(comment="x"), SSEEvent(data="{bad"), DONE):
        parser.feed(event)
        assert parser.payload is None


# -- in-band errors ---------------------------------------------------------------------


def test_a_top_level_error_object_sets_error() -> None:
    parser, chunks = run(
        [content("a"), ev({"error": {"message": "Upstream overloaded", "code": 502}})]
    )
    assert parser.error == "Upstream overloaded"
    assert [c.content for c in chunks] == ["a"]


def test_a_top_level_error_string_sets_error() -> None:
    assert run([ev({"error": "context exceeded"})])[0].error == "context exceeded"


def test_a_choice_error_sets_error() -> None:
    choice = {"index": 0, "delta": {"content": ""}, "error": {"message": "Provider died"}}
    parser, _ = run([ev({"choices": [choice]})])
    assert parser.error == "Provider died"


def test_finish_reason_error_fails_with_the_providers_reason() -> None:
    # The judge decides it now (after the hook), the same on every path.
    parser, chunks = run([content("a"), frame({}, "error")])
    assert parser.wire_finish_reason == "error" and chunks[-1].is_final
    verdict = judge(Ending("done"), parser)
    assert verdict.finished
    _, verdict = judge_reason("error", False)
    assert verdict.error_class == "response" and "error" in (verdict.err or "")


def test_finish_reason_error_keeps_the_providers_message() -> None:
    # OpenRouter's mid-stream error: a top-level error *and* finish_reason "error".
    openrouter = {
        "error": {"code": "server_error", "message": "Provider disconnected"},
        "choices": [{"index": 0, "delta": {"content": ""}, "finish_reason": "error"}],
    }
    assert run([content("a"), ev(openrouter)])[0].error == "Provider disconnected"
    choice = {"index": 0, "delta": {}, "finish_reason": "error", "error": {"message": "Oops"}}
    assert run([ev({"choices": [choice]})])[0].error == "Oops"


def test_the_first_error_is_kept() -> None:
    parser, _ = run([ev({"error": {"message": "first"}}), ev({"error": {"message": "second"}})])
    assert parser.error == "first"


def test_error_null_is_no_error() -> None:
    parser, chunks = run([frame({"content": "a"}, error=None)])
    assert parser.error is None and [c.content for c in chunks] == ["a"]


# -- deltas ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "delta",
    [
        {"role": "assistant"},
        {"role": "assistant", "content": None},
        {"role": "assistant", "content": ""},
        {},
        {"content": None, "reasoning_content": None, "tool_calls": None},
    ],
)
def test_role_only_and_empty_deltas_produce_no_chunk(delta: dict[str, Any]) -> None:
    parser, chunks = run([frame(delta)])
    assert chunks == [] and parser.dropped == 0


def test_reasoning_content_is_thinking() -> None:
    _, chunks = run([frame({"reasoning_content": "hmm"}), frame({"content": "Hi"})])
    assert [(c.content, c.thinking) for c in chunks] == [("", "hmm"), ("Hi", None)]


def test_openrouter_reasoning_is_thinking_and_not_doubled() -> None:
    _, chunks = run(
        [frame({"reasoning": "hmm"}), frame({"reasoning": "a", "reasoning_content": "a"})]
    )
    assert [c.thinking for c in chunks] == ["hmm", "a"]


def test_list_content_with_thinking_parts() -> None:
    parts = [
        {"type": "thinking", "thinking": "Let me see. "},
        {"type": "thinking", "text": "Yes."},
        {"type": "text", "text": "Hello"},
        {"type": "text", "text": " there"},
        "not a part",
    ]
    _, chunks = run([frame({"content": parts})])
    assert [(c.content, c.thinking) for c in chunks] == [("Hello there", "Let me see. Yes.")]


def test_refusal_fragments() -> None:
    _, chunks = run(
        [frame({"refusal": "I can't"}), frame({"refusal": " help."}), frame({}, "stop")]
    )
    assert "".join(c.refusal or "" for c in chunks) == "I can't help."
    assert all(c.content == "" for c in chunks)
    assert [c.refusal for c in chunks] == ["I can't", " help.", None]


def test_text_kind_reads_choice_text() -> None:
    frames = [
        ev({"choices": [{"index": 0, "text": "Hel", "finish_reason": None}]}),
        ev({"choices": [{"index": 0, "text": "lo", "delta": {"content": "x"}}]}),
        ev({"choices": [{"index": 0, "text": None, "finish_reason": "stop"}]}),
    ]
    _, chunks = run(frames, kind="text")
    assert [(c.content, c.is_final) for c in chunks] == [("Hel", False), ("lo", False), ("", True)]


# -- tool calls ----------------------------------------------------------------------


def _pieces(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


def test_two_parallel_calls_split_across_many_frames_land_whole_on_the_finish_chunk() -> None:
    args0 = json.dumps({"city": "Paris", "unit": "celsius", "note": 'é " }'})
    args1 = json.dumps({"query": "weather", "limit": 3})
    frames = [
        frame({"role": "assistant", "content": None}),
        tools_frame(
            tool_fragment(0, id="call_a", type="function", name="get_weather", arguments="")
        ),
        tools_frame(tool_fragment(1, id="call_b", type="function", name="search")),
    ]
    a, b = _pieces(args0, 3), _pieces(args1, 2)
    for i in range(max(len(a), len(b))):  # interleaved, sometimes both in one frame
        fragments = [tool_fragment(0, arguments=a[i])] if i < len(a) else []
        fragments += [tool_fragment(1, arguments=b[i])] if i < len(b) else []
        frames.append(tools_frame(*fragments))
    frames += [frame({}, "stop"), DONE]
    parser, chunks = run(frames)
    assert len(frames) > 20
    (final,) = chunks
    assert final.is_final and final.content == ""
    assert final.tool_calls == [
        ToolCall("get_weather", json.loads(args0), id="call_a", arguments_json=args0),
        ToolCall("search", json.loads(args1), id="call_b", arguments_json=args1),
    ]
    # The final chunk carries the provider's reason verbatim (it used to say
    # "tool_calls"); the Response's decided reason becomes "tool_calls" in the judge.
    assert (final.finish_reason, parser.finish_reason, parser.wire_finish_reason) == (
        "stop",
        "stop",
        "stop",
    )
    assert judge_reason("stop", bool(parser.tool_calls))[0] == "tool_calls"
    assert parser.saw_tool_calls and not parser.assembler.pending and parser.done


def test_calls_finishing_with_tool_calls_and_fragments_on_the_finish_frame() -> None:
    frames = [
        tools_frame(tool_fragment(0, id="c1", name="f", arguments='{"a"')),
        content("text too"),
        tools_frame(tool_fragment(0, arguments=": 1}"), finish="tool_calls"),
    ]
    parser, chunks = run(frames)
    assert [(c.content, c.is_final) for c in chunks] == [("text too", False), ("", True)]
    assert chunks[-1].tool_calls == [ToolCall("f", {"a": 1}, id="c1", arguments_json='{"a": 1}')]
    assert parser.finish_reason == parser.wire_finish_reason == "tool_calls"


def test_ollama_style_index_zero_for_every_parallel_call() -> None:
    frames = [
        tools_frame(tool_fragment(0, id="call_1", name="f", arguments='{"x": 1}')),
        tools_frame(tool_fragment(0, id="call_2", name="g", arguments='{"y": 2}')),
        frame({}, "stop"),
    ]
    _, chunks = run(frames)
    calls = chunks[-1].tool_calls or []
    assert [(c.id, c.name, c.arguments) for c in calls] == [
        ("call_1", "f", {"x": 1}),
        ("call_2", "g", {"y": 2}),
    ]


def test_calls_without_a_finish_stay_pending_and_land_nowhere() -> None:
    parser, chunks = run([tools_frame(tool_fragment(0, id="c", name="f", arguments="{}"))])
    assert chunks == [] and parser.assembler.pending and parser.saw_tool_calls


def test_done_hands_out_calls_sent_without_a_finish() -> None:
    # Spec case 1: [DONE] with no finish reason is the provider's end; the calls land.
    parser, chunks = run([tools_frame(tool_fragment(0, id="c", name="f", arguments="{}")), DONE])
    (final,) = chunks
    assert final.is_final and final.finish_reason is None
    assert final.tool_calls == [ToolCall("f", {}, id="c", arguments_json="{}")]
    assert not parser.assembler.pending and parser.done


def test_a_finish_without_calls_is_not_turned_into_tool_calls() -> None:
    parser, _ = run([content("a", "stop")])
    assert parser.finish_reason == "stop" and not parser.saw_tool_calls


def test_an_empty_tool_calls_list_is_not_a_tool_call() -> None:
    parser, chunks = run([frame({"content": "a", "tool_calls": []}), content("b", "stop")])
    assert [c.content for c in chunks] == ["a", "b"] and chunks[-1].tool_calls is None
    assert not parser.saw_tool_calls


def test_each_call_lands_exactly_once() -> None:
    frames = [
        tools_frame(tool_fragment(0, id="c", name="f", arguments="{}")),
        frame({}, "stop"),
        frame({}, "stop"),
        ev({"choices": [], "usage": {"total_tokens": 1}}),
    ]
    _, chunks = run(frames)
    assert sum(len(c.tool_calls or []) for c in chunks) == 1
