"""Gemini CLI's own requests, as recorded, through the Gemini face (no node needed).

tests/fixtures/agents/gemini_cli_0.61.0_*.json are three requests Gemini CLI
0.61.0 sent on its defaults (recorded whole, headers included): the routing
classifier (``generateContent`` with a ``responseJsonSchema`` written with
Gemini's upper-case type names), the first turn (``streamGenerateContent``
with 15 function declarations and ``thinkingLevel: HIGH``), and the turn
carrying a shell tool's ``functionResponse``. Each is replayed against the
real proxy over `GeminiCliUpstream`; the test reads what reached the
upstream in OpenAI's terms.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
import requests

from llmchat.testing import ScriptedServer

from ..support.paths import FIXTURES_DIR
from ..support.proxy_servers import ServedProxy, serve_proxy
from .gemini_cli import CLASSIFIER_ANSWER, GeminiCliUpstream

KEY = "gemini-recorded-test-key"
DROPPED_HEADERS = ("host", "connection", "content-length", "accept-encoding", "x-goog-api-key")
JSON_SCHEMA_TYPES = {"object", "array", "string", "integer", "number", "boolean", "null"}


def recorded(name: str) -> dict[str, Any]:
    path = FIXTURES_DIR / "agents" / f"gemini_cli_0.61.0_{name}.json"
    return dict(json.loads(path.read_text()))


@pytest.fixture
def replay(tmp_path) -> Iterator[tuple[GeminiCliUpstream, ServedProxy]]:
    agent = GeminiCliUpstream("run_shell_command")
    server = ScriptedServer(agent)
    with server, serve_proxy("embedded", server.url, tmp_path, api_key=KEY) as proxy:
        yield agent, proxy


def send(proxy: ServedProxy, name: str) -> requests.Response:
    """The recorded request `name`, as Gemini CLI sent it but with this proxy's key."""
    request = recorded(name)
    headers = {k: v for k, v in request["headers"].items() if k.lower() not in DROPPED_HEADERS}
    headers["x-goog-api-key"] = KEY
    return requests.post(
        proxy.url + request["path"], json=request["body"], headers=headers, timeout=30
    )


def schema_types(schema: Any) -> set[str]:
    """Every ``type`` named anywhere in a schema."""
    if isinstance(schema, dict):
        found = {schema["type"]} if isinstance(schema.get("type"), str) else set()
        return found.union(*(schema_types(value) for value in schema.values()))
    if isinstance(schema, list):
        return set().union(*(schema_types(value) for value in schema))
    return set()


def test_the_routing_classifier_gets_its_json(replay):
    agent, proxy = replay
    answer = send(proxy, "classifier")
    assert answer.status_code == 200, answer.text
    [candidate] = answer.json()["candidates"]
    assert json.loads(candidate["content"]["parts"][0]["text"]) == CLASSIFIER_ANSWER
    [sent] = agent.classifier_requests
    assert sent["model"] == "gemini-3.5-flash-lite" and "tools" not in sent
    schema = sent["response_format"]["json_schema"]["schema"]
    assert set(schema["properties"]) == set(CLASSIFIER_ANSWER)
    # Gemini CLI writes OpenAPI's "OBJECT"/"STRING"/"INTEGER" inside responseJsonSchema;
    # llama-server refuses those ("unrecognized type OBJECT"), so JSON Schema's must go.
    assert schema_types(schema) <= JSON_SCHEMA_TYPES, schema


def test_the_first_turn_reaches_the_upstream_whole(replay):
    agent, proxy = replay
    answer = send(proxy, "default")
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"].startswith("text/event-stream")
    [sent] = agent.chat_requests
    assert sent["model"] == "gemini-3.8-flash" and sent["stream"] is True
    names = [tool["function"]["name"] for tool in sent["tools"]]
    assert len(names) == 15 and {"write_file", "run_shell_command"} <= set(names)
    roles = [message["role"] for message in sent["messages"]]
    assert roles == ["system", "user"], roles
    user = json.dumps(sent["messages"][1]["content"])
    assert "<session_context>" in user and "Write hi to out.txt." in user
    assert sent["reasoning_effort"] == "high"  # thinkingLevel HIGH
    assert (sent["temperature"], sent["top_p"]) == (1, 0.95)


def test_the_tool_result_turn_answers_the_call(replay):
    agent, proxy = replay
    answer = send(proxy, "local_model_tool_result")
    assert answer.status_code == 200, answer.text
    [sent] = agent.chat_requests
    assert sent["model"] == "qwen3-coder-local"
    [calling] = [m for m in sent["messages"] if m.get("tool_calls")]
    [result] = [m for m in sent["messages"] if m["role"] == "tool"]
    [call] = calling["tool_calls"]
    assert call["id"] == result["tool_call_id"] == "call_agent_1"
    assert call["function"]["name"] == "run_shell_command"
    assert json.loads(call["function"]["arguments"])["command"].startswith("echo hi > out.txt")
    # The CLI wraps the tool's text as {"output": ...}: the upstream gets the text itself.
    assert result["content"].startswith("<untrusted_context>\nOutput: MARK-42")
    # The recorded thoughtSignature is Gemini's own: an OpenAI upstream never sees it.
    assert "thoughtSignature" not in json.dumps(sent) and "c2ln" not in json.dumps(sent)
    assert sent["messages"][-1] == result  # the upstream answers the result next
