"""One Anthropic answer, two modes: the blocking message and its event stream agree.

Mirrors `test_equivalence.py` for the Messages dialect. Each example generates
one message (thinking blocks with signatures, redacted thinking, text with
citations, tool calls, server-tool blocks that add nothing, any stop reason,
usage with cache counts), serves it over real sockets once as the blocking
body and once as its event stream (`message_events`: text and JSON cut into
pieces, chunked or close-delimited, optionally cut at arbitrary byte offsets),
and compares everything a caller reads; both must also say what the message
says.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Final

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from llmchat.backends.anthropic import Anthropic
from llmchat.dialects.anthropic import STOP_REASONS
from llmchat.testing import RecordedRequest, Reply, ScriptedServer

from ..support.anthropic import message_events, sse, sse_reply
from .equivalence_support import chunk_view, response_view

HI: Final = [{"role": "user", "content": "Hi"}]
WAIT: Final = 10.0
CHARS: Final = st.characters(exclude_categories=["Cs"])
TEXT: Final = st.text(CHARS, min_size=1, max_size=8)
JSON_LEAF: Final = st.one_of(st.none(), st.booleans(), st.integers(-5, 5), st.text(max_size=4))


@st.composite
def blocks(draw: st.DrawFn) -> dict[str, Any]:
    kind = draw(st.sampled_from(["text", "text", "thinking", "redacted", "tool", "server"]))
    if kind == "text":
        block: dict[str, Any] = {"type": "text", "text": draw(TEXT)}
        if draw(st.booleans()):
            block["citations"] = [
                {"type": "char_location", "cited_text": draw(TEXT), "document_index": i}
                for i in range(draw(st.integers(1, 2)))
            ]
        return block
    if kind == "thinking":
        return {
            "type": "thinking",
            "thinking": draw(TEXT),
            "signature": draw(st.text("abc=", min_size=1, max_size=6)),
        }
    if kind == "redacted":
        return {"type": "redacted_thinking", "data": draw(st.text("xyz", min_size=1, max_size=6))}
    if kind == "tool":
        arguments = draw(st.dictionaries(st.text(max_size=4), JSON_LEAF, max_size=3))
        return {
            "type": "tool_use",
            "id": f"toolu_{draw(st.integers(0, 999))}",
            "name": "get_weather",
            "input": arguments,
        }
    return {
        "type": "server_tool_use",
        "id": "srvtoolu_1",
        "name": "web_search",
        "input": {"query": "q"},
    }


@st.composite
def usages(draw: st.DrawFn) -> dict[str, Any]:
    usage: dict[str, Any] = {"input_tokens": draw(st.integers(0, 500))}
    for key in ("cache_read_input_tokens", "cache_creation_input_tokens"):
        if draw(st.booleans()):
            usage[key] = draw(st.integers(0, 500))
    usage["output_tokens"] = draw(st.integers(0, 500))
    if draw(st.booleans()):
        usage["output_tokens_details"] = {"thinking_tokens": draw(st.integers(0, 50))}
    return usage


@st.composite
def messages(draw: st.DrawFn) -> dict[str, Any]:
    reason = draw(st.sampled_from([*STOP_REASONS, "pause_turn", "new_reason"]))
    return {
        "id": draw(st.sampled_from(["msg_1", "msg_abc"])),
        "type": "message",
        "role": "assistant",
        "model": draw(st.sampled_from(["claude-x", "tiny"])),
        "content": draw(st.lists(blocks(), max_size=5)),
        "stop_reason": reason,
        "stop_sequence": "END" if reason == "stop_sequence" else None,
        "usage": draw(usages()),
    }


@pytest.fixture(scope="module")
def server() -> Iterator[ScriptedServer]:
    srv = ScriptedServer()
    with srv:
        yield srv


def finish_by_the_rules(message: dict[str, Any]) -> str:
    """The mapped stop reason; ``stop`` with tool calls is ``tool_calls`` (the judge's rule)."""
    mapped = STOP_REASONS.get(message["stop_reason"], message["stop_reason"])
    calls = any(b["type"] == "tool_use" for b in message["content"])
    return "tool_calls" if mapped == "stop" and calls else mapped


def what_the_message_says(message: dict[str, Any]) -> dict[str, Any]:
    content = message["content"]
    usage = message["usage"]
    cached = usage.get("cache_read_input_tokens")
    prompt = usage["input_tokens"] + (cached or 0) + usage.get("cache_creation_input_tokens", 0)
    citations = [c for b in content if b["type"] == "text" for c in b.get("citations", [])]
    return {
        "msg": "".join(b["text"] for b in content if b["type"] == "text"),
        "reasoning_text": "".join(b["thinking"] for b in content if b["type"] == "thinking")
        or None,
        "tool_calls": [
            (b["name"], b["input"], b["id"]) for b in content if b["type"] == "tool_use"
        ],
        "citations": citations or None,
        "provider_finish_reason": message["stop_reason"],
        "finish_reason": finish_by_the_rules(message),
        "prompt_tokens": prompt,
        "completion_tokens": usage["output_tokens"],
        "total_tokens": prompt + usage["output_tokens"],
        "cached_tokens": cached,
        "model": message["model"],
        "id": message["id"],
        "parts": [
            {k: v for k, v in b.items()} | {"dialect": "anthropic"}
            for b in content
            if b["type"] in ("thinking", "redacted_thinking")
        ],
    }


def read_back(view: dict[str, Any], response: Any) -> dict[str, Any]:
    return {
        "msg": view["msg"],
        "reasoning_text": view["reasoning_text"],
        "tool_calls": [(c.name, c.arguments, c.id) for c in view["tool_calls"]],
        "citations": view["citations"],
        "provider_finish_reason": view["provider_finish_reason"],
        "finish_reason": view["finish_reason"],
        "prompt_tokens": view["prompt_tokens"],
        "completion_tokens": view["completion_tokens"],
        "total_tokens": view["total_tokens"],
        "cached_tokens": view["cached_tokens"],
        "model": view["model"],
        "id": view["id"],
        "parts": response.reasoning_parts or [],
    }


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    message=messages(),
    pieces=st.integers(1, 4),
    framing=st.sampled_from(["chunked", "close"]),
    cuts=st.none() | st.lists(st.integers(1, 3000), max_size=8),
)
def test_any_message_agrees_in_both_modes(
    server: ScriptedServer,
    message: dict[str, Any],
    pieces: int,
    framing: Any,
    cuts: list[int] | None,
) -> None:
    body = sse(message_events(message, pieces=pieces))
    stream_reply = sse_reply(body, framing=framing, cuts=cuts or ())
    blocking_reply = Reply.json(message)

    def script(request: RecordedRequest) -> Reply:
        return stream_reply if (request.json() or {}).get("stream") else blocking_reply

    server.set_script(script)
    backend = Anthropic(server.url, api_key="sk-ant-equivalence")
    blocking = backend.chat_completion(HI)
    streamed = backend.chat_completion_stream(HI).wait(WAIT)
    assert streamed.is_done, "the stream never settled"
    views = {"blocking": response_view(blocking), "streamed": response_view(streamed)}
    # The raw usage block differs by design: the stream's is message_delta's.
    for view in views.values():
        view.pop("usage")
    problems = {
        k: (views["streamed"][k], views["blocking"][k])
        for k in views["blocking"]
        if views["streamed"][k] != views["blocking"][k]
    }
    chunks = {"blocking": chunk_view(list(blocking)), "streamed": chunk_view(list(streamed))}
    for view in chunks.values():
        view.pop("usage")
    problems.update(
        {
            f"chunks.{k}": (chunks["streamed"][k], chunks["blocking"][k])
            for k in chunks["blocking"]
            if chunks["streamed"][k] != chunks["blocking"][k]
        }
    )
    if streamed.reasoning_parts != blocking.reasoning_parts:
        problems["reasoning_parts"] = (streamed.reasoning_parts, blocking.reasoning_parts)
    said = what_the_message_says(message)
    for mode, response in (("blocking", blocking), ("streamed", streamed)):
        got = read_back(views[mode], response)
        problems.update(
            {f"{mode} vs the message: {k}": (got[k], said[k]) for k in said if got[k] != said[k]}
        )
    assert not problems, problems
