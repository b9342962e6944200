"""Every Ollama wire capture through the real `Ollama` backend, over real sockets.

`/work/shared/captures/ollama/` holds recorded ``/api/chat`` and
``/api/generate`` answers (PROVENANCE.md says where each came from). Files
named ``*_chat_*`` go to `chat_completion[_stream]`, ``*_generate_*`` to
`text_completion[_stream]` (the generate dialect). Each is read two ways:

- blocking: a ``.json`` file is served byte for byte as the body; an
  ``.ndjson`` stream as the one whole body Ollama would send for it (content
  and reasoning joined, tool calls together, the last line's counts, its
  error kept), built by `whole_body` without the library;
- streamed: an ``.ndjson`` file byte for byte as ``application/x-ndjson``, one
  write per line, chunked and close-delimited; a ``.json`` file compacted to
  one NDJSON line.

The two pretty-printed ``docs_chat_stream_tool_call_{chunk,final}.json`` are
two lines of one documented stream: each alone, and joined as that stream.
`EXPECTED` (``fixtures/captures_expected/ollama.json``) is what reading each
file says the Response must be; the texts are also rebuilt from the file
without the library (`wire_texts`)."""

from __future__ import annotations

import json
from functools import cache
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from llmchat.backends.ollama import Ollama
from llmchat.dialects.ollama import OllamaChat, OllamaGenerate
from llmchat.response import Response
from llmchat.testing import Reply, ScriptedServer
from llmchat.testing.script import Framing, dumps

from ..support.ollama import HI, ndjson_reply, run_pieces
from ..support.paths import CAPTURES_DIR
from . import support as shared

CAPTURES = CAPTURES_DIR / "ollama"
SETTLE_GUARD = 60.0  # a hang guard only: every stream here ends on done, an error or EOF
DOCS_PAIR = ("docs_chat_stream_tool_call_chunk.json", "docs_chat_stream_tool_call_final.json")


EXPECTED = shared.load_expected("ollama")


# -- the files --------------------------------------------------------------------


def params(names: list[str]) -> list[Any]:
    if not CAPTURES.is_dir():
        return [pytest.param(None, marks=pytest.mark.skip(reason=f"{CAPTURES} absent"))]
    return names


def kind(name: str) -> str:
    return "text" if "_generate_" in name else "chat"


@cache
def lines(name: str) -> list[dict[str, Any]]:
    """The JSON objects of a capture, in order (a ``.json`` file is one)."""
    text = (CAPTURES / name).read_text(encoding="utf-8")
    if name.endswith(".json"):
        return [json.loads(text)]
    return [json.loads(line) for line in text.split("\n") if line.strip()]


def stream_bytes(name: str) -> bytes:
    if name.endswith(".ndjson"):
        return (CAPTURES / name).read_bytes()
    return b"".join(dumps(line).encode("utf-8") + b"\n" for line in lines(name))


def whole_body(name: str) -> bytes:
    """The one body Ollama sends for the same answer with ``stream: false``."""
    if name.endswith(".json"):
        return (CAPTURES / name).read_bytes()
    objs = lines(name)
    text, thinking = wire_texts(name)
    body = {k: v for k, v in objs[-1].items() if k not in ("message", "response")}
    if "model" not in body:
        body["model"] = objs[0].get("model")
    if "error" in body:
        body["done"] = False
    if kind(name) == "text":
        body["response"] = text
        if thinking:
            body["thinking"] = thinking
    else:
        message: dict[str, Any] = {"role": "assistant", "content": text}
        if thinking:
            message["thinking"] = thinking
        body["message"] = message
    return dumps(body).encode("utf-8")


@cache
def wire_texts(name: str) -> tuple[str, str]:
    """`(answer, reasoning)` read from the file without the library, up to the done line."""
    answer: list[str] = []
    reasoning: list[str] = []
    for obj in lines(name):
        source = obj if kind(name) == "text" else obj.get("message") or {}
        answer.append(source.get("response" if kind(name) == "text" else "content") or "")
        reasoning.append(source.get("thinking") or "")
        if obj.get("done") is True:
            break
    return "".join(answer), "".join(reasoning)


# -- serving ---------------------------------------------------------------------


def run_blocking(server: ScriptedServer, name: str) -> Response:
    server.push(Reply(200, {"Content-Type": "application/json; charset=utf-8"}, whole_body(name)))
    backend = Ollama(server.root, model="m")
    if kind(name) == "text":
        return backend.text_completion(HI)
    return backend.chat_completion(HI)


def run_stream(server: ScriptedServer, name: str, framing: Framing = "chunked") -> Response:
    data = stream_bytes(name)
    pieces = [line for line in data.splitlines(keepends=True) if line]
    server.push(ndjson_reply(pieces, framing))
    backend = Ollama(server.root, model="m")
    start = (
        backend.text_completion_stream if kind(name) == "text" else backend.chat_completion_stream
    )
    response = start(HI).wait(SETTLE_GUARD)
    assert response.is_done, f"{name}: the stream never settled"
    return response


