"""The Vercel AI SDK's Anthropic provider through a routed proxy, served by a Gemini 3 node.

``llmchat proxy --config`` (a subprocess) routes the glob ``claude-*`` to a
loopback Gemini server that signs its function calls and, like Gemini 3,
refuses a history whose calls are unsigned. The SDK (tests/js, pinned) runs a
tool round trip on its defaults, whole and streamed: it calls the tool itself
and sends the result back through the Anthropic face, with a client key of
the config whose policy allows ``claude-*``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from llmchat.testing import ScriptedServer

from ..support.agent_upstream import tool_results
from .dialect_agents import GeminiAgent
from .routed_proxy import routed_proxy
from .support import node_json, package_dir

KEY = "sk-ai-sdk-client-0123"
TOOL_RESULT = "rain in Oslo"
FINAL = "It rains in Oslo."

SCRIPT = """
import { createAnthropic } from '@ai-sdk/anthropic';
import { generateText, streamText, tool, jsonSchema, stepCountIs } from 'ai';

const anthropic = createAnthropic({ baseURL: process.env.BASE_URL, apiKey: process.env.KEY });
const weather = tool({
  description: 'Weather for a city',
  inputSchema: jsonSchema({ type: 'object', properties: { city: { type: 'string' } },
                            required: ['city'] }),
  execute: async ({ city }) => `rain in ${city}`,
});
const options = { model: anthropic('claude-sonnet-4-5'), prompt: 'Weather in Oslo?',
                  tools: { get_weather: weather }, stopWhen: stepCountIs(2) };
const out = {};
const whole = await generateText(options);
out.whole = { text: whole.text, call: whole.steps[0].toolCalls[0]?.input ?? null };
const streamed = streamText({ ...options, onError: ({ error }) => { throw error; } });
const steps = await streamed.steps;
out.streamed = { text: await streamed.text, call: steps[0].toolCalls[0]?.input ?? null };
console.log(JSON.stringify(out));
"""


@pytest.fixture
def gemini() -> Iterator[tuple[GeminiAgent, ScriptedServer]]:
    package_dir("ai")
    package_dir("@ai-sdk/anthropic")
    script = GeminiAgent(["get_weather"], lambda _: {"city": "Oslo"}, final=FINAL)
    server = ScriptedServer(script).start()
    try:
        yield script, server
    finally:
        server.stop()


def test_ai_sdk_anthropic_runs_a_tool_on_a_gemini_3_node(
    gemini: tuple[GeminiAgent, ScriptedServer], tmp_path: Path
) -> None:
    script, server = gemini
    config = {
        "nodes": [{"name": "gem", "url": server.root + "/v1beta", "dialect": "gemini"}],
        "models": {"claude-*": [{"model": "gemini-3-flash-preview", "nodes": ["gem"]}]},
        "keys": [{"name": "app", "key_env": "APP_KEY", "models": ["claude-*"]}],
    }
    with routed_proxy(config, {"APP_KEY": KEY}, tmp_path) as proxy:
        out = node_json(SCRIPT, {"BASE_URL": proxy.url + "/v1", "KEY": KEY})
        events = proxy.usage.wait(5)  # /health and two turns of each run
    expected = {"text": FINAL, "call": {"city": "Oslo"}}
    assert out == {"whole": expected, "streamed": expected}
    assert script.refused == 0 and script.tool_calls_made == 2
    assert [tool_results(body) for body in script.chat_requests if tool_results(body)] == [
        ['{"result": "rain in Oslo"}']
    ] * 2
    served = [e for e in events if e["route"] == "/v1/messages"]
    assert {(e["node"], e["alias"], e["key_id"], e["status"]) for e in served} == {
        ("gem", "claude-*", "app", 200)
    }
