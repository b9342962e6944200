"""The Responses face's liberal rule, as a conformance table of what Codex sends today.

Each row is a request shape taken from Codex's own requests (the recorded
fixtures, and the variants its other models and later turns send), posted as
is to the real proxy over a loopback upstream. Each must get a 200 that
completes; the test then asserts what reached the upstream (tools flattened,
dropped ones absent, reasoning in place) and that every drop left its DEBUG
line on the ``llmchat.proxy`` logger.
"""

from __future__ import annotations

import copy
import json
import logging
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import requests

from llmchat.protocols.responses_objects import carried_reasoning
from llmchat.testing import ChatResponder, ScriptedServer

from ...support.paths import FIXTURES_DIR
from ...support.proxy import proxy_over

FIXTURES = FIXTURES_DIR / "agents"
DEFAULT = json.loads((FIXTURES / "codex_0.171.0_default.json").read_text())["body"]
LOCAL = json.loads((FIXTURES / "codex_0.171.0_local_model.json").read_text())["body"]
EXEC = "const r = await tools.exec_command({cmd: 'ls'});\ntext(r.output);"


@pytest.fixture(scope="module")
def served() -> Iterator[tuple[str, ScriptedServer]]:
    with proxy_over(ChatResponder("ok")) as served:
        yield served


def _user(text: str) -> dict[str, Any]:
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


def _with(base: dict[str, Any], **fields: Any) -> dict[str, Any]:
    body = copy.deepcopy(base)
    body.update(fields)
    return body


def _later_turn(base: dict[str, Any], *items: dict[str, Any]) -> dict[str, Any]:
    body = copy.deepcopy(base)
    body["input"] = [*body["input"], *items]
    return body


_EXEC_CALL = {
    "type": "custom_tool_call",
    "id": "ctc_1",
    "status": "completed",
    "call_id": "call_exec",
    "name": "exec",
    "namespace": "functions",
    "input": EXEC,
}
_EXEC_OUTPUT = {
    "type": "custom_tool_call_output",
    "call_id": "call_exec",
    "output": [{"type": "input_text", "text": "Script completed\nOutput:\nout.txt"}],
}
_SHELL_CALL = {
    "type": "function_call",
    "call_id": "call_sh",
    "name": "exec_command",
    "arguments": '{"cmd":"ls"}',
}
_SHELL_OUTPUT = {"type": "function_call_output", "call_id": "call_sh", "output": "out.txt"}


def _names(chat: dict[str, Any]) -> list[str]:
    return [tool["function"]["name"] for tool in chat.get("tools", [])]


def _tool(chat: dict[str, Any], name: str) -> dict[str, Any]:
    function: dict[str, Any] = next(
        t["function"] for t in chat["tools"] if t["function"]["name"] == name
    )
    return function


def _check_default(chat: dict[str, Any]) -> None:
    names = _names(chat)
    assert names[:2] == ["exec", "wait"] and {"sleep", "spawn_agent", "followup_task"} <= set(names)
    assert len(names) == len(set(names))
    exec_tool = _tool(chat, "exec")
    assert exec_tool["parameters"]["required"] == ["input"]
    assert "tools.exec_command" in exec_tool["description"]  # Codex's own words kept
    assert "lark grammar" in exec_tool["description"]  # and the grammar the input follows
    roles = [m["role"] for m in chat["messages"]]
    assert roles == ["system", "user", "user"]  # developer messages joined, first
    assert chat["reasoning_effort"] == "low" and chat["parallel_tool_calls"] is False


def _check_local(chat: dict[str, Any]) -> None:
    names = _names(chat)
    assert "exec_command" in names and "spawn_agent" in names  # multi_agent_v1, flattened
    assert "web_search" not in json.dumps(chat["tools"])


def _check_collision(chat: dict[str, Any]) -> None:
    assert _names(chat) == ["lookup", "crm__send", "mail__send"]


def _check_custom(chat: dict[str, Any]) -> None:
    patch = _tool(chat, "apply_patch")
    assert "*** Begin Patch" in patch["description"]
    assert patch["parameters"]["properties"]["input"]["type"] == "string"


def _check_exec_round(chat: dict[str, Any]) -> None:
    calling = next(m for m in chat["messages"] if m.get("tool_calls"))
    [call] = calling["tool_calls"]
    assert call["function"]["name"] == "exec"
    assert json.loads(call["function"]["arguments"]) == {"input": EXEC}
    assert calling["reasoning_content"] == "List the files first."
    tool = chat["messages"][-1]
    assert tool == {
        "role": "tool",
        "tool_call_id": "call_exec",
        "content": "Script completed\nOutput:\nout.txt",
    }


def _check_shell_round(chat: dict[str, Any]) -> None:
    calling = next(m for m in chat["messages"] if m.get("tool_calls"))
    assert calling["tool_calls"][0]["function"] == {
        "name": "exec_command",
        "arguments": '{"cmd":"ls"}',
    }
    assert "reasoning_content" not in calling  # OpenAI's own encrypted reasoning: dropped
    assert chat["messages"][-1]["content"] == "out.txt"


def _check_reference(chat: dict[str, Any]) -> None:
    assert [m["role"] for m in chat["messages"]] == ["user", "assistant", "user"]
    assert chat["messages"][1]["content"] == "Hello."


