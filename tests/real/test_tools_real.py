"""Tool calls from a real llama-server whose grammar constrains `tool_choice: "required"`.

The random model never writes a tool call by itself; under the Command R+ template
(`tools_server`, see conftest) the server's grammar makes it write exactly one. What
only a real server proves: that llmchat's OpenAI dialect reads the server's own tool-call
shapes, blocking and streamed in fragments, into whole `ToolCall`s that agree.
"""

from __future__ import annotations

import json
from typing import Any

import requests

from llmchat import OpenAICommon, Settings, ToolCall

from ..support.chat_frames import WEATHER
from .conftest import LlamaServer

ASK = [{"role": "user", "content": "Weather in Paris?"}]
# One call takes ~47 tokens here; without `parallel_tool_calls: false` the grammar lets the
# model go on into a second call and the answer ends at the limit instead.
SETTINGS = Settings(max_tokens=96, temperature=0, parallel_tool_calls=False)


def _direct(server: LlamaServer, **extra: Any) -> dict[str, Any]:
    body = {
        "messages": ASK,
        "tools": [WEATHER],
        "tool_choice": "required",
        "parallel_tool_calls": False,
        "max_tokens": 96,
        "temperature": 0,
        **extra,
    }
    response = requests.post(f"{server.url}/chat/completions", json=body, timeout=30)
    response.raise_for_status()
    return dict(response.json()["choices"][0])


def test_the_server_constrains_required_to_a_tool_call(tools_server: LlamaServer) -> None:
    """The premise of the tests below, seen on the wire without llmchat."""
    choice = _direct(tools_server)
    assert choice["finish_reason"] == "tool_calls"
    [call] = choice["message"]["tool_calls"]
    assert call["function"]["name"] == "get_weather"
    assert isinstance(json.loads(call["function"]["arguments"]), dict)


def test_openai_tool_call_blocking_and_streamed_agree(tools_server: LlamaServer) -> None:
    backend = OpenAICommon(tools_server.url, model="tiny", settings=SETTINGS)
    blocking = backend.chat_completion(ASK, tools=[WEATHER], tool_choice="required")
    streamed = backend.chat_completion_stream(ASK, tools=[WEATHER], tool_choice="required")
    streamed.wait(30)
    wire = _direct(tools_server)["message"]["tool_calls"][0]["function"]
    for response in (blocking, streamed):
        assert response.is_done and response.error_class is None, response.err
        assert response.finish_reason == "tool_calls"
        [call] = response.tool_calls
        assert isinstance(call, ToolCall) and call.name == "get_weather" and call.id
        assert not call.arguments_undecodable
        assert call.arguments == json.loads(wire["arguments"]) and "city" in call.arguments
    assert [(c.name, c.arguments) for c in streamed.tool_calls] == [
        (c.name, c.arguments) for c in blocking.tool_calls
    ]
    assert streamed.completion_tokens == blocking.completion_tokens
    assert streamed.prompt_tokens == blocking.prompt_tokens
