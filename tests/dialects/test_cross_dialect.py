"""One conversation across wire dialects: fallback chains, tool loops, reasoning parts.

Real sockets (the loopback `ScriptedServer` plays each dialect's literal
bytes). The rules shown: `Response.to_message()` is the turn to append; a
tool result goes back in each dialect's own shape; a dialect's opaque
reasoning parts go back to that dialect only; `Inference` and `ToolLoop`
need nothing dialect-specific.
"""

from __future__ import annotations

import json
from typing import Any

from llmchat import Anthropic, Gemini, Message, Ollama, OpenAICommon
from llmchat.retry import Inference
from llmchat.testing import RecordedRequest, Reply, ScriptedServer
from llmchat.toolloop import ToolLoop

HI = [{"role": "user", "content": "Weather in Paris?"}]
WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}
THINKING = {"type": "thinking", "thinking": "Use the tool.", "signature": "sig-ant"}


def _anthropic_message(content: list[dict[str, Any]], reason: str) -> dict[str, Any]:
    return {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-x",
        "content": content,
        "stop_reason": reason,
        "usage": {"input_tokens": 5, "output_tokens": 3},
    }


def test_inference_falls_back_from_openai_chat_to_anthropic(server: ScriptedServer) -> None:
    def script(request: RecordedRequest) -> Reply:
        if request.path.endswith("/chat/completions"):
            return Reply.error(503, "busy")
        answer = [{"type": "text", "text": "Sunny."}]
        return Reply.json(_anthropic_message(answer, "end_turn"))

    server.set_script(script)
    local = OpenAICommon(server.url, model="local")
    remote = Anthropic(server.url, api_key="k", model="claude-x")
    response = Inference([local, remote], max_retries=0, timeout=10).run(HI)
    assert response.is_success, response.err
    assert response.msg == "Sunny." and response.provider_finish_reason == "end_turn"
    paths = [r.path for r in server.requests]
    assert paths == ["/v1/chat/completions", "/v1/messages"]
    sent = server.requests[1].json()
    assert sent["messages"] == [{"role": "user", "content": "Weather in Paris?"}]


def test_anthropic_reasoning_parts_go_back_to_anthropic_only(server: ScriptedServer) -> None:
    call = {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "P"}}
    server.set_script([Reply.json(_anthropic_message([THINKING, call], "tool_use"))])
    first = Anthropic(server.url, api_key="k", model="claude-x").chat_completion(HI, [WEATHER])
    assert first.is_success and first.finish_reason == "tool_calls"
    turn = first.to_message()
    assert turn.reasoning_parts and turn.reasoning_parts[0]["signature"] == "sig-ant"
    history = [*HI, turn, Message("tool", "18C", tool_call_id="toolu_1")]

    again = Anthropic(server.url, api_key="k", model="claude-x").prepare_chat_request(history)
    assert again.body["messages"][1]["content"][0] == THINKING
    for other in (
        OpenAICommon(server.url, model="m"),
        Ollama(server.root, model="m"),
        Gemini(server.url, api_key="g", model="m"),
    ):
        data = other.prepare_chat_request(history).data
        assert b"sig-ant" not in data and b"Use the tool." not in data, type(other).__name__
        assert b"get_weather" in data and b"18C" in data  # the call and its result still go


def test_tool_loop_over_ollama_sends_results_in_ollama_shape(server: ScriptedServer) -> None:
    call = {"function": {"name": "get_weather", "arguments": {"city": "Paris"}}}
    first = {
        "model": "m",
        "message": {"role": "assistant", "content": "", "tool_calls": [call]},
        "done": True,
        "done_reason": "stop",
    }
    final = {
        "model": "m",
        "message": {"role": "assistant", "content": "It is 18C."},
        "done": True,
        "done_reason": "stop",
    }
    server.set_script([Reply.json(first), Reply.json(final)])
    loop = ToolLoop(Ollama(server.root, model="m"), [WEATHER], lambda c: "18C")
    response = loop.run(HI)
    assert response.is_success, response.err
    assert response.msg == "It is 18C."
    second = server.requests[1].json()
    assistant, result = second["messages"][1], second["messages"][2]
    assert assistant["tool_calls"][0]["function"]["arguments"] == {"city": "Paris"}
    assert result["role"] == "tool" and result["tool_name"] == "get_weather"
    assert result["content"] == "18C"


def test_tool_loop_over_gemini_keeps_the_thought_signature_on_its_call(
    server: ScriptedServer,
) -> None:
    part = {"functionCall": {"name": "get_weather", "args": {"city": "Paris"}}}
    first = {
        "candidates": [
            {
                "content": {"role": "model", "parts": [{**part, "thoughtSignature": "sig-gem"}]},
                "finishReason": "STOP",
                "index": 0,
            }
        ],
        "usageMetadata": {"promptTokenCount": 4, "candidatesTokenCount": 2},
    }
    final = {
        "candidates": [
            {
                "content": {"role": "model", "parts": [{"text": "It is 18C."}]},
                "finishReason": "STOP",
                "index": 0,
            }
        ]
    }
    server.set_script([Reply.json(first), Reply.json(final)])
    loop = ToolLoop(Gemini(server.url, api_key="g", model="m"), [WEATHER], lambda c: "18C")
    response = loop.run(HI)
    assert response.is_success, response.err
    second = server.requests[1].json()
    model_turn, result_turn = second["contents"][1], second["contents"][2]
    assert model_turn["role"] == "model"
    assert model_turn["parts"] == [{**part, "thoughtSignature": "sig-gem"}]
    response_part = result_turn["parts"][0]["functionResponse"]
    assert response_part["name"] == "get_weather"
    assert json.dumps(response_part["response"]).count("18C") == 1
