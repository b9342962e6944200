"""Talk to Gemini: a tool call (its thought signature goes back), then a streamed answer.

python examples/gemini_chat.py                              # embedded Gemini-like server
GEMINI_API_KEY=... python examples/gemini_chat.py           # the real Gemini API
LLMCHAT_API_URL=http://127.0.0.1:9000/v1beta python examples/gemini_chat.py
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator

from llmchat import Settings
from llmchat.backends.gemini import DEFAULT_API_URL, Gemini
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


def loopback(request: RecordedRequest) -> Reply:
    """Answer like Gemini: a signed functionCall first, then a streamed thought and answer."""
    body = request.json() or {}
    answered = any("functionResponse" in p for c in body["contents"] for p in c["parts"])
    usage = {"promptTokenCount": 20, "candidatesTokenCount": 8, "thoughtsTokenCount": 12}
    if not answered:
        call = {"functionCall": {"name": "weather", "args": {"city": "Paris"}}}
        part = {**call, "thoughtSignature": "c2lnbmF0dXJl"}
        candidate = {"content": {"role": "model", "parts": [part]}, "finishReason": "STOP"}
        return Reply.json({"candidates": [candidate], "usageMetadata": usage})
    pieces = [
        {"text": "The tool says 18.", "thought": True},
        {"text": "It is 18°C "},
        {"text": "in Paris."},
    ]
    events = [{"candidates": [{"content": {"role": "model", "parts": [p]}}]} for p in pieces]
    events[-1]["candidates"][0]["finishReason"] = "STOP"
    events[-1]["usageMetadata"] = usage
    return Reply.sse(events, done=False)  # Gemini sends no [DONE]: the finish is the end


@contextlib.contextmanager
def api_url() -> Iterator[str]:
    """$LLMCHAT_API_URL, else Gemini itself when a key is set, else the embedded server."""
    configured = os.environ.get("LLMCHAT_API_URL")
    if configured or os.environ.get("GEMINI_API_KEY") or os.environ.get("GOOGLE_API_KEY"):
        yield configured or DEFAULT_API_URL
        return
    with ScriptedServer(loopback) as url:
        yield url


with api_url() as url:
    backend = Gemini(
        url,
        model=os.environ.get("LLMCHAT_MODEL", "gemini-2.5-flash"),
        settings=Settings(max_tokens=512, reasoning_budget_tokens=256),
    )
    conversation = [{"role": "user", "content": "How warm is it in Paris right now?"}]
    first = backend.chat_completion(conversation, tools=[WEATHER], tool_choice="auto")
    if not first.is_success:
        raise SystemExit(f"failed ({first.error_class}): {first.err}")
    conversation.append(first.to_message().to_dict())  # the call and its thought signature
    for call in first.tool_calls:
        print(f"tool call: {call.name}({json.dumps(call.arguments)})")
        result = {"celsius": 18} if call.name == "weather" else {"error": "unknown tool"}
        conversation.append(
            {"role": "tool", "tool_call_id": call.id, "content": json.dumps(result)}
        )

    with backend.chat_completion_stream(conversation, tools=[WEATHER]) as response:
        for chunk in response:
            print(chunk.content, end="", flush=True)
    print()
    if response.is_success:
        print(f"thinking: {response.reasoning_text!r}")
        print(f"[{response.finish_reason}; {response.completion_tokens} completion tokens]")
    else:
        print(f"failed ({response.error_class}): {response.err}")
    backend.close()
