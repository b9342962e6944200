"""The dialect seam: any `Dialect` runs through the one accumulator, judge and runners.

A toy dialect (one JSON object per event: ``t`` text, ``r`` reason, ``end``,
``part``) shows what a new wire dialect gets for free: the explicit end, the
provider's own finish value beside the mapped one, reasoning parts carried to
`Response.to_message()`, NDJSON framing, a derived total, and the same
Response blocking and streamed.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, ClassVar

import pytest

from llmchat import Message, OpenAICommon
from llmchat.dialects import Delta, Dialect
from llmchat.dialects.base import Framing
from llmchat.errors import InvalidArgumentError, InvalidMessageError
from llmchat.pipeline import Accumulator
from llmchat.sse import SSEEvent
from llmchat.transport import MockResponse, MockTransport

_REASONS = {"fin": "stop", "cap": "length"}


class Toy(Dialect):
    name: ClassVar[str] = "toy"
    derives_total: ClassVar[bool] = True

    def decode(self, payload: Mapping[str, Any], *, whole: bool = False) -> str | Delta:
        wire = payload.get("r")
        part = payload.get("part")
        return Delta(
            text=payload.get("t", ""),
            finish_reason=_REASONS.get(wire, wire) if wire else None,
            provider_reason=wire,
            end=bool(payload.get("end")),
            parts=[{"dialect": "toy", "sig": part}] if part else None,
            choice=True,
            whole=whole,
        )

    @staticmethod
    def usage_fields(payload: Mapping[str, Any]) -> dict[str, Any]:
        if "in" in payload or "out" in payload:
            usage = {k: payload[k] for k in ("in", "out") if k in payload}
            fields: dict[str, Any] = {"usage": usage}
            if "in" in payload:
                fields["prompt_tokens"] = payload["in"]
            if "out" in payload:
                fields["completion_tokens"] = payload["out"]
            return fields
        return {}


class ToyLines(Toy):
    framing: ClassVar[Framing] = "ndjson"


class ToyBackend(OpenAICommon):
    dialect = Toy
    text_dialect = None


class ToyLinesBackend(OpenAICommon):
    dialect = ToyLines
    text_dialect = None


EVENTS: list[dict[str, Any]] = [
    {"t": "Hel", "in": 7},
    {"t": "lo", "part": "s1"},
    {"r": "fin", "out": 2},
    {"end": True},
    {"t": "after the end"},
]


def _sse(events: list[dict[str, Any]]) -> bytes:
    return b"".join(b"data: " + json.dumps(e).encode() + b"\n\n" for e in events)


def _ndjson(events: list[dict[str, Any]]) -> bytes:
    return b"".join(json.dumps(e).encode() + b"\n" for e in events)


def _backend(cls: type[OpenAICommon], answer: MockResponse) -> OpenAICommon:
    return cls("http://toy.test/v1", transport=MockTransport(lambda request: answer))


def test_accumulator_applies_the_dialect_and_stops_at_its_end() -> None:
    acc = Accumulator(Toy())
    chunks = []
    for event in EVENTS:
        chunks += acc.feed_event(SSEEvent(data=json.dumps(event)))
    assert "".join(c.content for c in chunks) == "Hello"
    assert acc.done and acc.finish_reason == "stop" and acc.provider_reason == "fin"
    assert acc.parts == [{"dialect": "toy", "sig": "s1"}]
    assert [c.finish_reason for c in chunks if c.is_final] == ["stop"]


def test_stream_settles_with_provider_value_parts_and_derived_total() -> None:
    answer = MockResponse(headers={"Content-Type": "text/event-stream"}, body=_sse(EVENTS))
    r = _backend(ToyBackend, answer).chat_completion_stream([{"role": "user", "content": "x"}])
    r.wait(5)
    assert r.is_success, r.err
    assert r.msg == "Hello"
    assert (r.finish_reason, r.provider_finish_reason) == ("stop", "fin")
    assert (r.prompt_tokens, r.completion_tokens, r.total_tokens) == (7, 2, 9)
    assert r.reasoning_parts == [{"dialect": "toy", "sig": "s1"}]
    turn = r.to_message()
    assert turn == Message("assistant", "Hello", reasoning_parts=[{"dialect": "toy", "sig": "s1"}])


def test_ndjson_framing_streams_by_content_type() -> None:
    answer = MockResponse(headers={"Content-Type": "application/x-ndjson"}, body=_ndjson(EVENTS))
    r = _backend(ToyLinesBackend, answer).chat_completion_stream([{"role": "user", "content": "x"}])
    r.wait(5)
    assert r.is_success, r.err
    assert r.msg == "Hello" and r.provider_finish_reason == "fin"


def test_a_body_that_stops_before_the_finish_is_the_stream_closed_failure() -> None:
    answer = MockResponse(headers={"Content-Type": "text/event-stream"}, body=_sse(EVENTS[:2]))
    r = _backend(ToyBackend, answer).chat_completion_stream([{"role": "user", "content": "x"}])
    r.wait(5)
    assert not r.is_success and r.error_class == "response"
    assert r.msg == "Hello"  # nothing is lost


def test_unmapped_provider_reason_fails_as_unknown_and_keeps_the_wire_value() -> None:
    events = [{"t": "a"}, {"r": "pause", "end": True}]
    answer = MockResponse(headers={"Content-Type": "text/event-stream"}, body=_sse(events))
    r = _backend(ToyBackend, answer).chat_completion_stream([{"role": "user", "content": "x"}])
    r.wait(5)
    assert not r.is_success and r.err == "Unknown finish reason: pause"
    assert r.provider_finish_reason == "pause"


def test_mapped_length_fails_with_the_provider_value_kept() -> None:
    body = json.dumps({"t": "abc", "r": "cap", "in": 1, "out": 3})
    answer = MockResponse(headers={"Content-Type": "application/json"}, body=body)
    r = _backend(ToyBackend, answer).chat_completion([{"role": "user", "content": "x"}])
    assert (r.finish_reason, r.provider_finish_reason, r.error_class) == (
        "length",
        "cap",
        "response",
    )
    assert r.msg == "abc" and r.total_tokens == 4


def test_blocking_and_streamed_agree() -> None:
    body = json.dumps({"t": "Hello", "part": "s1", "r": "fin", "in": 7, "out": 2})
    blocking = _backend(
        ToyBackend, MockResponse(headers={"Content-Type": "application/json"}, body=body)
    ).chat_completion([{"role": "user", "content": "x"}])
    streamed = _backend(
        ToyBackend, MockResponse(headers={"Content-Type": "text/event-stream"}, body=_sse(EVENTS))
    ).chat_completion_stream([{"role": "user", "content": "x"}])
    streamed.wait(5)
    for name in ("msg", "finish_reason", "provider_finish_reason", "total_tokens"):
        assert getattr(blocking, name) == getattr(streamed, name), name
    assert blocking.to_message() == streamed.to_message()


def test_a_dialect_without_text_completions_says_so_before_io() -> None:
    def refuse(request: Any) -> MockResponse:
        raise AssertionError("nothing may be sent")

    backend = ToyBackend("http://toy.test/v1", transport=MockTransport(refuse))
    with pytest.raises(InvalidArgumentError, match="ToyBackend has no text completions"):
        backend.text_completion([{"role": "user", "content": "x"}])


def test_message_reasoning_parts_round_trip_and_stay_off_the_openai_wire() -> None:
    parts = [{"dialect": "anthropic", "type": "thinking", "thinking": "t", "signature": "s"}]
    message = Message("assistant", "hi", reasoning_parts=parts)
    assert Message.from_dict(message.to_dict()) == message
    assert not message.is_plain
    body = OpenAICommon("http://x.test/v1").prepare_chat_request([message]).body
    assert body["messages"] == [{"role": "assistant", "content": "hi"}]
    with pytest.raises(InvalidMessageError, match="reasoning_parts"):
        Message("assistant", "hi", reasoning_parts="nope")  # type: ignore[arg-type]


def test_to_message_of_a_tool_call_has_no_content() -> None:
    body = json.dumps(
        {
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "tool_calls",
                    "message": {
                        "role": "assistant",
                        "content": None,
                        "tool_calls": [
                            {
                                "id": "c1",
                                "type": "function",
                                "function": {"name": "f", "arguments": '{"a":1}'},
                            }
                        ],
                    },
                }
            ]
        }
    )
    answer = MockResponse(headers={"Content-Type": "application/json"}, body=body)
    r = OpenAICommon("http://x.test/v1", transport=MockTransport(lambda q: answer)).chat_completion(
        [{"role": "user", "content": "x"}]
    )
    turn = r.to_message()
    assert turn.content is None and turn.reasoning_parts is None
    assert turn.tool_calls is not None and turn.tool_calls[0]["function"]["name"] == "f"


class GatewayBackend(OpenAICommon):
    """A user's own gateway: its own route per mode and its own body, the toy wire."""

    dialect = Toy
    text_dialect = None

    def _chat_route(self, members: Mapping[str, Any], *, stream: bool) -> str:
        return f"/gw/{members.get('model', 'none')}/{'stream' if stream else 'once'}"

    def _build_chat_body(
        self,
        history: list[Message],
        members: dict[str, Any],
        tools: list[Mapping[str, Any]] | None,
        tool_choice: str | Mapping[str, Any] | None,
        *,
        stream: bool,
    ) -> dict[str, Any]:
        return {"turns": [m.content for m in history], "knobs": members, "tools": tools or []}


def test_a_subclass_builds_its_own_route_and_body_through_the_shared_checks() -> None:
    backend = GatewayBackend("http://gw.test/v1", model="m7")
    request = backend.prepare_chat_request(
        [{"role": "user", "content": "hi"}], [{"type": "function"}], stream=True
    )
    assert request.url == "http://gw.test/v1/gw/m7/stream"
    assert json.loads(request.data) == {
        "knobs": {"model": "m7"},
        "tools": [{"type": "function"}],
        "turns": ["hi"],
    }
    with pytest.raises(TypeError, match="tool_choice"):
        backend.prepare_chat_request([{"role": "user", "content": "hi"}], tool_choice=3)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"tools\[0\]"):
        backend.prepare_chat_request([{"role": "user", "content": "hi"}], ["nope"])  # type: ignore[list-item]
