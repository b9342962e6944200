"""The read-back: what GeminiStream writes, read by llmchat's own Gemini client, is what
the OpenAI chunks it translated say.

One OpenAI chunk sequence is served twice over real sockets (`ScriptedServer`):
as OpenAI SSE to the `OpenAICommon` backend (the Response the chunks say), and
translated by `GeminiStream` to the `Gemini` backend in every form a Gemini
server sends a stream in: ``alt=sse`` events one write each, the JSON array as
the body of a streamed call, and that array read whole (blocking). The two
Responses must agree on the text, the reasoning, the tool calls (name and
arguments: Gemini numbers its own call ids), the finish reason, the usage, the
model and the outcome. The settled Response's `GeminiAnswer.body`, served as a
``generateContent`` body, must read back the same too.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from typing import Any

import pytest

from llmchat import OpenAICommon
from llmchat.backends.gemini import Gemini
from llmchat.protocols.gemini import GeminiStream
from llmchat.protocols.translator import MALFORMED
from llmchat.proxy.faces.gemini.answer import GeminiAnswer
from llmchat.response import Response
from llmchat.testing import Reply, ScriptedServer, Write

HI = [{"role": "user", "content": "Hi"}]
SETTLE_GUARD = 60.0  # a hang guard only: every body here ends
FORMS = ("sse", "stream-array", "blocking-array")
TEXTS = ("Hello", " wörld", "日本", 'a "quote"', "\n\t", "🙂", "{", "back\\slash", "%b")


@pytest.fixture(scope="module")
def server() -> Iterator[ScriptedServer]:
    srv = ScriptedServer()
    with srv:
        yield srv


def openai_response(server: ScriptedServer, chunks: list[dict[str, Any]]) -> Response:
    """What llmchat's OpenAI client makes of `chunks` streamed as OpenAI SSE."""
    events = [b"data: " + json.dumps(c).encode() + b"\n\n" for c in chunks]
    steps = [Write(e) for e in [*events, b"data: [DONE]\n\n"]]
    server.push(Reply(200, {"Content-Type": "text/event-stream"}, framing="chunked", steps=steps))
    return OpenAICommon(server.url).chat_completion_stream(HI).wait(SETTLE_GUARD)


def translated(chunks: list[dict[str, Any]], framing: str, **kwargs: Any) -> list[bytes]:
    """`GeminiStream`'s output for `chunks`, one piece per call, as the proxy writes it."""
    stream = GeminiStream("req-model", framing=framing, **kwargs)
    pieces = [stream.start(), *(stream.delta(c) for c in chunks), stream.finish()]
    return [p for p in pieces if p]


def gemini_response(server: ScriptedServer, pieces: list[bytes], form: str) -> Response:
    """What llmchat's Gemini client makes of the pieces, served in `form`."""
    backend = Gemini(server.url, api_key="test-key", model="gemini-test")
    if form == "sse":
        steps = [Write(p) for p in pieces]
        server.push(
            Reply(200, {"Content-Type": "text/event-stream"}, framing="chunked", steps=steps)
        )
        return backend.chat_completion_stream(HI).wait(SETTLE_GUARD)
    body = b"".join(pieces)
    server.push(Reply(200, {"Content-Type": "application/json"}, body))
    if form == "stream-array":
        return backend.chat_completion_stream(HI).wait(SETTLE_GUARD)
    return backend.chat_completion(HI)


def said(response: Response) -> dict[str, Any]:
    """What a Response says that a Gemini client can be told."""
    assert response.is_done
    return {
        "is_success": response.is_success,
        "msg": response.msg,
        "reasoning": response.reasoning_text or "",
        "tool_calls": [(c.name, c.arguments) for c in response.tool_calls],
        "finish_reason": response.finish_reason,
        "usage": (
            response.prompt_tokens,
            response.completion_tokens,
            response.total_tokens,
            response.cached_tokens,
            response.reasoning_tokens,
        ),
        "model": response.model,
    }


def choice(delta: dict[str, Any], reason: str | None = None, **top: Any) -> dict[str, Any]:
    return {**top, "choices": [{"index": 0, "delta": delta, "finish_reason": reason}]}


def fragments(rng: random.Random, index: int) -> list[dict[str, Any]]:
    """One tool call as OpenAI streams it: id and name first, the arguments cut in pieces."""
    arguments = json.dumps(
        rng.choice([{}, {"path": "a.txt"}, {"q": 'caf\u00e9 "x"', "n": [1, 2.5, None, True]}])
    )
    cuts = sorted(rng.sample(range(len(arguments) + 1), rng.randint(0, 3)))
    pieces = [arguments[a:b] for a, b in zip([0, *cuts], [*cuts, len(arguments)], strict=True)]
    name = rng.choice(["read_file", "run_shell_command"])
    head = {"index": index, "id": f"call_{index}", "type": "function"}
    out = [choice({"tool_calls": [{**head, "function": {"name": name, "arguments": ""}}]})]
    out += [
        choice({"tool_calls": [{"index": index, "function": {"arguments": p}}]}) for p in pieces
    ]
    return out


