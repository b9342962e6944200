"""The Vercel AI SDK's Responses provider (``@ai-sdk/openai``) through the Responses face.

The SDK shows reasoning only from ``summary`` parts, and sends
``reasoning.summary`` only for a model it takes to be a reasoning model (a
local name needs ``forceReasoning``); the face then sends the upstream's
reasoning as summary parts. Unless ``store: false`` is set, the SDK replays
earlier output as ``item_reference``s alone: the face resolves the ones it
sent, so a multi-turn chat gets a 200 and the whole history upstream.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from llmchat.testing import RecordedRequest, Reply

from ..support.chat_frames import chunk, usage_chunk
from ..support.proxy import proxy_over
from .support import node_json, package_dir

THOUGHT = "The user says hi; greet back."
TEXT = "Hello there."


class ThinkingUpstream:
    """Answers every chat request with `THOUGHT` as reasoning, then `TEXT`; keeps the bodies."""

    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []
        self._lock = threading.Lock()

    def __call__(self, request: RecordedRequest) -> Reply:
        body = request.json()
        assert isinstance(body, dict)
        with self._lock:
            self.bodies.append(body)
        if not body.get("stream"):
            message = {"role": "assistant", "content": TEXT, "reasoning_content": THOUGHT}
            whole = {**usage_chunk(9, 5), "object": "chat.completion"}
            whole["choices"] = [{"index": 0, "message": message, "finish_reason": "stop"}]
            return Reply.json(whole)
        return Reply.sse(
            [
                chunk({"role": "assistant", "content": None}),
                chunk({"reasoning_content": THOUGHT}),
                chunk({"content": TEXT}),
                chunk({}, "stop"),
                usage_chunk(9, 5),
            ]
        )


@pytest.fixture
def served() -> Iterator[tuple[str, ThinkingUpstream]]:
    package_dir("ai")
    package_dir("@ai-sdk/openai")
    upstream = ThinkingUpstream()
    with proxy_over(upstream) as (url, _):
        yield url, upstream


SCRIPT = """
import { createOpenAI } from '@ai-sdk/openai';
import { generateText, streamText } from 'ai';

const openai = createOpenAI({ baseURL: process.env.BASE_URL, apiKey: 'unused' });
const model = openai.responses(process.env.MODEL);
const providerOptions = { openai: JSON.parse(process.env.OPTIONS) };
const out = {};

const first = await generateText({ model, prompt: 'hi', providerOptions });
out.text = first.text;
out.reasoning = first.reasoningText ?? null;

const streamed = streamText({ model, prompt: 'hi', providerOptions });
let reasoning = '', text = '';
for await (const part of streamed.fullStream) {
  if (part.type === 'reasoning-delta') reasoning += part.text;
  if (part.type === 'text-delta') text += part.text;
  if (part.type === 'error') throw part.error;
}
out.streamReasoning = reasoning;
out.streamText = text;

// A second turn with the first's messages, as a chat UI sends it.
const messages = [{ role: 'user', content: 'hi' }, ...first.response.messages,
                  { role: 'user', content: 'and again' }];
const second = await generateText({ model, messages, providerOptions });
out.second = second.text;
console.log(JSON.stringify(out));
"""


@pytest.mark.parametrize(
    ("model", "options"),
    [
        ("gpt-5", {"reasoningSummary": "auto"}),  # a name the SDK knows to reason
        ("qwen3-local", {"reasoningSummary": "auto", "forceReasoning": True}),
        ("qwen3-local", {"reasoningSummary": "auto", "forceReasoning": True, "store": False}),
    ],
)
def test_ai_sdk_shows_reasoning_and_replays_history(served, model, options):
    url, upstream = served
    env = {"BASE_URL": url + "/v1", "MODEL": model, "OPTIONS": json.dumps(options)}
    out = node_json(SCRIPT, env)
    assert out == {
        "text": TEXT,
        "reasoning": THOUGHT,
        "streamReasoning": THOUGHT,
        "streamText": TEXT,
        "second": TEXT,
    }
    last = upstream.bodies[-1]["messages"]
    assert [m["role"] for m in last] == ["user", "assistant", "user"]
    assert last[1]["content"] == TEXT
    assert last[1].get("reasoning_content") == THOUGHT
    assert last[2]["content"] == "and again"
