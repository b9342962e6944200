"""`AgentUpstream` speaking another dialect: a Gemini server, an Ollama server.

The routed proxy may send an agent's turn to a node of any dialect; these play
that node on loopback. Each reads the request in its own wire (Gemini's
``contents``/``functionDeclarations``, Ollama's ``/api/chat``), hands
`AgentUpstream` the OpenAI-shaped view it decides on (tools, tool results),
and writes the answer back in its own wire, streamed or whole as asked:
Gemini's ``generateContent`` JSON or ``alt=sse`` events (no ``[DONE]``),
Ollama's NDJSON lines ending in a ``done: true`` line with its counts. The
view is what `chat_requests` keeps, so a test asserts the same things as over
an OpenAI upstream (the tool's output came back as a tool message).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from llmchat.testing import RecordedRequest, Reply

from ..support.agent_upstream import AgentUpstream

NDJSON = {"Content-Type": "application/x-ndjson"}
SIGNATURE = "c2lnbmVkIGJ5IHRoZSBzY3JpcHRlZCBnZW1pbmk="  # opaque base64, as Gemini sends
MISSING = (
    "Function call is missing a thought_signature in functionCall parts. This is required "
    "for tools to work correctly, and missing thought_signature may lead to degraded model "
    "performance."
)
GEMINI_MODEL = {"name": "models/gemini-test", "inputTokenLimit": 1_048_576}


class GeminiAgent(AgentUpstream):
    """The agent's model as a Gemini API server (``/v1beta/models/{model}:...``).

    Like Gemini 3, it signs each turn's function call (``thoughtSignature``)
    and, for a ``gemini-3`` model, refuses with Google's 400 a history whose
    model turn calls a function without one (`refused` counts those).
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.refused = 0

    def __call__(self, request: RecordedRequest) -> Reply:
        path = request.path.partition("?")[0]
        verb = path.rpartition(":")[2]
        if request.method == "POST" and verb in ("generateContent", "streamGenerateContent"):
            body = request.json()
            assert isinstance(body, dict), body
            if "/models/gemini-3" in path and not signed(body):
                self.refused += 1
                return Reply.json(
                    {"error": {"code": 400, "message": MISSING, "status": "INVALID_ARGUMENT"}}, 400
                )
            return self.respond(gemini_view(body, stream=verb == "streamGenerateContent"))
        if request.method == "GET" and path.endswith("/models"):  # the node's health probe
            return Reply.json({"models": [GEMINI_MODEL]})
        if request.method == "GET" and "/models/" in path:
            return Reply.json(GEMINI_MODEL)
        body = {"error": {"code": 404, "message": f"no {path}", "status": "NOT_FOUND"}}
        return Reply.json(body, 404)

    def _answer(
        self, body: Mapping[str, Any], message: dict[str, Any], finish: str, *, think: bool = False
    ) -> Reply:
        parts: list[dict[str, Any]] = []
        if think and self.reasoning:
            parts.append({"text": self.reasoning, "thought": True})
        if message.get("content"):
            parts.append({"text": message["content"]})
        for call in message.get("tool_calls", []):
            function = call["function"]
            call = {"name": function["name"], "args": json.loads(function["arguments"])}
            parts.append({"functionCall": call, "thoughtSignature": SIGNATURE})
        prompt, completion = int(self.usage["prompt_tokens"]), int(self.usage["completion_tokens"])
        usage = {"promptTokenCount": prompt, "candidatesTokenCount": completion}
        usage["totalTokenCount"] = prompt + completion
        # Gemini ends a turn that calls a function with STOP, like any other.
        candidate = {
            "content": {"role": "model", "parts": parts},
            "index": 0,
            "finishReason": "STOP",
        }
        whole = {"candidates": [candidate], "usageMetadata": usage, "modelVersion": "gemini-test"}
        if not body.get("stream"):
            return Reply.json(whole)
        return Reply.sse([whole], done=False)


