"""The Anthropic face's liberal rule, against the request shapes Claude Code sends today.

Each case starts from Claude Code 2.1.332's first request on its defaults
(tests/fixtures/agents/, recorded whole: the ``?beta=true`` path, the full
``anthropic-beta`` list, mid-conversation system turn, adaptive thinking,
``context_management``, ``output_config``, billing header, cache_control),
changes it the way a later turn or a newer Claude Code does, and sends it
through the real proxy to a loopback upstream. Every shape must get a 200
and a whole stream; the test then reads what reached the upstream: folded
text in place, reasoning on its turn, dropped parts absent and named by one
DEBUG line each.
"""

from __future__ import annotations

import copy
import http.client
import json
import logging
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from llmchat.backends.openai_common import OpenAICommon
from llmchat.testing import ChatResponder, ScriptedServer

from ...support.agent_upstream import AgentUpstream
from ...support.paths import FIXTURES_DIR
from ...support.proxy import running_proxy

RECORDED = json.loads((FIXTURES_DIR / "agents/claude_code_2.1.332_default.json").read_text())
SENT_HEADERS = {
    name: value
    for name, value in RECORDED["headers"].items()
    if name not in ("Connection", "Accept-Encoding")
}

Body = dict[str, Any]
Sent = dict[str, Any]


def recorded_body() -> Body:
    return copy.deepcopy(RECORDED["body"])


def _turns(*turns: dict[str, Any]) -> Callable[[Body], None]:
    """A change that appends `turns` to the conversation (after the recorded two)."""

    def change(body: Body) -> None:
        body["messages"].extend(copy.deepcopy(list(turns)))

    return change


