"""dialects.responses: every Responses event and response object into neutral Deltas (no I/O)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from llmchat.dialects.base import Delta
from llmchat.dialects.responses import ResponsesDialect
from llmchat.dialects.responses_items import citation_key
from llmchat.pipeline.accumulate import Accumulator
from llmchat.pipeline.judge import DONE_ENDING, EOF_ENDING, judge
from llmchat.sse import SSEEvent
from llmchat.tools import ToolCall

USAGE = {
    "input_tokens": 11,
    "input_tokens_details": {"cached_tokens": 4},
    "output_tokens": 7,
    "output_tokens_details": {"reasoning_tokens": 3},
    "total_tokens": 18,
}


def response(status: str = "completed", output: list[Any] | None = None, **extra: Any) -> Any:
    return {
        "id": "resp_1",
        "object": "response",
        "model": "m-1",
        "status": status,
        "output": output or [],
        **extra,
    }


def ev(kind: str, **fields: Any) -> dict[str, Any]:
    return {"type": kind, **fields}


def message(text: str = "", refusal: str = "", annotations: list[Any] | None = None) -> Any:
    content: list[Any] = []
    if text:
        content.append({"type": "output_text", "text": text, "annotations": annotations or []})
    if refusal:
        content.append({"type": "refusal", "refusal": refusal})
    return {"type": "message", "id": "msg_1", "role": "assistant", "content": content}


def call_item(call_id: str = "call_1", name: str = "f", arguments: str = '{"a":1}') -> Any:
    return {
        "type": "function_call",
        "id": f"fc_{call_id}",
        "call_id": call_id,
        "name": name,
        "arguments": arguments,
        "status": "completed",
    }


def delta(dialect: ResponsesDialect, payload: dict[str, Any], **kw: Any) -> Delta:
    out = dialect.decode(payload, **kw)
    assert isinstance(out, Delta), out
    return out


# -- stream events ---------------------------------------------------------------------


def test_text_deltas_are_plain_strings() -> None:
    d = ResponsesDialect()
    assert d.decode(ev("response.output_text.delta", delta="Hel", item_id="msg_1")) == "Hel"
    assert d.decode(ev("response.output_text.delta", delta="", item_id="msg_1")) == ""


def test_created_carries_id_and_model_but_is_no_answer() -> None:
    out = delta(ResponsesDialect(), ev("response.created", response=response("in_progress")))
    assert (out.id, out.model, out.choice, out.end) == ("resp_1", "m-1", False, False)


@pytest.mark.parametrize(
    "kind, index",
    [
        ("response.reasoning_text.delta", "content_index"),
        ("response.reasoning_summary_text.delta", "summary_index"),
    ],
)
def test_reasoning_deltas_are_thinking_with_a_blank_line_between_segments(
    kind: str, index: str
) -> None:
    d = ResponsesDialect()
    first = delta(d, ev(kind, item_id="rs_1", delta="a", **{index: 0}))
    same = delta(d, ev(kind, item_id="rs_1", delta="b", **{index: 0}))
    second = delta(d, ev(kind, item_id="rs_1", delta="c", **{index: 1}))
    other_item = delta(d, ev(kind, item_id="rs_2", delta="d", **{index: 0}))
    assert [first.thinking, same.thinking, second.thinking, other_item.thinking] == [
        "a",
        "b",
        "\n\nc",
        "\n\nd",
    ]
    assert first.choice and first.text == ""


def test_refusal_deltas_are_refusal() -> None:
    out = delta(ResponsesDialect(), ev("response.refusal.delta", delta="No."))
    assert (out.refusal, out.text, out.choice) == ("No.", "", True)


def test_a_function_call_lands_whole_from_its_done_item_and_argument_deltas_are_ignored() -> None:
    d = ResponsesDialect()
    assert delta(d, ev("response.function_call_arguments.delta", delta='{"a"')) == Delta()
    assert delta(d, ev("response.function_call_arguments.done", arguments='{"a":1}')) == Delta()
    added = ev("response.output_item.added", item={**call_item(), "arguments": ""})
    assert delta(d, added) == Delta()
    done = delta(d, ev("response.output_item.done", item=call_item()))
    assert done.calls == [ToolCall("f", {"a": 1}, id="call_1", arguments_json='{"a":1}')]
    assert delta(d, ev("response.output_item.done", item=call_item())).calls is None  # twice
    final = delta(d, ev("response.completed", response=response(output=[call_item()])))
    assert final.calls is None and final.finish_reason == "tool_calls"
    assert final.provider_reason == "completed" and final.end


def test_url_citations_are_deduplicated_ignoring_utm_parameters() -> None:
    d = ResponsesDialect()
    first = {"type": "url_citation", "url": "https://a.example/x?utm_source=openai", "title": "A"}
    again = {"type": "url_citation", "url": "https://a.example/x", "title": "A"}
    other = {"type": "url_citation", "url": "https://a.example/x?id=2&utm_medium=m"}
    one = delta(d, ev("response.output_text.annotation.added", annotation=first))
    assert one.citations == [first["url"]] and one.choice
    assert delta(d, ev("response.output_text.annotation.added", annotation=again)).citations is None
    two = delta(d, ev("response.output_text.annotation.added", annotation=other))
    assert two.citations == [first["url"], other["url"]]
    file_cite = {"type": "file_citation", "file_id": "f", "filename": "a.pdf"}
    assert delta(d, ev("response.output_text.annotation.added", annotation=file_cite)) == Delta()
    final = delta(
        d, ev("response.completed", response=response(output=[message("t", annotations=[again])]))
    )
    assert final.citations is None  # nothing new: the list stands as it was


def test_citation_key_drops_only_utm_parameters() -> None:
    assert (
        citation_key("https://x.example/p?b=1&utm_source=s&a=2#f")
        == "https://x.example/p?b=1&a=2#f"
    )
    assert citation_key({"url": "https://x.example/?UTM_Campaign=c"}) == "https://x.example/"
    assert citation_key({"title": "no url"}) is None


def test_perplexity_style_search_results_and_citations_are_citations() -> None:
    d = ResponsesDialect()
    results = [
        {"title": "A", "url": "https://a.example"},
        {"title": "B", "url": "https://b.example"},
    ]
    final = response(
        output=[{"type": "search_results", "results": results}, message("hi")],
        citations=["https://a.example?utm_source=x", "https://c.example"],
    )
    out = delta(d, ev("response.completed", response=final))
    assert out.citations == ["https://a.example", "https://b.example", "https://c.example"]
    top = delta(ResponsesDialect(), {"search_results": results[:1], **response()}, whole=True)
    assert top.citations == ["https://a.example"]


def test_reasoning_items_become_parts_only_when_they_can_go_back() -> None:
    d = ResponsesDialect()
    encrypted = {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "gAAA"}
    text = {
        "type": "reasoning",
        "id": "rs_2",
        "summary": [],
        "content": [{"type": "reasoning_text", "text": "why"}],
    }
    bare = {"type": "reasoning", "id": "rs_3", "summary": [{"type": "summary_text", "text": "s"}]}
    parts = [
        delta(d, ev("response.output_item.done", item=i)).parts for i in (encrypted, text, bare)
    ]
    assert parts == [
        [{"dialect": "responses", "item": encrypted}],
        [{"dialect": "responses", "item": text}],
        None,
    ]


# -- the ends --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "status, details, finish, provider",
    [
        ("completed", None, "stop", "completed"),
        ("incomplete", {"reason": "max_output_tokens"}, "length", "incomplete:max_output_tokens"),
        ("incomplete", {"reason": "content_filter"}, "content_filter", "incomplete:content_filter"),
        ("incomplete", {"reason": "odd"}, "incomplete:odd", "incomplete:odd"),
        ("incomplete", None, "incomplete", "incomplete"),
    ],
)
@pytest.mark.parametrize("whole", [False, True], ids=["event", "body"])
def test_every_finish_state(
    status: str, details: Any, finish: str, provider: str, whole: bool
) -> None:
    body = response(status, [message("x")], incomplete_details=details, usage=USAGE)
    payload = body if whole else ev(f"response.{status}", response=body)
    out = delta(ResponsesDialect(), payload, whole=whole)
    assert (out.finish_reason, out.provider_reason or out.finish_reason) == (finish, provider)
    assert out.end is not whole and out.error is None and out.choice
    assert out.text == "x"  # a stream that sent no text delta gets the final output's


def test_the_final_output_does_not_repeat_what_the_stream_delivered() -> None:
    d = ResponsesDialect()
    reasoning = {"type": "reasoning", "id": "rs_9", "summary": [], "encrypted_content": "gAAA"}
    d.decode(ev("response.output_text.delta", delta="Hi"))
    d.decode(ev("response.reasoning_summary_text.delta", delta="t", item_id="rs_9"))
    d.decode(ev("response.refusal.delta", delta="no"))
    assert delta(d, ev("response.output_item.done", item=reasoning)).parts
    assert delta(d, ev("response.output_item.done", item=call_item())).calls
    # OpenRouter re-numbers items in the final output: nothing of a kind already given.
    renumbered = [{**reasoning, "id": "rs_10"}, message("Hi", "no"), call_item("call_x")]
    final = delta(d, ev("response.completed", response=response(output=renumbered)))
    assert (final.text, final.thinking, final.refusal, final.calls, final.parts) == (
        "",
        "",
        "",
        None,
        None,
    )


def test_failed_is_an_error_with_the_provider_message() -> None:
    failed = response("failed", error={"code": "server_error", "message": "boom"})
    out = delta(ResponsesDialect(), ev("response.failed", response=failed))
    assert (out.error, out.finish_reason, out.provider_reason, out.end) == (
        "boom",
        "error",
        "failed",
        True,
    )
    silent = delta(ResponsesDialect(), ev("response.failed", response=response("failed")))
    assert silent.error == "The response failed"


@pytest.mark.parametrize(
    "payload",
    [
        ev("error", code="insufficient_quota", message="quota"),
        ev("error", error={"type": "insufficient_quota", "message": "quota"}),
        {"error": {"code": 500, "message": "quota", "type": "server_error"}},
    ],
    ids=["flat", "nested", "llama-server"],
)
def test_error_events_end_the_stream_with_the_message(payload: dict[str, Any]) -> None:
    out = delta(ResponsesDialect(), payload)
    assert (out.error, out.end, out.finish_reason) == ("quota", True, None)


@pytest.mark.parametrize("status", ["queued", "in_progress"])
def test_a_background_body_is_a_failure_saying_so(status: str) -> None:
    out = delta(ResponsesDialect(), response(status, background=True), whole=True)
    assert out.error is not None and "background mode is not supported" in out.error
    assert status in out.error and out.finish_reason is None and not out.choice


@pytest.mark.parametrize(
    "payload",
    [
        ev("response.web_search_call.searching", item_id="ws_1"),
        ev("response.content_part.added", part={"type": "output_text", "text": ""}),
        ev("response.output_text.done", text="whole"),
        ev("response.output_item.done", item={"type": "web_search_call", "id": "ws_1"}),
        ev("response.some_future_event", delta="x"),
        ev("keepalive"),
        {"unrelated": True},
    ],
)
def test_unknown_and_bookkeeping_events_add_nothing(payload: dict[str, Any]) -> None:
    assert delta(ResponsesDialect(), payload) == Delta()


# -- a whole body ----------------------------------------------------------------------


def test_a_body_reads_every_item_kind() -> None:
    reasoning = {
        "type": "reasoning",
        "id": "rs_1",
        "summary": [{"type": "summary_text", "text": "s1"}, {"type": "summary_text", "text": "s2"}],
        "encrypted_content": "gAAA",
    }
    body = response(
        output=[reasoning, message("Hello", refusal="no"), call_item("c1"), call_item("c2", "g")],
        usage=USAGE,
    )
    out = delta(ResponsesDialect(), body, whole=True)
    assert (out.text, out.refusal, out.thinking) == ("Hello", "no", "s1\n\ns2")
    assert [c.id for c in out.calls or []] == ["c1", "c2"]
    assert out.finish_reason == "tool_calls" and out.parts == [
        {"dialect": "responses", "item": reasoning}
    ]
    assert not out.end  # a body has no end event; it is whole


def test_usage_fields_in_openai_names_from_a_body_or_an_event() -> None:
    want = {
        "model": "m-1",
        "usage": USAGE,
        "prompt_tokens": 11,
        "completion_tokens": 7,
        "total_tokens": 18,
        "cached_tokens": 4,
        "reasoning_tokens": 3,
    }
    body = response(usage=USAGE)
    assert ResponsesDialect.usage_fields(body) == want
    assert ResponsesDialect.usage_fields(ev("response.completed", response=body)) == want
    zero = {"input_tokens": 0, "output_tokens": 0}
    assert ResponsesDialect.usage_fields(response(usage=zero))["prompt_tokens"] == 0
    assert ResponsesDialect.usage_fields(ev("response.created", response=response(usage=None))) == {
        "model": "m-1"
    }


# -- through the accumulator and judge -------------------------------------------------


def feed(events: list[dict[str, Any] | str]) -> Accumulator:
    acc = Accumulator(ResponsesDialect())
    for event in events:
        acc.feed_event(SSEEvent(data=event if isinstance(event, str) else json.dumps(event)))
    return acc


def test_completed_is_the_end_and_later_events_are_ignored() -> None:
    acc = feed(
        [
            ev("response.created", response=response("in_progress")),
            ev("response.output_text.delta", delta="Hi"),
            ev("response.completed", response=response(output=[message("Hi")], usage=USAGE)),
            ev("response.output_text.delta", delta=" late"),
            "[DONE]",  # OpenRouter's, after the end: not a dropped frame
        ]
    )
    assert acc.done and acc.finish_reason == "stop" and acc.dropped == 0
    assert judge(DONE_ENDING, acc).finished


def test_a_stream_without_an_end_is_the_stream_closed_failure() -> None:
    acc = feed([ev("response.output_text.delta", delta="Hi")])
    assert not acc.done and judge(EOF_ENDING, acc).err == (
        "Stream closed without [DONE] or a finish reason"
    )


def test_an_error_event_fails_the_completion() -> None:
    acc = feed([ev("response.output_text.delta", delta="Hi"), ev("error", message="bad")])
    verdict = judge(DONE_ENDING, acc)
    assert acc.done and (verdict.error_class, verdict.err) == ("response", "bad")
