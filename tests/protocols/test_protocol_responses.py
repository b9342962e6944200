"""`ResponsesStream`: OpenAI chat chunks in, Responses API events out.

Each event is checked three ways: strictly against the installed `openai`
SDK's pydantic models (not the lenient construct the client uses), against
the field sets of recorded OpenAI/DeepSeek streams (captures/responses), and
for its numbering (sequence_number, output_index, content_index).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from llmchat.protocols.responses import BAD_TOOL_CALL, UPSTREAM_FAILED, ResponsesStream
from llmchat.protocols.translator import MALFORMED

from ..support.paths import CAPTURES_DIR

pydantic = pytest.importorskip("pydantic")
responses_types = pytest.importorskip("openai.types.responses")

CAPTURES = CAPTURES_DIR / "responses"
EVENT = pydantic.TypeAdapter(responses_types.ResponseStreamEvent)
ECHO = {
    "model": "m",
    "tools": [
        {
            "type": "function",
            "name": "f",
            "parameters": {"type": "object", "properties": {}},
            "strict": True,
        }
    ],
}


def chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> dict[str, Any]:
    return {
        "id": "c",
        "model": "up",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        **extra,
    }


def call(index: int, call_id: str, name: str, arguments: str) -> dict[str, Any]:
    return {"index": index, "id": call_id, "function": {"name": name, "arguments": arguments}}


def events(data: bytes) -> list[dict[str, Any]]:
    out = []
    for block in data.decode().split("\n\n"):
        if not block:
            continue
        name, payload = block.split("\n")
        parsed = json.loads(payload.removeprefix("data: "))
        assert name == "event: " + parsed["type"]
        out.append(parsed)
    return out


def run(*chunks: dict[str, Any], finish: bool = True) -> list[dict[str, Any]]:
    stream = ResponsesStream(ECHO, response_id="resp_1", created_at=1)
    data = stream.start()
    for one in chunks:
        data += stream.delta(one)
    if finish:
        data += stream.finish()
    got = events(data)
    for event in got:
        EVENT.validate_python(event, strict=False)  # raises on a wrong or missing field
    assert [e["sequence_number"] for e in got] == list(range(len(got)))
    return got


FULL = (
    chunk({"reasoning_content": "think "}),
    chunk({"reasoning_content": "more"}),
    chunk({"content": "Hi"}),
    chunk({"tool_calls": [call(0, "c1", "f", '{"a": 1}')]}),
    chunk({"tool_calls": [call(1, "c2", "f", "{}")]}),
    chunk({}, "tool_calls"),
    {"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 4}},
)


def test_full_sequence_and_indices() -> None:
    got = run(*FULL)
    assert [e["type"] for e in got] == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
        "response.reasoning_text.delta",
        "response.reasoning_text.delta",
        "response.reasoning_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.output_item.added",
        "response.content_part.added",
        "response.output_text.delta",
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.output_item.added",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.done",
        "response.output_item.done",
        "response.output_item.added",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.done",
        "response.output_item.done",
        "response.completed",
    ]
    added = [e for e in got if e["type"] == "response.output_item.added"]
    assert [(e["output_index"], e["item"]["type"]) for e in added] == [
        (0, "reasoning"),
        (1, "message"),
        (2, "function_call"),
        (3, "function_call"),
    ]
    final = got[-1]["response"]
    assert final["id"] == got[0]["response"]["id"] == "resp_1"
    assert [item["status"] for item in final["output"]] == ["completed"] * 4
    assert final["output"][0]["content"] == [{"type": "reasoning_text", "text": "think more"}]
    assert [i.get("call_id") for i in final["output"][2:]] == ["c1", "c2"]
    assert final["usage"]["total_tokens"] == 7 and final["model"] == "m"


def test_max_tokens_is_incomplete_and_the_open_item_too() -> None:
    got = run(chunk({"content": "cut"}), chunk({}, "length"))
    final = got[-1]
    assert final["type"] == "response.incomplete"
    assert final["response"]["incomplete_details"] == {"reason": "max_output_tokens"}
    assert final["response"]["output"][0]["status"] == "incomplete"


@pytest.mark.parametrize("arguments", ['{"a": ', "[1]", "nope", '"text"'])
def test_undecodable_arguments_fail_and_never_finish_the_call(arguments: str) -> None:
    got = run(chunk({"content": "x"}), chunk({"tool_calls": [call(0, "c1", "f", arguments)]}))
    assert got[-1]["type"] == "response.failed"
    assert got[-1]["response"]["error"] == {"code": "server_error", "message": BAD_TOOL_CALL}
    kinds = [e["type"] for e in got]
    assert "response.function_call_arguments.done" not in kinds
    assert "response.completed" not in kinds
    assert got[-1]["response"]["output"][1]["status"] == "incomplete"


def test_undecodable_first_call_fails_when_the_next_one_opens() -> None:
    got = run(
        chunk({"tool_calls": [call(0, "c1", "f", "{broken"), call(1, "c2", "f", "{}")]}),
        finish=False,
    )
    assert got[-1]["type"] == "response.failed"
    assert got[-1]["response"]["error"]["message"] == MALFORMED
    assert not any(e["type"] == "response.function_call_arguments.done" for e in got)


def test_unnamed_tool_call_fails_at_finish() -> None:
    got = run(chunk({"tool_calls": [{"index": 0, "function": {"arguments": "{}"}}]}))
    assert got[-1]["type"] == "response.failed"


def test_inband_upstream_error_is_not_reflected() -> None:
    got = run(
        chunk({"content": "partial"}),
        {"error": {"message": "secret at http://10.0.0.1:8080"}},
        finish=False,
    )
    failed = got[-1]["response"]
    assert got[-1]["type"] == "response.failed"
    assert failed["error"]["message"] == UPSTREAM_FAILED
    assert failed["output"][0]["content"][0]["text"] == "partial"


def test_nothing_after_the_end() -> None:
    stream = ResponsesStream(ECHO)
    stream.start()
    stream.delta(chunk({"content": "a"}, "stop"))
    assert stream.finish()
    assert stream.finish() == b"" and stream.delta(chunk({"content": "b"})) == b""
    assert stream.error_event(500, "late") == b""


def test_usage_details_and_content_bytes() -> None:
    stream = ResponsesStream(ECHO)
    stream.start()
    stream.delta(chunk({"content": "hé"}, "stop"))
    usage_chunk = {
        "choices": [],
        "usage": {
            "prompt_tokens": 5,
            "completion_tokens": 2,
            "prompt_tokens_details": {"cached_tokens": 3},
            "completion_tokens_details": {"reasoning_tokens": 1},
        },
    }
    stream.delta(usage_chunk)
    final = events(stream.finish())[-1]["response"]["usage"]
    assert final["input_tokens_details"]["cached_tokens"] == 3
    assert final["output_tokens_details"]["reasoning_tokens"] == 1
    assert stream.usage() == (5, 2, len("hé".encode()))


# -- shapes against recorded streams -----------------------------------------------------


def _recorded(name: str) -> dict[str, dict[str, Any]]:
    """The first event of each type in a recorded SSE stream."""
    first: dict[str, dict[str, Any]] = {}
    if not CAPTURES.is_dir():
        return first
    for line in (CAPTURES / name).read_text().splitlines():
        if line.startswith("data: "):
            event = json.loads(line[6:])
            first.setdefault(event["type"], event)
    return first


RECORDED = {
    **_recorded("pyai_deepseek_responses_function_tool_stream.sse.txt"),
    **{
        k: v
        for k, v in _recorded("pyai_reasoning_summary_stream.sse.txt").items()
        if not k.startswith("response.reasoning")
    },
}


@pytest.mark.skipif(not CAPTURES.is_dir(), reason=f"{CAPTURES} absent: no recorded stream")
def test_event_fields_match_the_recorded_streams() -> None:
    ours = {e["type"]: e for e in run(*FULL)}
    compared = 0
    for kind, event in ours.items():
        recorded = RECORDED.get(kind)
        if recorded is None:
            continue
        compared += 1
        expected = set(recorded) - {"obfuscation"}
        assert set(event) == expected, kind
        for nested in ("item", "part"):
            if nested in event and recorded[nested]["type"] == event[nested]["type"]:
                wanted = set(recorded[nested]) - {"encrypted_content"}
                assert set(event[nested]) >= wanted, (kind, nested)
        if "response" in event:
            assert set(event["response"]) <= set(recorded["response"]) | {"store"}, kind
    assert compared >= 12
    recorded_usage = RECORDED["response.completed"]["response"]["usage"]
    usage = ours["response.completed"]["response"]["usage"]
    assert set(usage) == set(recorded_usage)