TOOL_CALL = {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": "ls"}}
TOOL_RESULT = {"type": "tool_result", "tool_use_id": "toolu_1", "content": "a.txt"}
THINKING = {"type": "thinking", "thinking": "List the files first.", "signature": "EqQBsig"}
REDACTED = {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix/LafPsn4"}


def _messages(sent: Sent) -> list[dict[str, Any]]:
    return list(sent["messages"])


def _all_text(sent: Sent) -> str:
    return json.dumps(sent["messages"])


def check_recorded(sent: Sent) -> None:
    messages = _messages(sent)
    assert [m["role"] for m in messages] == ["system", "user"]
    assert messages[0]["content"].startswith("x-anthropic-billing-header:")
    texts = [part["text"] for part in messages[1]["content"]]
    # The recorded system turn sits where it was, after the user's text, as user-side text.
    assert texts[1] == "write hi to a file"
    assert texts[2].startswith("[System message]\n# Environment")
    assert len(sent["tools"]) == 12 and sent["reasoning_effort"] == "medium"
    assert "metadata" not in sent and "context_management" not in sent
    assert "cache_control" not in json.dumps(sent)


def check_mid_system(sent: Sent) -> None:
    messages = _messages(sent)
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "user"]
    assert messages[3]["content"] == "[System message]\nThe plan changed.\n\ncontinue"


def check_thinking(sent: Sent) -> None:
    [turn] = [m for m in _messages(sent) if m["role"] == "assistant"]
    assert turn["reasoning_content"] == "List the files first."
    assert turn["content"] == "Listing." and turn["tool_calls"][0]["id"] == "toolu_1"
    assert "EmwKAhgB" not in _all_text(sent) and "EqQBsig" not in _all_text(sent)


def check_server_tools(sent: Sent) -> None:
    [turn] = [m for m in _messages(sent) if m["role"] == "assistant"]
    assert turn["content"] == "Docs <https://example.com/docs>Found it."
    assert "server_tool_use" not in _all_text(sent) and "srvtoolu_1" not in _all_text(sent)


def check_documents(sent: Sent) -> None:
    # One user turn with the recorded one before it, as Anthropic's API joins them.
    [user] = [m for m in _messages(sent) if m["role"] == "user"]
    assert [part["text"] for part in user["content"][-3:]] == [
        "Notes\nThe sky is blue.",
        "Result\nhttps://kb/1\nGrass is green.",
        "summarize",
    ]


def check_compaction(sent: Sent) -> None:
    [turn] = [m for m in _messages(sent) if m["role"] == "assistant"]
    assert turn["content"] == "Earlier: the user asked for files.Continuing."


def check_server_tools_in_tools(sent: Sent) -> None:
    names = [tool["function"]["name"] for tool in sent["tools"]]
    assert len(names) == 12 and "web_search" not in names and "code_execution" not in names


def check_format(sent: Sent) -> None:
    schema = sent["response_format"]["json_schema"]["schema"]
    assert schema == {"type": "object", "properties": {"ok": {"type": "boolean"}}}


def check_choice(expected: Any) -> Callable[[Sent], None]:
    def check(sent: Sent) -> None:
        assert sent["tool_choice"] == expected

    return check


def check_unknown_block(sent: Sent) -> None:
    assert "future_block" not in _all_text(sent)
    assert _messages(sent)[-1]["content"] == "go on"


def _set(**fields: Any) -> Callable[[Body], None]:
    def change(body: Body) -> None:
        body.update(copy.deepcopy(fields))

    return change


def _add_server_tools(body: Body) -> None:
    body["tools"].extend(
        [
            {"type": "web_search_20250305", "name": "web_search", "max_uses": 5},
            {"type": "code_execution_20250825", "name": "code_execution"},
            {"type": "bash_20250124", "name": "bash"},
            {"type": "text_editor_20250728", "name": "str_replace_based_edit_tool"},
        ]
    )


CASES: list[Any] = [
    pytest.param(None, check_recorded, [], id="recorded"),
    pytest.param(
        _turns(
            {"role": "assistant", "content": [{"type": "text", "text": "On it."}]},
            {"role": "system", "content": "The plan changed."},
            {"role": "user", "content": "continue"},
        ),
        check_mid_system,
        [],
        id="mid-conversation-system",
    ),
    pytest.param(
        _turns(
            {
                "role": "assistant",
                "content": [THINKING, REDACTED, {"type": "text", "text": "Listing."}, TOOL_CALL],
            },
            {"role": "user", "content": [TOOL_RESULT]},
        ),
        check_thinking,
        ["messages[2].content[1] (redacted_thinking) dropped"],
        id="thinking-and-redacted-thinking",
    ),
    pytest.param(
        _turns(
            {
                "role": "assistant",
                "content": [
                    {
                        "type": "server_tool_use",
                        "id": "srvtoolu_1",
                        "name": "web_search",
                        "input": {"query": "docs"},
                    },
                    {
                        "type": "web_search_tool_result",
                        "tool_use_id": "srvtoolu_1",
                        "content": [
                            {
                                "type": "web_search_result",
                                "url": "https://example.com/docs",
                                "title": "Docs",
                                "encrypted_content": "EqgfCioIARgB",
                            }
                        ],
                    },
                    {"type": "text", "text": "Found it."},
                ],
            },
            {"role": "user", "content": "thanks"},
        ),
        check_server_tools,
        ["messages[2].content[0] (server_tool_use) dropped"],
        id="server-tool-use-and-result",
    ),
    pytest.param(
        _turns(
            {
                "role": "user",
                "content": [
                    {
                        "type": "document",
                        "title": "Notes",
                        "source": {
                            "type": "text",
                            "media_type": "text/plain",
                            "data": "The sky is blue.",
                        },
                        "citations": {"enabled": True},
                    },
                    {
                        "type": "search_result",
                        "title": "Result",
                        "source": "https://kb/1",
                        "content": [{"type": "text", "text": "Grass is green."}],
                    },
                    {"type": "text", "text": "summarize"},
                ],
            }
        ),
        check_documents,
        [],
        id="document-and-search-result",
    ),
    pytest.param(
        _turns(
            {
                "role": "assistant",
                "content": [
                    {"type": "compaction", "content": "Earlier: the user asked for files."},
                    {"type": "text", "text": "Continuing."},
                ],
            },
            {"role": "user", "content": "go on"},
        ),
        check_compaction,
        [],
        id="compaction",
    ),
    pytest.param(
        _add_server_tools,
        check_server_tools_in_tools,
        [
            "tools[12] (web_search_20250305) dropped",
            "tools[13] (code_execution_20250825) dropped",
            "tools[14] (bash_20250124) dropped",
            "tools[15] (text_editor_20250728) dropped",
        ],
        id="server-tools-in-tools",
    ),
    pytest.param(
        _set(
            output_config={
                "effort": "xhigh",
                "format": {
                    "type": "json_schema",
                    "schema": {"type": "object", "properties": {"ok": {"type": "boolean"}}},
                },
            }
        ),
        check_format,
        [],
        id="output-config-format",
    ),
    pytest.param(_set(tool_choice={"type": "any"}), check_choice("required"), [], id="choice-any"),
    pytest.param(_set(tool_choice={"type": "none"}), check_choice("none"), [], id="choice-none"),
    pytest.param(
        _set(tool_choice={"type": "tool", "name": "Bash", "disable_parallel_tool_use": True}),
        check_choice({"type": "function", "function": {"name": "Bash"}}),
        [],
        id="choice-tool",
    ),
    pytest.param(
        _turns(
            {"role": "assistant", "content": "ok"},
            {
                "role": "user",
                "content": [
                    {"type": "future_block_2027", "payload": {"x": 1}},
                    {"type": "text", "text": "go on"},
                ],
            },
        ),
        check_unknown_block,
        ["messages[3].content[0] (future_block_2027) dropped"],
        id="unknown-block-type",
    ),
    pytest.param(
        _set(
            speed="fast",
            container={"id": "c1"},
            mcp_servers=[{"type": "url", "url": "https://mcp"}],
            thinking={"type": "adaptive", "display": "summarized"},
        ),
        lambda sent: None,
        ["speed dropped", "container dropped", "mcp_servers dropped"],
        id="unknown-top-level-fields",
    ),
]


@pytest.fixture
def upstream() -> Iterator[ScriptedServer]:
    server = ScriptedServer(ChatResponder("Done.", chunk_size=3)).start()
    yield server
    server.stop()


def post(url: str, body: Body) -> tuple[int, bytes]:
    """The recorded request (path, headers) with `body`; the status and whole answer."""
    host, port = url.removeprefix("http://").split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=10)
    try:
        connection.request(
            RECORDED["method"], RECORDED["path"], json.dumps(body).encode(), SENT_HEADERS
        )
        answer = connection.getresponse()
        return answer.status, answer.read()
    finally:
        connection.close()


