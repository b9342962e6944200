"""Tool-call identity: a reused block index or call id is never a silent drop.

Over real sockets. The rules (spec: TOOL-CALL IDENTITY):

- Anthropic: a ``content_block_start`` at an index whose block is still open
  fails the Response (``response``): which deltas belong to which block cannot
  be known. An index started again after its ``content_block_stop`` is a new
  block, so a second call. A ``tool_use`` block with no ``content_block_stop``
  before the message ends fails it too, instead of landing as a call with cut
  (or ``{}``) arguments; what arrived before stays on the Response.
- Responses: a second ``function_call`` under a ``call_id`` already used by a
  different call fails the Response, streamed or blocking; the same item done
  twice (identical) is one call.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from llmchat.testing import Reply, ScriptedServer

from ..support.anthropic import sse, sse_reply
from .support import run

TOOLS = [
    {"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}},
    {"type": "function", "function": {"name": "g", "parameters": {"type": "object"}}},
]
HEAD = {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-x", "content": []}


def _anthropic(blocks: list[dict[str, Any]]) -> Reply:
    events = [{"type": "message_start", "message": HEAD | {"usage": {"input_tokens": 3}}}]
    events += blocks
    events.append({"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {}})
    events.append({"type": "message_stop"})
    return sse_reply(sse(events))


def _start(index: int, block: dict[str, Any]) -> dict[str, Any]:
    return {"type": "content_block_start", "index": index, "content_block": block}


def _json(index: int, text: str) -> dict[str, Any]:
    delta = {"type": "input_json_delta", "partial_json": text}
    return {"type": "content_block_delta", "index": index, "delta": delta}


def _text(index: int, text: str) -> dict[str, Any]:
    delta = {"type": "text_delta", "text": text}
    return {"type": "content_block_delta", "index": index, "delta": delta}


def _stop(index: int) -> dict[str, Any]:
    return {"type": "content_block_stop", "index": index}


def _tool(call_id: str, name: str) -> dict[str, Any]:
    return {"type": "tool_use", "id": call_id, "name": name, "input": {}}


def test_anthropic_index_reused_while_open_fails_and_after_its_stop_is_a_second_call() -> None:
    reply = _anthropic(
        [
            _start(0, _tool("toolu_1", "f")),
            _json(0, '{"a":'),
            _start(0, _tool("toolu_2", "g")),
            _json(0, "1}"),
            _stop(0),
        ]
    )
    with ScriptedServer(lambda r: reply) as url:
        response = run("anthropic", url, True, TOOLS)
    assert not response.is_success
    assert response.error_class == "response" and "started again" in (response.err or "")
    # After its content_block_stop, an index started again is a new block: a second call.
    reply = _anthropic(
        [
            _start(0, _tool("toolu_1", "f")),
            _json(0, '{"a":1}'),
            _stop(0),
            _start(0, _tool("toolu_2", "g")),
            _json(0, '{"b":2}'),
            _stop(0),
        ]
    )
    with ScriptedServer(lambda r: reply) as url:
        response = run("anthropic", url, True, TOOLS)
    assert response.is_success, response.err
    assert [(c.id, c.name, c.arguments) for c in response.tool_calls] == [
        ("toolu_1", "f", {"a": 1}),
        ("toolu_2", "g", {"b": 2}),
    ]


@pytest.mark.parametrize("partial", ["", '{"city": "Par'])
def test_anthropic_tool_block_that_never_ends_fails_keeping_what_came(partial: str) -> None:
    blocks = [_start(0, {"type": "text", "text": ""}), _text(0, "Let me look."), _stop(0)]
    blocks += [_start(1, _tool("toolu_1", "f")), _json(1, '{"a":1}'), _stop(1)]
    blocks += [_start(2, _tool("toolu_2", "g"))]
    if partial:
        blocks.append(_json(2, partial))
    with ScriptedServer(lambda r: _anthropic(blocks)) as url:
        response = run("anthropic", url, True, TOOLS)
    assert not response.is_success
    assert response.error_class == "response" and "never ended" in (response.err or "")
    assert response.msg == "Let me look."
    assert [c.id for c in response.tool_calls] == ["toolu_1"]  # the call that did end


def _call(call_id: str, name: str, arguments: dict[str, Any], item: str) -> dict[str, Any]:
    return {
        "type": "function_call",
        "id": item,
        "call_id": call_id,
        "name": name,
        "arguments": json.dumps(arguments),
        "status": "completed",
    }


def _responses(calls: list[dict[str, Any]], stream: bool) -> Reply:
    body = {
        "id": "resp_1",
        "object": "response",
        "model": "gpt-x",
        "status": "completed",
        "output": calls,
        "usage": {"input_tokens": 3, "output_tokens": 4},
    }
    if not stream:
        return Reply.json(body)
    events: list[dict[str, Any]] = [
        {"type": "response.created", "response": body | {"status": "in_progress", "output": []}}
    ]
    events += [
        {"type": "response.output_item.done", "output_index": i, "item": c}
        for i, c in enumerate(calls)
    ]
    events.append({"type": "response.completed", "response": body})
    text = "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events)
    return Reply(200, [("Content-Type", "text/event-stream")], text)


@pytest.mark.parametrize("mode", ["blocking", "stream"])
def test_responses_call_id_reused_by_another_call_fails(mode: str) -> None:
    calls = [_call("call_1", "f", {"a": 1}, "fc_1"), _call("call_1", "g", {"b": 2}, "fc_2")]
    with ScriptedServer(lambda r: _responses(calls, mode == "stream")) as url:
        response = run("responses", url, mode == "stream", TOOLS)
    assert not response.is_success
    assert response.error_class == "response" and "call_1" in (response.err or "")
    assert [c.name for c in response.tool_calls] == ["f"]


@pytest.mark.parametrize("mode", ["blocking", "stream"])
def test_responses_item_id_reused_by_another_call_fails(mode: str) -> None:
    first = _call("", "f", {"a": 1}, "fc_1")
    second = _call("", "g", {"b": 2}, "fc_1")
    with ScriptedServer(lambda r: _responses([first, second], mode == "stream")) as url:
        response = run("responses", url, mode == "stream", TOOLS)
    assert not response.is_success
    assert response.error_class == "response" and "fc_1" in (response.err or "")