def _check_plain(chat: dict[str, Any]) -> None:
    assert chat["messages"][-1] == {"role": "user", "content": "go"}


Check = Callable[[dict[str, Any]], None]

ROWS: list[tuple[str, dict[str, Any], Check, list[str]]] = [
    (
        "codex default (fixture)",
        DEFAULT,
        _check_default,
        ["body.client_metadata", "body.prompt_cache_key", "reasoning.context", "text.verbosity"],
    ),
    ("codex local model (fixture)", LOCAL, _check_local, ["tools[8] ('web_search')"]),
    (
        "namespace and web_search in tools, names colliding",
        {
            "model": "m",
            "input": "go",
            "tools": [
                {"type": "function", "name": "lookup", "parameters": {"type": "object"}},
                {"type": "web_search", "external_web_access": False},
                {
                    "type": "namespace",
                    "name": "crm",
                    "description": "",
                    "tools": [
                        {"type": "function", "name": "send", "parameters": {"type": "object"}}
                    ],
                },
                {
                    "type": "namespace",
                    "name": "mail",
                    "description": "",
                    "tools": [
                        {"type": "function", "name": "send", "parameters": {"type": "object"}}
                    ],
                },
                {"type": "image_generation"},
            ],
        },
        _check_collision,
        ["tools[1] ('web_search')", "tools[4] ('image_generation')"],
    ),
    (
        "a top-level custom tool with a grammar",
        {
            "model": "m",
            "input": "go",
            "tools": [
                {
                    "type": "custom",
                    "name": "apply_patch",
                    "description": "Edit files.",
                    "format": {
                        "type": "grammar",
                        "syntax": "lark",
                        "definition": 'start: "*** Begin Patch" /[\\s\\S]*/',
                    },
                }
            ],
        },
        _check_custom,
        [],
    ),
    (
        "the exec round: reasoning, custom_tool_call, its output",
        _later_turn(
            DEFAULT,
            {
                "type": "reasoning",
                "id": "rs_1",
                "summary": [],
                "content": [{"type": "reasoning_text", "text": "List the files first."}],
                "encrypted_content": carried_reasoning("List the files first."),
            },
            _EXEC_CALL,
            _EXEC_OUTPUT,
        ),
        _check_exec_round,
        [],
    ),
    (
        "reasoning only as our own encrypted_content",
        _later_turn(
            DEFAULT,
            {
                "type": "reasoning",
                "summary": [],
                "encrypted_content": carried_reasoning("List the files first."),
            },
            _EXEC_CALL,
            _EXEC_OUTPUT,
        ),
        _check_exec_round,
        [],
    ),
    (
        "a function call round with OpenAI's encrypted reasoning",
        _later_turn(
            LOCAL,
            {"type": "reasoning", "summary": [], "encrypted_content": "gAAAAB-openai-opaque"},
            _SHELL_CALL,
            _SHELL_OUTPUT,
        ),
        _check_shell_round,
        ["input[4].encrypted_content"],
    ),
    (
        "item_reference to an item the input repeats",
        {
            "model": "m",
            "input": [
                _user("hi"),
                {
                    "type": "message",
                    "id": "msg_a",
                    "role": "assistant",
                    "content": [{"type": "output_text", "text": "Hello."}],
                },
                {"type": "item_reference", "id": "msg_a"},
                _user("again"),
            ],
        },
        _check_reference,
        ["input[2]"],
    ),
    (
        "unknown items, parts and fields; store: true",
        {
            "model": "m",
            "store": True,
            "service_tier": "flex",
            "some_future_field": {"x": 1},
            "input": [
                {"type": "compaction", "encrypted_content": "x"},
                {"type": "web_search_call", "id": "ws_1", "status": "completed"},
                {
                    "role": "user",
                    "content": [
                        {"type": "input_text", "text": "go"},
                        {"type": "future_part", "data": 1},
                    ],
                },
            ],
        },
        _check_plain,
        [
            "body.store",
            "body.some_future_field",
            "input[0] ('compaction')",
            "input[1] ('web_search_call')",
            "input[2].content[1] ('future_part')",
        ],
    ),
]


@pytest.mark.parametrize(
    ("body", "check", "drops"), [r[1:] for r in ROWS], ids=[r[0] for r in ROWS]
)
def test_codex_request_shapes_are_served(served, caplog, body, check, drops):
    url, upstream = served
    upstream.requests.clear()
    with caplog.at_level(logging.DEBUG, logger="llmchat.proxy"):
        answer = requests.post(url + "/v1/responses", json=body, timeout=10)
    assert answer.status_code == 200, answer.text
    if body.get("stream"):
        assert "event: response.completed" in answer.text
    else:
        assert answer.json()["status"] == "completed"
    [record] = [r for r in upstream.requests if r.path.endswith("/chat/completions")]
    check(json.loads(record.body))
    lines = [r.getMessage() for r in caplog.records if r.name == "llmchat.proxy"]
    for path in drops:
        said = [line for line in lines if f"dropped {path} (" in line]
        assert len(said) == 1, (path, lines)
        assert all(r.levelno == logging.DEBUG for r in caplog.records if "dropped" in r.msg)
