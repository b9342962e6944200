"""Talk to Claude: a tool call (its thinking block goes back), then a streamed answer.

python examples/anthropic_chat.py                                   # embedded server
LLMCHAT_API_URL=https://api.anthropic.com/v1 ANTHROPIC_API_KEY=sk-ant-... \
    LLMCHAT_MODEL=claude-sonnet-4-5 python examples/anthropic_chat.py  # the real API
LLMCHAT_API_URL=http://127.0.0.1:8080/v1 python examples/anthropic_chat.py  # llama-server

Only $LLMCHAT_API_URL switches away from the embedded server, so a key in the
environment alone never sends this example to the paid API.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator

from llmchat import Settings
from llmchat.backends.anthropic import Anthropic
from llmchat.messages import MessageLike
from llmchat.testing import RecordedRequest, Reply, ScriptedServer

WEATHER = {
    "type": "function",
    "function": {
        "name": "weather",
        "description": "Current temperature in a city, in Celsius",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}
THINKING = {"type": "thinking", "thinking": "I should ask the tool.", "signature": "c2ln"}


def event(kind: str, **fields: object) -> str:
    return f"event: {kind}\ndata: {json.dumps({'type': kind, **fields})}\n\n"


def loopback(request: RecordedRequest) -> Reply:
    """Answer like the Messages API: a thinking block and a tool_use, then a streamed answer."""
    body = request.json() or {}
    last = body["messages"][-1]["content"]
    usage = {"input_tokens": 20, "output_tokens": 9}
    if not isinstance(last, list) or last[0].get("type") != "tool_result":
        call = {"type": "tool_use", "id": "toolu_1", "name": "weather", "input": {"city": "Paris"}}
        message = {"id": "msg_1", "type": "message", "role": "assistant", "model": "loopback"}
        message |= {"content": [THINKING, call], "stop_reason": "tool_use", "usage": usage}
        return Reply.json(message)
    # The thinking block must come back first in the assistant turn (Anthropic requires it).
    assert body["messages"][-2]["content"][0] == THINKING
    head = {"id": "msg_2", "type": "message", "role": "assistant", "model": "loopback"}
    frames = [
        event("message_start", message={**head, "content": [], "usage": {"input_tokens": 40}}),
        event("content_block_start", index=0, content_block={"type": "text", "text": ""}),
        *(
            event("content_block_delta", index=0, delta={"type": "text_delta", "text": piece})
            for piece in ("It is 18°C ", "in Paris.")
        ),
        event("content_block_stop", index=0),
        event("message_delta", delta={"stop_reason": "end_turn"}, usage={"output_tokens": 8}),
        event("message_stop"),
    ]
    return Reply.sse(frames, done=False)  # message_stop is the end; there is no [DONE]


@contextlib.contextmanager
def api_url() -> Iterator[str]:
    """$LLMCHAT_API_URL, else the embedded server."""
    configured = os.environ.get("LLMCHAT_API_URL")
    if configured:
        yield configured
        return
    with ScriptedServer(loopback) as url:
        yield url


with api_url() as url:
    backend = Anthropic(
        url,
        model=os.environ.get("LLMCHAT_MODEL", "claude-sonnet-4-5"),
        settings=Settings(max_tokens=2048, reasoning_budget_tokens=1024),
    )
    messages: list[MessageLike] = [{"role": "user", "content": "How warm is it in Paris?"}]
    first = backend.chat_completion(messages, tools=[WEATHER])
    if not first.is_success:
        raise SystemExit(f"failed ({first.error_class}): {first.err}")
    messages.append(first.to_message())  # content, tool_use, and the signed thinking block
    for call in first.tool_calls:
        print(f"tool call: {call.name}({call.arguments})")
        messages.append({"role": "tool", "tool_call_id": call.id, "content": "18"})
    with backend.chat_completion_stream(messages, tools=[WEATHER]) as response:
        for text in response.iter_text():
            print(text, end="", flush=True)
    print()
    print(
        f"[{response.finish_reason} ({response.provider_finish_reason}); "
        f"{response.prompt_tokens} prompt tokens, {response.completion_tokens} generated]"
    )
    backend.close()
