"""The scripted upstream an agent CLI runs against through the proxy.

A real agent turn, played by a loopback OpenAI chat server: on a request whose
tools hold the agent's shell tool and whose history has no tool result yet, it
calls that tool (with the arguments `plan` gives for it); once the tool's
result comes back, it answers `final`. Every other request (an agent's side
calls: titles, topic checks, quota probes) gets `side_text`. Each chat request
body is kept in `chat_requests`, so a test can assert what reached the
upstream: the tool result, the reasoning of the last turn, the model name.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from llmchat.testing import ChatResponder, RecordedRequest, Reply

Plan = Callable[[Mapping[str, Any]], dict[str, Any]]
"""The shell tool's OpenAI definition -> the arguments to call it with."""

HEAD = {"id": "chatcmpl-agent", "object": "chat.completion.chunk", "created": 1, "model": "agent"}


def shell_plan(command: str) -> Plan:
    """A plan running `command` through whichever shell tool the agent sent.

    Codex's freeform ``exec`` tool (a ``custom`` tool: raw JavaScript calling
    its nested tools) reaches the upstream as a function whose one string
    argument, ``input``, is the raw text; the script calls
    ``tools.exec_command({cmd})`` and returns its output with ``text()``.
    Codex's ``exec_command`` function takes ``cmd``; a ``shell`` tool takes
    ``command``, an argv list or a string as its schema says.
    """

    def plan(tool: Mapping[str, Any]) -> dict[str, Any]:
        properties = (tool.get("parameters") or {}).get("properties") or {}
        if tool["name"] == "exec" and "input" in properties:
            script = f"const r = await tools.exec_command({{cmd: {json.dumps(command)}}});"
            return {"input": script + "\ntext(r.output);"}
        if "cmd" in properties:
            return {"cmd": command}
        if properties.get("command", {}).get("type") == "array":
            return {"command": ["bash", "-lc", command]}
        return {"command": command}

    return plan


def tool_results(body: Mapping[str, Any]) -> list[str]:
    """The text of every `tool` message in a chat request body, in order."""
    out = []
    for message in body.get("messages", []):
        if message.get("role") == "tool":
            content = message.get("content")
            out.append(content if isinstance(content, str) else json.dumps(content))
    return out


class AgentUpstream:
    """A `ScriptedServer` script playing one tool call and then a final answer."""

    def __init__(
        self,
        tool_names: Sequence[str],
        plan: Plan,
        *,
        final: str = "All done: the file is written.",
        side_text: str = "ok",
        reasoning: str | None = None,
        usage: Mapping[str, Any] | None = None,
    ) -> None:
        self.tool_names = tuple(tool_names)
        self.plan = plan
        self.final = final
        self.side_text = side_text
        self.reasoning = reasoning
        self.usage = dict(usage) if usage else {"prompt_tokens": 40, "completion_tokens": 8}
        self.chat_requests: list[dict[str, Any]] = []
        self.tool_calls_made = 0
        self._lock = threading.Lock()
        self._other = ChatResponder(side_text)

    def __call__(self, request: RecordedRequest) -> Reply:
        path = request.path.partition("?")[0]
        if request.method != "POST" or not path.endswith("/chat/completions"):
            return self._other(request)
        body = request.json()
        if not isinstance(body, dict):
            return Reply.error(400, "body is not JSON", "invalid_request_error")
        return self.respond(body)

    def respond(self, body: dict[str, Any]) -> Reply:
        """The turn for an OpenAI-shaped chat `body` (a dialect's agent translates to it first)."""
        with self._lock:
            self.chat_requests.append(body)
        tools = {
            t["function"]["name"]: t["function"]
            for t in body.get("tools") or []
            if t.get("type") == "function"
        }
        shell = next((name for name in self.tool_names if name in tools), None)
        if shell is None:
            return self._answer(body, {"content": self.side_text}, "stop")
        if tool_results(body):
            return self._answer(body, {"content": self.final}, "stop", think=True)
        with self._lock:
            self.tool_calls_made += 1
            call_id = f"call_agent_{self.tool_calls_made}"
        arguments = json.dumps(self.plan(tools[shell]))
        call = {
            "id": call_id,
            "type": "function",
            "function": {"name": shell, "arguments": arguments},
        }
        return self._answer(body, {"tool_calls": [call]}, "tool_calls", think=True)

    def _answer(
        self, body: Mapping[str, Any], message: dict[str, Any], finish: str, *, think: bool = False
    ) -> Reply:
        return chat_reply(body, message, finish, self.reasoning if think else None, self.usage)


def chat_reply(
    body: Mapping[str, Any],
    message: dict[str, Any],
    finish: str,
    reasoning: str | None = None,
    usage: Mapping[str, Any] | None = None,
) -> Reply:
    """An OpenAI chat answer to `body`, streamed or whole as it asked: `message`'s content
    and tool calls, `reasoning` as ``reasoning_content`` first, then `finish` and usage."""
    usage = dict(usage) if usage else {"prompt_tokens": 40, "completion_tokens": 8}
    usage["total_tokens"] = int(usage["prompt_tokens"]) + int(usage["completion_tokens"])
    if not body.get("stream"):
        whole: dict[str, Any] = {"role": "assistant", "content": message.get("content")}
        if "tool_calls" in message:
            whole["tool_calls"] = message["tool_calls"]
        if reasoning:
            whole["reasoning_content"] = reasoning
        choice = {"index": 0, "message": whole, "finish_reason": finish}
        return Reply.json(
            {**HEAD, "object": "chat.completion", "choices": [choice], "usage": usage}
        )

    def chunk(delta: dict[str, Any], fin: str | None = None) -> dict[str, Any]:
        return {**HEAD, "choices": [{"index": 0, "delta": delta, "finish_reason": fin}]}

    events = [chunk({"role": "assistant", "content": None})]
    if reasoning:
        events.append(chunk({"reasoning_content": reasoning}))
    if "content" in message:
        events.append(chunk({"content": message["content"]}))
    for index, call in enumerate(message.get("tool_calls", [])):
        events.append(chunk({"tool_calls": [{"index": index, **call}]}))
    events.append(chunk({}, finish))
    events.append({**HEAD, "choices": [], "usage": usage})
    return Reply.sse(events)