FIELDS = shared.snapshot_fields("ollama")
"""The Response fields an Ollama capture decides."""


def check(name: str, got: dict[str, Any], *, streamed: bool) -> None:
    want = EXPECTED[name]
    wire_msg, wire_reasoning = wire_texts(name)
    err = want.stream_err if streamed and want.stream_err is not None else want.err
    total = (
        None
        if want.prompt_tokens is None or want.completion_tokens is None
        else want.prompt_tokens + want.completion_tokens
    )
    expected = {
        "is_success": want.is_success,
        "error_class": None if want.is_success else "response",
        "err": err,
        "tool_calls": list(want.tool_calls),
        "finish_reason": want.finish_reason,
        "provider_finish_reason": want.provider_finish_reason,
        "prompt_tokens": want.prompt_tokens,
        "completion_tokens": want.completion_tokens,
        "total_tokens": total,
        "model": want.model,
        "server_total_seconds": want.server_total_seconds,
        "reasoning_text": want.reasoning_text,
    }
    wrong = shared.mismatches(expected, got)
    msg = want.msg
    if isinstance(msg, shared.Long):
        good = msg.matches(got["msg"], wire_msg)
    else:
        good = got["msg"] == msg == wire_msg
    if not good:
        wrong["msg"] = (msg, got["msg"])
    if want.is_success:
        parts = [{"dialect": "ollama", "thinking": wire_reasoning}] if wire_reasoning else None
        if got["reasoning_parts"] != parts:
            wrong["reasoning_parts"] = (parts, got["reasoning_parts"])
    assert not wrong, f"{name} ({'streamed' if streamed else 'blocking'}): {wrong}"


# -- the tests --------------------------------------------------------------------


def test_every_capture_has_an_expectation() -> None:
    if not CAPTURES.is_dir():
        pytest.skip(f"{CAPTURES} absent")
    assert set(EXPECTED) == set(shared.capture_names(CAPTURES))


@pytest.mark.parametrize("name", params(shared.capture_names(CAPTURES)))
def test_capture_blocking(server: ScriptedServer, name: str) -> None:
    check(name, shared.snapshot(run_blocking(server, name), FIELDS), streamed=False)


@pytest.mark.parametrize("name", params(shared.capture_names(CAPTURES)))
def test_capture_streamed(server: ScriptedServer, name: str) -> None:
    response = run_stream(server, name)
    check(name, shared.snapshot(response, FIELDS), streamed=True)
    shared.assert_chunks_replay(response)


@pytest.mark.parametrize("name", params(shared.capture_names(CAPTURES)))
def test_chunked_and_close_delimited_agree(server: ScriptedServer, name: str) -> None:
    close = shared.snapshot(run_stream(server, name, "close"), FIELDS)
    assert close == shared.snapshot(run_stream(server, name), FIELDS)


def test_the_documented_tool_call_stream_as_one(server: ScriptedServer) -> None:
    """The docs' chunk and final objects are two lines of one stream: a tool call, done."""
    if not CAPTURES.is_dir():
        pytest.skip(f"{CAPTURES} absent")
    body = b"".join(stream_bytes(name) for name in DOCS_PAIR)
    server.push(ndjson_reply(body.splitlines(keepends=True)))
    response = Ollama(server.root, model="m").chat_completion_stream(HI).wait(SETTLE_GUARD)
    assert response.is_success and response.finish_reason == "tool_calls"
    assert response.provider_finish_reason == "stop"
    assert [(c.name, c.arguments, c.id) for c in response.tool_calls] == [
        ("get_weather", {"city": "Tokyo"}, "call_0")
    ]
    assert (response.prompt_tokens, response.completion_tokens, response.total_tokens) == (
        169,
        15,
        184,
    )
    assert response.timing.eval_seconds == pytest.approx(0.115959084)
    assert response.timing.load_seconds == pytest.approx(0.041295167)


STREAMS = shared.capture_names(CAPTURES)


@pytest.mark.skipif(not STREAMS, reason=f"{CAPTURES} absent")
@given(st.data())
def test_any_split_of_any_capture_gives_the_same_chunks(data: st.DataObject) -> None:
    name = data.draw(st.sampled_from(STREAMS))
    body = stream_bytes(name)
    cuts = sorted(data.draw(st.sets(st.integers(1, len(body) - 1), max_size=16)))
    pieces = [body[a:b] for a, b in zip([0, *cuts], [*cuts, len(body)], strict=True)]

    def dialect() -> OllamaChat:
        return OllamaGenerate() if kind(name) == "text" else OllamaChat()

    whole, acc_whole = run_pieces([body], dialect())
    split, acc_split = run_pieces(pieces, dialect())
    assert split == whole
    assert (acc_split.finish_reason, acc_split.error, acc_split.done) == (
        acc_whole.finish_reason,
        acc_whole.error,
        acc_whole.done,
    )
