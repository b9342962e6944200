"""Let the model call a weather tool until it can answer: chat → tool calls → results → chat.

python examples/tool_loop.py            # embedded loopback server playing the model
LLMCHAT_API_URL=http://127.0.0.1:8080/v1 python examples/tool_loop.py
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator
from typing import Any

from llmchat import OpenAICommon, Settings
from llmchat.testing import RecordedRequest, Reply, ScriptedServer
from llmchat.toolloop import ToolLoop
from llmchat.tools import ToolCall

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current temperature of a city, in °C.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}
TEMPERATURES = {"paris": 18, "oslo": 4}


def get_weather(call: ToolCall) -> Any:
    if call.name != "get_weather":
        raise ValueError(f"unknown tool {call.name!r}")
    city = str(call.arguments.get("city", ""))
    return {"city": city, "celsius": TEMPERATURES[city.lower()]}  # KeyError -> error result


def play_model(request: RecordedRequest) -> Reply:
    """The embedded 'model': asks for the weather, then answers from the tool result."""
    messages = request.json()["messages"]
    results = [m for m in messages if m["role"] == "tool"]
    if results:
        weather = json.loads(results[-1]["content"])
        message: dict[str, Any] = {
            "role": "assistant",
            "content": f"It is {weather['celsius']}°C in {weather['city']}.",
        }
        finish = "stop"
    else:
        call = {
            "id": "call_1",
            "type": "function",
            "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
        }
        message, finish = {"role": "assistant", "content": None, "tool_calls": [call]}, "tool_calls"
    choice = {"index": 0, "message": message, "finish_reason": finish}
    return Reply.json({"object": "chat.completion", "model": "loopback", "choices": [choice]})


@contextlib.contextmanager
def model_url() -> Iterator[str]:
    configured = os.environ.get("LLMCHAT_API_URL")
    if configured:
        yield configured
        return
    with ScriptedServer(play_model) as url:
        yield url


with model_url() as url:
    backend = OpenAICommon(
        url,
        api_key=os.environ.get("LLMCHAT_API_KEY"),
        model=os.environ.get("LLMCHAT_MODEL"),
        settings=Settings(max_tokens=128, temperature=0),
    )
    loop = ToolLoop(
        backend,
        [WEATHER_TOOL],
        get_weather,
        on_tool_call=lambda call: print(f"-> {call.name}({json.dumps(call.arguments)})"),
        on_tool_result=lambda call, result: print(f"<- {result}"),
        on_limit=lambda reason: print(f"limit reached: {reason}"),
    )
    response = loop.run(
        [
            {"role": "system", "content": "Use the tools. Answer in one sentence."},
            {"role": "user", "content": "How warm is it in Paris right now?"},
        ]
    )
    print("transcript:", " > ".join(m.role for m in loop.messages))
    backend.close()
    if response.is_success:
        print(f"final: {response.msg}")
    else:
        # Remote failures are states, not exceptions.
        print(f"failed ({response.error_class}): {response.err}")
