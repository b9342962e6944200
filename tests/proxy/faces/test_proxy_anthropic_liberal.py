"""The Anthropic face's liberal rule, unit by unit: what is folded, dropped, or a 400."""

from __future__ import annotations

import base64
import logging
from typing import Any

import pytest

from llmchat.errors import InvalidArgumentError
from llmchat.protocols.anthropic import anthropic_usage
from llmchat.proxy.faces.anthropic.translate import messages_request

PNG_B64 = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\x00" * 8).decode()
IMAGE = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG_B64}}
IMAGE_URL = {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG_B64}"}}


def sent(*messages: dict[str, Any], **fields: Any) -> list[dict[str, Any]]:
    body = {"model": "m", "max_tokens": 8, "messages": list(messages), **fields}
    out: list[dict[str, Any]] = messages_request(body)["messages"]
    return out


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


def test_a_system_turn_folds_in_place_and_user_turns_join() -> None:
    assert sent(
        {"role": "user", "content": "a"},
        {"role": "system", "content": [text("b"), text("c")]},
        {"role": "user", "content": "d"},
        {"role": "assistant", "content": "e"},
        {"role": "system", "content": "f"},
        system="top",
    ) == [
        {"role": "system", "content": "top"},
        {"role": "user", "content": "a\n\n[System message]\nb\nc\n\nd"},
        {"role": "assistant", "content": "e"},
        {"role": "user", "content": "[System message]\nf"},
    ]


def test_a_system_turn_first_joins_the_system_prompt() -> None:
    assert sent({"role": "system", "content": "b"}, {"role": "user", "content": "u"}) == [
        {"role": "system", "content": "b"},
        {"role": "user", "content": "u"},
    ]


def test_a_system_turn_next_to_parts_becomes_a_part() -> None:
    assert sent(
        {"role": "user", "content": [text("look"), IMAGE]}, {"role": "system", "content": "s"}
    ) == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "look"},
                IMAGE_URL,
                {"type": "text", "text": "[System message]\ns"},
            ],
        }
    ]


def test_a_tool_results_images_follow_the_results() -> None:
    result = {"type": "tool_result", "tool_use_id": "t1", "content": [text("a picture"), IMAGE]}
    assert sent(
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "Read"}]},
        {"role": "user", "content": [result]},
    )[1:] == [
        {"role": "tool", "tool_call_id": "t1", "content": "a picture"},
        {"role": "user", "content": [IMAGE_URL]},
    ]


def test_thinking_only_turns_and_empty_thinking_are_dropped_with_a_debug_line(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="llmchat.proxy")
    out = sent(
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": [{"type": "thinking", "thinking": "hm", "signature": ""}]},
        {"role": "user", "content": "again"},
        {
            "role": "assistant",
            "content": [{"type": "thinking", "thinking": "", "signature": "s"}, text("ok")],
        },
    )
    assert out == [
        {"role": "user", "content": "q\n\nagain"},
        {"role": "assistant", "content": "ok"},
    ]
    assert [r.getMessage() for r in caplog.records] == [
        "messages[1] (assistant turn with thinking only) dropped",
        "messages[3].content[0] (thinking without text) dropped",
    ]


@pytest.mark.parametrize(
    ("block", "folded"),
    [
        ({"type": "compaction", "content": "summary"}, "summary"),
        (
            {
                "type": "code_execution_tool_result",
                "tool_use_id": "s",
                "content": {"type": "code_execution_result", "stdout": "42\n", "stderr": ""},
            },
            "42\n",
        ),
        ({"type": "document", "source": {"type": "content", "content": [text("x")]}}, "x"),
        ({"type": "document", "title": "T", "source": {"type": "text", "data": "x"}}, "T\nx"),
    ],
)
def test_blocks_with_text_are_folded(block: dict[str, Any], folded: str) -> None:
    assert sent({"role": "user", "content": [block]}) == [{"role": "user", "content": folded}]


@pytest.mark.parametrize(
    "block",
    [
        {"type": "container_upload", "file_id": "file_1"},
        {"type": "redacted_thinking", "data": "EmwK"},
        {"type": "mcp_tool_use", "id": "m", "name": "x", "server_name": "s", "input": {}},
        {"type": "web_fetch_tool_result", "tool_use_id": "s", "content": {"type": "x"}},
    ],
)
def test_blocks_without_text_are_dropped(
    block: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="llmchat.proxy")
    assert sent({"role": "user", "content": [block, text("go")]}) == [
        {"role": "user", "content": "go"}
    ]
    assert [r.getMessage() for r in caplog.records] == [
        f"messages[0].content[0] ({block['type']}) dropped"
    ]


@pytest.mark.parametrize(
    ("source", "message"),
    [
        (
            {"type": "base64", "media_type": "application/pdf", "data": "JVBERi0="},
            "messages.0.content.1.document.source: 'base64' documents are not supported",
        ),
        (
            {"type": "file", "file_id": "file_1"},
            "messages.0.content.1.document.source: 'file' documents are not supported",
        ),
    ],
)
def test_a_document_the_upstream_cannot_read_is_a_400_claude_code_recovers_from(
    source: dict[str, Any], message: str
) -> None:
    document = {"type": "document", "source": source}
    with pytest.raises(InvalidArgumentError) as info:
        sent({"role": "user", "content": [text("read"), document]})
    assert str(info.value).startswith(message)
    assert "does not support PDF input" in str(info.value)


def test_an_unknown_role_is_anthropics_wording() -> None:
    with pytest.raises(InvalidArgumentError) as info:
        sent({"role": "developer", "content": "x"})
    # Claude Code retries without its system turns on "Unexpected role" + "input message role".
    assert "Unexpected role 'developer'" in str(info.value)
    assert "input message role" in str(info.value)


@pytest.mark.parametrize(
    ("prompt", "cached", "output", "usage"),
    [
        (900, 640, 12, (260, 640, 12)),
        (10, None, None, (10, 0, 0)),
        (10, 50, 3, (0, 10, 3)),  # a server that counts more cached than prompt tokens
    ],
)
def test_anthropic_usage(
    prompt: int, cached: int | None, output: int | None, usage: tuple[int, int, int]
) -> None:
    assert anthropic_usage(prompt, cached, output) == {
        "input_tokens": usage[0],
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": usage[1],
        "output_tokens": usage[2],
    }


@pytest.mark.parametrize(
    "choice",
    [{"type": "tool", "name": "web_search"}, {"type": "any"}],
    ids=["a-dropped-tool", "any-with-no-tools-left"],
)
def test_a_choice_of_a_dropped_server_tool_is_dropped(
    choice: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="llmchat.proxy")
    body = {
        "model": "m",
        "max_tokens": 8,
        "messages": [{"role": "user", "content": "search"}],
        "tools": [{"type": "web_search_20250305", "name": "web_search"}],
        "tool_choice": choice,
    }
    out = messages_request(body)
    assert "tools" not in out and "tool_choice" not in out
    logged = [r.getMessage() for r in caplog.records]
    assert logged[0] == "tools[0] (web_search_20250305) dropped"
    assert len(logged) == 2 and logged[1].startswith("tool_choice (")