def sequence(rng: random.Random) -> list[dict[str, Any]]:
    """A well-formed OpenAI stream: reasoning, text, tool calls, a finish and usage."""
    out = [choice({"role": "assistant"}, id="chatcmpl-" + rng.choice("ab"), model="up-model")]
    for _ in range(rng.randint(0, 8)):
        kind = rng.random()
        text = "".join(rng.choice(TEXTS) for _ in range(rng.randint(1, 3)))
        if kind < 0.3:
            out.append(choice({"reasoning_content": text}))
        elif kind < 0.4:
            out.append(choice({"reasoning_content": text, "content": text[::-1]}))
        else:
            out.append(choice({"content": text}))
    calls = rng.choice([0, 0, 1, 2])
    for index in range(calls):
        out += fragments(rng, index)
    reason = "tool_calls" if calls else rng.choice(["stop", "stop", "length"])
    out.append(choice({}, reason))
    prompt, completion = rng.randint(1, 500), rng.randint(1, 300)
    usage: dict[str, Any] = {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }
    if rng.random() < 0.5:
        usage["prompt_tokens_details"] = {"cached_tokens": rng.randint(0, prompt)}
    if rng.random() < 0.5:
        usage["completion_tokens_details"] = {"reasoning_tokens": rng.randint(0, completion)}
    if rng.random() < 0.8:
        out.append({"choices": [], "usage": usage})
    return out


@pytest.mark.parametrize("form", FORMS)
def test_random_streams_read_back_to_the_same_response(server: ScriptedServer, form: str) -> None:
    framing = "sse" if form == "sse" else "array"
    covered: set[str] = set()
    for seed in range(40):
        chunks = sequence(random.Random(seed))
        expected = said(openai_response(server, chunks))
        got = said(gemini_response(server, translated(chunks, framing), form))
        assert got == expected, seed
        covered |= {k for k in ("msg", "reasoning", "tool_calls") if expected[k]}
        covered |= {"cached"} if expected["usage"][3] else set()
    assert covered == {"msg", "reasoning", "tool_calls", "cached"}


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("reason", ["stop", "length", "content_filter"])
def test_each_finish_reason_reads_back(server: ScriptedServer, form: str, reason: str) -> None:
    chunks = [choice({"content": "x"}, model="m"), choice({}, reason)]
    framing = "sse" if form == "sse" else "array"
    expected = said(openai_response(server, chunks))
    assert said(gemini_response(server, translated(chunks, framing), form)) == expected


@pytest.mark.parametrize("form", FORMS)
def test_hidden_thinking_reads_back_without_reasoning(server: ScriptedServer, form: str) -> None:
    chunks = [choice({"reasoning_content": "hmm"}), choice({"content": "ok"}, "stop")]
    framing = "sse" if form == "sse" else "array"
    got = gemini_response(server, translated(chunks, framing, thinking=False), form)
    assert got.is_success and got.msg == "ok" and not got.reasoning_text


@pytest.mark.parametrize("form", FORMS)
def test_an_undecodable_call_reads_back_as_a_failure(server: ScriptedServer, form: str) -> None:
    """The client sees the text before it, then the error: never a call with ``{}``."""
    call = {"index": 0, "id": "c", "function": {"name": "write", "arguments": '{"a": '}}
    chunks = [choice({"content": "Writing."}), choice({"tool_calls": [call]}, "tool_calls")]
    framing = "sse" if form == "sse" else "array"
    got = gemini_response(server, translated(chunks, framing), form)
    assert not got.is_success
    assert MALFORMED in (got.err or "")
    assert not got.tool_calls
    if form != "blocking-array":  # a blocking client gets the error, not the text
        assert got.msg == "Writing."


@pytest.mark.parametrize("form", FORMS)
def test_an_error_after_output_reads_back_as_a_failure(server: ScriptedServer, form: str) -> None:
    framing = "sse" if form == "sse" else "array"
    stream = GeminiStream("m", framing=framing)
    pieces = [stream.start(), stream.text_delta("partial"), stream.error_event(502, MALFORMED)]
    got = gemini_response(server, [p for p in pieces if p], form)
    assert not got.is_success and MALFORMED in (got.err or "")


def test_the_whole_body_reads_back_to_the_same_response(server: ScriptedServer) -> None:
    """`GeminiAnswer.body` of the settled Response, as a ``generateContent`` body."""
    backend = Gemini(server.url, api_key="test-key", model="gemini-test")
    for seed in range(40):
        chunks = sequence(random.Random(seed))
        upstream = openai_response(server, chunks)
        if not upstream.is_success:
            continue
        body = json.dumps(GeminiAnswer("req-model").body(upstream)).encode()
        server.push(Reply(200, {"Content-Type": "application/json"}, body))
        assert said(backend.chat_completion(HI)) == said(upstream), seed