def signed(body: Mapping[str, Any]) -> bool:
    """Gemini 3's rule: each model turn calling functions signs its first call."""
    for content in body.get("contents") or []:
        calls = [p for p in content.get("parts") or [] if "functionCall" in p]
        if content.get("role") == "model" and calls and not calls[0].get("thoughtSignature"):
            return False
    return True


def gemini_view(body: Mapping[str, Any], *, stream: bool) -> dict[str, Any]:
    """A Gemini request as the OpenAI chat body `AgentUpstream` decides on."""
    tools = [
        {
            "type": "function",
            "function": {
                "name": declaration["name"],
                "parameters": declaration.get("parametersJsonSchema")
                or declaration.get("parameters")
                or {},
            },
        }
        for tool in body.get("tools") or []
        for declaration in tool.get("functionDeclarations") or []
    ]
    messages: list[dict[str, Any]] = []
    system = body.get("systemInstruction")
    if system:
        messages.append({"role": "system", "content": _text(system.get("parts") or [])})
    for content in body.get("contents") or []:
        parts = content.get("parts") or []
        role = "assistant" if content.get("role") == "model" else "user"
        for part in parts:
            if "functionResponse" in part:
                result = part["functionResponse"]
                messages.append(
                    {
                        "role": "tool",
                        "name": result["name"],
                        "content": json.dumps(result["response"]),
                    }
                )
            elif "functionCall" in part:
                call = part["functionCall"]
                function = {"name": call["name"], "arguments": json.dumps(call.get("args") or {})}
                messages.append(
                    {
                        "role": "assistant",
                        "tool_calls": [{"type": "function", "function": function}],
                    }
                )
        text = _text(parts)
        if text:
            messages.append({"role": role, "content": text})
    return {"model": "gemini", "stream": stream, "tools": tools, "messages": messages}


def _text(parts: list[Mapping[str, Any]]) -> str:
    return "".join(part["text"] for part in parts if "text" in part and not part.get("thought"))


class OllamaAgent(AgentUpstream):
    """The agent's model as an Ollama server (``/api/chat``, NDJSON when streamed)."""

    def __call__(self, request: RecordedRequest) -> Reply:
        path = request.path.partition("?")[0]
        if request.method == "POST" and path == "/api/chat":
            body = request.json()
            assert isinstance(body, dict), body
            # Ollama streams unless told not to; its tool calls and results are OpenAI's shape.
            return self.respond({**body, "stream": body.get("stream", True)})
        if request.method == "GET" and path == "/api/tags":  # the node's health probe
            return Reply.json({"models": [{"name": "qwen3-coder", "model": "qwen3-coder"}]})
        return Reply.json({"error": f"no {path}"}, 404)

    def _answer(
        self, body: Mapping[str, Any], message: dict[str, Any], finish: str, *, think: bool = False
    ) -> Reply:
        said: dict[str, Any] = {"role": "assistant", "content": message.get("content") or ""}
        if think and self.reasoning:
            said["thinking"] = self.reasoning
        if "tool_calls" in message:
            said["tool_calls"] = [
                {
                    "function": {
                        "name": c["function"]["name"],
                        "arguments": json.loads(c["function"]["arguments"]),
                    }
                }
                for c in message["tool_calls"]
            ]
        head = {"model": body.get("model", "m"), "created_at": "2025-01-01T00:00:00Z"}
        counts = {
            "done_reason": "stop",
            "prompt_eval_count": int(self.usage["prompt_tokens"]),
            "eval_count": int(self.usage["completion_tokens"]),
            "total_duration": 2_000_000,
        }
        if not body.get("stream"):
            return Reply.json({**head, "message": said, "done": True, **counts})
        end = {**head, "message": {"role": "assistant", "content": ""}, "done": True, **counts}
        lines = [{**head, "message": said, "done": False}, end]
        steps = "".join(json.dumps(line) + "\n" for line in lines)
        return Reply(200, NDJSON, body=steps.encode())
