"""One answer in every dialect's own bytes, blocking and streamed, with raw JSON put in.

`answer(dialect, stream, raw=...)` builds the body of a whole answer (text,
reasoning, one tool call, model, id, usage) for a `ScriptedServer`. Markers in
the built JSON text are then replaced by raw JSON text, so a test can send what
no JSON encoder would write: ``@S@`` inside any string becomes a lone surrogate
escape (``\\ud800``; ``@I@`` one level deeper, in a string of JSON), and
``"@P@"`` and ``"@C@"`` become the prompt and completion counts as literal JSON
(``-5``, ``true``, ``5.5`` …).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, Final

from llmchat import Anthropic, Gemini, KoboldCpp, Ollama, OpenAICommon, OpenAIResponses
from llmchat.testing import Reply

S: Final = "@S@"
"""Put in a string: a lone surrogate escape on the wire."""
INNER: Final = "@I@"
"""Put in a tool call's arguments: a lone surrogate escape inside the arguments' own JSON
text, where a dialect sends arguments as a string (elsewhere, plain text)."""
TEXT: Final = f"text {S}"
REASONING: Final = f"thought {S}"
NAME: Final = "lookup"
ARGS: Final[dict[str, Any]] = {"q": f"arg {S}", f"k{S}": 1, "inner": f"in {INNER}"}
CALL_ID: Final = f"call_{S}"
MODEL: Final = f"model-{S}"
ANSWER_ID: Final = f"id-{S}"

BACKENDS: Final[dict[str, Callable[[str], Any]]] = {
    "openai": lambda url: OpenAICommon(url + "/v1", model="m"),
    "koboldcpp": lambda url: KoboldCpp(url + "/v1", model="m"),
    "responses": lambda url: OpenAIResponses(url + "/v1", api_key="k", model="m"),
    "anthropic": lambda url: Anthropic(url + "/v1", api_key="k", model="m"),
    "gemini": lambda url: Gemini(url + "/v1beta", api_key="k", model="m"),
    "ollama": lambda url: Ollama(url, model="m"),
}
"""Each dialect's backend, given the loopback server's base URL (no ``/v1``)."""


def backend(name: str, url: str) -> Any:
    return BACKENDS[name](url.removesuffix("/v1"))


def answer(
    dialect: str,
    stream: bool,
    *,
    prompt: str = "3",
    completion: str = "4",
    surrogates: bool = True,
) -> Reply:
    """The whole answer as a 200 `Reply`; `prompt`/`completion` are raw JSON count literals.

    With `surrogates` False the surrogate markers are left out (plain text).
    """
    build = _BUILDERS["openai" if dialect == "koboldcpp" else dialect]
    pieces = build(stream)
    texts = [_raw(p, prompt, completion) for p in pieces]
    if not surrogates:
        texts = [t.replace("\\\\ud800", "").replace("\\ud800", "") for t in texts]
    if not stream:
        return Reply(200, [("Content-Type", "application/json")], texts[0])
    if dialect == "ollama":
        return Reply(
            200, [("Content-Type", "application/x-ndjson")], "".join(t + "\n" for t in texts)
        )
    body = "".join(f"data: {t}\n\n" for t in texts)
    if dialect in ("openai", "koboldcpp"):
        body += "data: [DONE]\n\n"
    return Reply(200, [("Content-Type", "text/event-stream")], body)


def _raw(value: Any, prompt: str, completion: str) -> str:
    text = json.dumps(value)
    text = text.replace(S, "\\ud800").replace(INNER, "\\\\ud800")
    return text.replace('"@P@"', prompt).replace('"@C@"', completion)


def _openai(stream: bool) -> list[Any]:
    call = {
        "id": CALL_ID,
        "type": "function",
        "function": {"name": NAME, "arguments": json.dumps(ARGS)},
    }
    usage = {"prompt_tokens": "@P@", "completion_tokens": "@C@"}
    head = {"id": ANSWER_ID, "object": "chat.completion", "model": MODEL}
    if not stream:
        message = {
            "role": "assistant",
            "content": TEXT,
            "reasoning_content": REASONING,
            "tool_calls": [call],
        }
        return [
            head
            | {
                "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}],
                "usage": usage,
            }
        ]

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return head | {"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    return [
        chunk({"role": "assistant", "reasoning_content": REASONING}),
        chunk({"content": TEXT}),
        chunk({"tool_calls": [call | {"index": 0}]}),
        chunk({}, "tool_calls"),
        head | {"choices": [], "usage": usage},
    ]


def _anthropic(stream: bool) -> list[Any]:
    content = [
        {"type": "thinking", "thinking": REASONING, "signature": "sig"},
        {"type": "text", "text": TEXT},
        {"type": "tool_use", "id": CALL_ID, "name": NAME, "input": ARGS},
    ]
    usage = {"input_tokens": "@P@", "output_tokens": "@C@"}
    head = {"id": ANSWER_ID, "type": "message", "role": "assistant", "model": MODEL}
    if not stream:
        return [head | {"content": content, "stop_reason": "tool_use", "usage": usage}]
    events: list[Any] = [
        {"type": "message_start", "message": head | {"content": [], "usage": usage}}
    ]
    for index, block in enumerate(content):
        opened = dict(block)
        deltas: list[dict[str, Any]] = []
        if block["type"] == "thinking":
            opened["thinking"] = ""
            deltas = [{"type": "thinking_delta", "thinking": REASONING}]
        elif block["type"] == "text":
            opened["text"] = ""
            deltas = [{"type": "text_delta", "text": TEXT}]
        else:
            opened["input"] = {}
            deltas = [{"type": "input_json_delta", "partial_json": json.dumps(ARGS)}]
        events.append({"type": "content_block_start", "index": index, "content_block": opened})
        events += [{"type": "content_block_delta", "index": index, "delta": d} for d in deltas]
        events.append({"type": "content_block_stop", "index": index})
    events.append({"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": usage})
    events.append({"type": "message_stop"})
    return events


def _gemini(stream: bool) -> list[Any]:
    parts = [
        {"text": REASONING, "thought": True},
        {"text": TEXT},
        {"functionCall": {"name": NAME, "args": ARGS, "id": CALL_ID}},
    ]
    body = {
        "candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": "STOP"}],
        "usageMetadata": {"promptTokenCount": "@P@", "candidatesTokenCount": "@C@"},
        "modelVersion": MODEL,
        "responseId": ANSWER_ID,
    }
    return [body]


def _ollama(stream: bool) -> list[Any]:
    call = {"function": {"name": NAME, "arguments": ARGS}}
    counts = {"prompt_eval_count": "@P@", "eval_count": "@C@"}
    if not stream:
        message = {
            "role": "assistant",
            "content": TEXT,
            "thinking": REASONING,
            "tool_calls": [call],
        }
        return [{"model": MODEL, "message": message, "done": True, "done_reason": "stop"} | counts]
    return [
        {
            "model": MODEL,
            "message": {"role": "assistant", "content": "", "thinking": REASONING},
            "done": False,
        },
        {"model": MODEL, "message": {"role": "assistant", "content": TEXT}, "done": False},
        {
            "model": MODEL,
            "message": {"role": "assistant", "content": "", "tool_calls": [call]},
            "done": False,
        },
        {
            "model": MODEL,
            "message": {"role": "assistant", "content": ""},
            "done": True,
            "done_reason": "stop",
        }
        | counts,
    ]


def _responses(stream: bool) -> list[Any]:
    call = {
        "type": "function_call",
        "id": "fc_1",
        "call_id": CALL_ID,
        "name": NAME,
        "arguments": json.dumps(ARGS),
        "status": "completed",
    }
    output = [
        {
            "type": "reasoning",
            "id": "rs_1",
            "summary": [{"type": "summary_text", "text": REASONING}],
        },
        {
            "type": "message",
            "id": "msg_1",
            "role": "assistant",
            "content": [{"type": "output_text", "text": TEXT, "annotations": []}],
        },
        call,
    ]
    body = {
        "id": ANSWER_ID,
        "object": "response",
        "model": MODEL,
        "status": "completed",
        "output": output,
        "usage": {"input_tokens": "@P@", "output_tokens": "@C@"},
    }
    if not stream:
        return [body]
    started = body | {"status": "in_progress", "output": [], "usage": None}
    return [
        {"type": "response.created", "response": started},
        {
            "type": "response.reasoning_summary_text.delta",
            "item_id": "rs_1",
            "output_index": 0,
            "summary_index": 0,
            "delta": REASONING,
        },
        {
            "type": "response.output_text.delta",
            "item_id": "msg_1",
            "output_index": 1,
            "content_index": 0,
            "delta": TEXT,
        },
        {"type": "response.output_item.done", "output_index": 2, "item": call},
        {"type": "response.completed", "response": body},
    ]


_BUILDERS: Final[dict[str, Callable[[bool], list[Any]]]] = {
    "openai": _openai,
    "anthropic": _anthropic,
    "gemini": _gemini,
    "ollama": _ollama,
    "responses": _responses,
}


def run(dialect: str, url: str, stream: bool, tools: list[dict[str, Any]] | None = None) -> Any:
    """One chat completion against `url`; the settled Response."""
    messages = [{"role": "user", "content": "hi"}]
    with backend(dialect, url) as client:
        if not stream:
            return client.chat_completion(messages, tools=tools)
        with client.chat_completion_stream(messages, tools=tools) as response:
            response.wait(10.0)
            return response
