"""Hostile JSON from the upstream: never an exception, never a string UTF-8 cannot carry.

Over real sockets, for every dialect (OpenAI chat, KoboldCpp, Responses,
Anthropic, Gemini, Ollama), blocking and streamed:

- a body or frame nested 100,000 deep is a failed Response (``response``; an
  error body stays the ``http`` failure of its status), as `fastjson.MAX_DEPTH`
  rules; before, blocking calls raised RecursionError and streams said
  ``unknown``;
- a lone surrogate escape in the text, the reasoning, a tool call's name,
  arguments (keys too, and inside the arguments' own JSON text), id, the
  model and the answer id is read as U+FFFD: every string encodes to UTF-8;
- a usage count that is not a count (negative, bool, float, string, past
  2**53-1) is None, in the parsed fields and in the raw ``usage`` block.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest
import requests

from llmchat import OpenAICommon
from llmchat.testing import RecordedRequest, Reply, ScriptedServer

from ..support.proxy import proxy_over
from .support import BACKENDS, answer, run

DIALECTS = list(BACKENDS)
MODES = {"blocking": False, "stream": True}
DEEP = {
    "list": "[" * 100_000 + "]" * 100_000,
    "object": '{"a":' * 100_000 + "1" + "}" * 100_000,
}


def _deep_reply(dialect: str, stream: bool, shape: str, status: int) -> Reply:
    body = DEEP[shape]
    if stream and status == 200:
        if dialect == "ollama":
            return Reply(status, [("Content-Type", "application/x-ndjson")], body + "\n")
        return Reply(status, [("Content-Type", "text/event-stream")], f"data: {body}\n\n")
    return Reply(status, [("Content-Type", "application/json")], body)


@pytest.mark.parametrize("status", [200, 500])
@pytest.mark.parametrize("shape", list(DEEP))
@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize("dialect", DIALECTS)
def test_deep_nesting_is_a_failed_response(
    dialect: str, mode: str, shape: str, status: int
) -> None:
    with ScriptedServer(lambda r: _deep_reply(dialect, MODES[mode], shape, status)) as url:
        response = run(dialect, url, MODES[mode])
    assert response.is_done and not response.is_success and not response.is_cancelled
    if status == 200:
        assert (response.error_class, response.error_status) == ("response", None)
    else:
        assert (response.error_class, response.error_status) == ("http", 500)


def test_a_deep_probe_answer_is_no_answer() -> None:
    def script(request: RecordedRequest) -> Reply:
        return Reply(200, [("Content-Type", "application/json")], DEEP["object"])

    with ScriptedServer(script) as url, OpenAICommon(url, model="m") as client:
        limits = client.probe_server_limits()
    assert "context_length" not in limits


def _strings(value: Any) -> list[str]:
    """Every string in `value`: dict keys, list items, dataclass fields, at any depth."""
    if isinstance(value, str):
        return [value]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _strings(dataclasses.asdict(value))
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in (*_strings(k), *_strings(v))]
    if isinstance(value, (list, tuple)):
        return [s for item in value for s in _strings(item)]
    return []


@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize("dialect", DIALECTS)
def test_lone_surrogates_are_read_as_replacement_characters(dialect: str, mode: str) -> None:
    with ScriptedServer(lambda r: answer(dialect, MODES[mode])) as url:
        response = run(dialect, url, MODES[mode])
    assert response.is_success, response.err
    (call,) = response.tool_calls
    assert response.msg == "text \ufffd"
    assert response.reasoning_text == "thought \ufffd"
    assert call.arguments["q"] == "arg \ufffd" and call.arguments["k\ufffd"] == 1
    assert call.arguments["inner"] in ("in \ufffd", "in \\ud800")  # an escape in an object: text
    assert response.model == "model-\ufffd"
    if dialect != "ollama":  # Ollama sends no call id and no answer id
        assert call.id == "call_\ufffd" and response.id == "id-\ufffd"
    everything = [
        response.msg,
        response.reasoning_text,
        response.model,
        response.id,
        response.tool_calls,
        response.reasoning_parts,
        response.usage,
    ]
    for text in _strings(everything):
        text.encode("utf-8")  # raises UnicodeEncodeError on a lone surrogate


BAD_COUNTS = ["-5", "true", "5.5", '"5"', "9007199254740993", "1e400"]


def _count_values(usage: Any) -> list[Any]:
    """Every value in a usage block whose name says it is a count."""
    if not isinstance(usage, dict):
        return []
    out: list[Any] = []
    for key, value in usage.items():
        if isinstance(value, dict):
            out += _count_values(value)
        elif key.endswith(("tokens", "Tokens", "_count", "Count")):
            out.append(value)
    return out


@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize("dialect", DIALECTS)
def test_a_count_that_is_not_a_count_is_unknown(dialect: str, mode: str) -> None:
    for literal in BAD_COUNTS:
        reply = answer(dialect, MODES[mode], prompt=literal, completion=literal)
        with ScriptedServer(lambda r, reply=reply: reply) as url:
            response = run(dialect, url, MODES[mode])
        assert response.is_success, (literal, response.err)
        assert (response.prompt_tokens, response.completion_tokens) == (None, None), literal
        assert response.total_tokens is None, literal
        for value in _count_values(response.usage):
            assert value is None or (type(value) is int and 0 <= value < 2**53), response.usage


@pytest.mark.parametrize("stream", [False, True])
def test_a_negative_upstream_count_never_leaves_the_proxy(stream: bool) -> None:
    reply = answer("openai", stream, prompt="-5", completion="-5", surrogates=False)
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": stream}
    with proxy_over(lambda r: reply) as (url, _):
        answered = requests.post(url + "/api/chat", json=body, timeout=10)
    assert answered.status_code == 200
    last = [json.loads(line) for line in answered.text.splitlines() if line.strip()][-1]
    assert last["done"] is True and last["message"]["content"] in ("text ", "")
    for key in ("prompt_eval_count", "eval_count"):
        assert type(last[key]) is int and last[key] >= 0, last