@pytest.mark.parametrize(("change", "check", "debug_lines"), CASES)
def test_claude_code_shapes_are_served(
    upstream: ScriptedServer,
    caplog: pytest.LogCaptureFixture,
    change: Callable[[Body], None] | None,
    check: Callable[[Sent], None],
    debug_lines: list[str],
) -> None:
    body = recorded_body()
    if change is not None:
        change(body)
    caplog.set_level(logging.DEBUG, logger="llmchat.proxy")
    with OpenAICommon(upstream.url) as backend, running_proxy(backend) as url:
        status, answer = post(url, body)
    assert status == 200, answer[:500]
    assert answer.rstrip().endswith(b'data: {"type":"message_stop"}'), answer[-300:]
    [sent] = [r.json() for r in upstream.requests if r.path.endswith("/chat/completions")]
    assert isinstance(sent, dict)
    check(sent)
    logged = [r.getMessage() for r in caplog.records if r.name == "llmchat.proxy"]
    for line in [*debug_lines, "metadata dropped", "context_management dropped"]:
        assert logged.count(line) == 1, (line, logged)
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING], logged


@pytest.mark.parametrize("stream", [False, True], ids=["blocking", "streamed"])
def test_cached_prompt_tokens_are_cache_reads(stream: bool) -> None:
    """The recorded request over an upstream that reports cached prompt tokens: the
    final usage splits them out as Anthropic does (streamed, in the message_delta)."""
    usage: dict[str, Any] = {"prompt_tokens": 900, "completion_tokens": 12}
    usage["prompt_tokens_details"] = {"cached_tokens": 640}
    script = AgentUpstream(["Bash"], lambda tool: {"command": "true"}, usage=usage)
    server = ScriptedServer(script).start()
    try:
        with OpenAICommon(server.url) as backend, running_proxy(backend) as url:
            status, answer = post(url, {**recorded_body(), "stream": stream})
    finally:
        server.stop()
    assert status == 200, answer[:500]
    if stream:
        events = [json.loads(line[6:]) for line in answer.splitlines() if line[:6] == b"data: "]
        [final] = [e for e in events if e["type"] == "message_delta"]
        counted = final["usage"]
    else:
        counted = json.loads(answer)["usage"]
    assert counted == {
        "input_tokens": 260,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 640,
        "output_tokens": 12,
    }
