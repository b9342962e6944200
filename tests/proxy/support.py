"""What the proxy's end-to-end tests share: the scripted upstream's replies, the real
clients (closed after each test by conftest's autouse fixture), the tools.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from llmchat.testing import Drop, Reply, ScriptedServer, Write

from ..support.chat_frames import WEATHER
from ..support.chat_frames import chunk as _chunk
from ..support.chat_frames import usage_chunk as _usage

TEXT = "Hello from the loopback server, twice as long as a chunk."
WAIT = 10.0


def tool_stream() -> Reply:
    """Two tool calls, arguments in fragments, then `tool_calls` and a usage frame."""
    return Reply.sse(
        [
            _chunk({"role": "assistant", "content": None}),
            _chunk(
                {
                    "tool_calls": [
                        {
                            "index": 0,
                            "id": "call_a",
                            "type": "function",
                            "function": {"name": "get_weather", "arguments": '{"city"'},
                        }
                    ]
                }
            ),
            _chunk({"tool_calls": [{"index": 0, "function": {"arguments": ': "Oslo"}'}}]}),
            _chunk(
                {
                    "tool_calls": [
                        {
                            "index": 1,
                            "id": "call_b",
                            "type": "function",
                            "function": {"name": "get_time", "arguments": '{"tz": "CET"}'},
                        }
                    ]
                }
            ),
            _chunk({}, "tool_calls"),
            _usage(12, 7),
        ]
    )


def _frame(event: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(event).encode() + b"\n\n"


def cut_stream() -> Reply:
    """Some text, then the connection drops: no finish reason, no [DONE]."""
    return Reply(
        200,
        {"Content-Type": "text/event-stream"},
        framing="close",
        steps=[
            Write(_frame(_chunk({"content": "partial "}))),
            Drop(),
        ],
    )


TOOLS_OPENAI = [WEATHER]
TOOLS_ANTHROPIC = [
    {
        "name": "get_weather",
        "description": "Weather for a city",
        "input_schema": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    }
]

# Every client a test makes, closed after it by conftest's autouse `_close_clients`.
CLIENTS: list[Any] = []


def ollama_client(url: str, **kwargs: Any) -> Any:
    ollama = pytest.importorskip("ollama")
    client = ollama.Client(host=url, timeout=WAIT, **kwargs)
    CLIENTS.append(client)
    return client


def anthropic_client(url: str, key: str = "unused") -> Any:
    anthropic = pytest.importorskip("anthropic")
    client = anthropic.Anthropic(base_url=url, api_key=key, max_retries=0, timeout=WAIT)
    CLIENTS.append(client)
    return client


def last_chat_request(server: ScriptedServer) -> dict[str, Any]:
    posts = [r for r in server.requests if r.path.endswith("/chat/completions")]
    return posts[-1].json()


def reasoning_stream() -> Reply:
    return Reply.sse(
        [
            _chunk({"role": "assistant", "reasoning_content": "Let me think. "}),
            _chunk({"content": "Answer."}),
            _chunk({}, "stop"),
            _usage(3, 4),
        ]
    )
