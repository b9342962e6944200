"""GeminiAnswer: a proxied Response as Gemini stream chunks, written by batches, or as one body.

`write` and `write_batch` over random upstream Chunk sequences (the ones every
face's answer is checked with, `test_proxy_answer_write`) must give the bytes
of the decoded-chunk path, however the chunks are cut into batches, in both
framings, with thinking shown or hidden, with and without a key to scrub.
`body` is one ``GenerateContentResponse`` of a settled Response from a real
OpenAI exchange (`ScriptedServer`).
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from typing import Any

import pytest

from llmchat import OpenAICommon
from llmchat.protocols import gemini
from llmchat.protocols.rejection import UndecodableArguments
from llmchat.protocols.translator import MALFORMED
from llmchat.proxy.faces.gemini.answer import GeminiAnswer
from llmchat.redact import Redactor
from llmchat.response import Response
from llmchat.testing import Reply, ScriptedServer

from ..test_proxy_answer_write import KEY, _batched, _run, chunk_sequence

HI = [{"role": "user", "content": "Hi"}]
ANSWERS = {
    "sse": lambda: GeminiAnswer("m"),
    "array": lambda: GeminiAnswer("m", framing="array"),
    "sse, thinking hidden": lambda: GeminiAnswer("m", thinking=False),
}


class _FixedUuid:
    hex = "0" * 32


@pytest.fixture(autouse=True)
def fixed_response_id(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gemini.uuid, "uuid4", _FixedUuid)


@pytest.mark.parametrize("face", sorted(ANSWERS))
@pytest.mark.parametrize("key", [False, True], ids=["no key", "key"])
def test_write_and_write_batch_give_the_bytes_of_the_decoded_chunk_path(
    face: str, key: bool
) -> None:
    redactor = Redactor.of([KEY] if key else [])
    errored = 0
    for seed in range(150):
        rng = random.Random(seed)
        chunks = chunk_sequence(rng)
        response_id = rng.choice([None, "chatcmpl-resp"])

        def made() -> GeminiAnswer:
            answer = ANSWERS[face]()
            answer.redactor = redactor
            return answer

        expected = _run(made(), chunks, response_id, fast=False)
        assert _run(made(), chunks, response_id, fast=True) == expected, seed
        every = list(range(1, len(chunks)))
        random_cuts = sorted(rng.sample(every, rng.randint(0, len(every))))
        for cuts in (every, [], random_cuts):
            assert _batched(made(), chunks, response_id, cuts) == expected, (seed, cuts)
        if key:
            assert KEY.encode() not in expected
        errored += b'{"error":' in expected
    assert errored  # unreadable calls and lone surrogates were covered


def test_the_stream_is_the_framing_asked_for() -> None:
    assert GeminiAnswer("m").stream().content_type == "text/event-stream"
    stream = GeminiAnswer("m", framing="array").stream()
    assert stream.content_type == "application/json"
    assert stream.start() == b"["
    with pytest.raises(ValueError, match="framing"):
        GeminiAnswer("m", framing="ndjson")


# -- whole bodies ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def server() -> Iterator[ScriptedServer]:
    srv = ScriptedServer()
    with srv:
        yield srv


def settled(
    server: ScriptedServer, message: dict[str, Any], finish: str, usage: dict[str, Any] | None
) -> Response:
    """The Response llmchat's OpenAI client makes of one chat completion body."""
    body: dict[str, Any] = {
        "id": "chatcmpl-9",
        "object": "chat.completion",
        "model": "up-model",
        "choices": [
            {"index": 0, "message": {"role": "assistant", **message}, "finish_reason": finish}
        ],
    }
    if usage is not None:
        body["usage"] = usage
    server.push(Reply(200, {"Content-Type": "application/json"}, json.dumps(body)))
    return OpenAICommon(server.url).chat_completion(HI)


CALL = {"id": "call_1", "type": "function", "function": {"name": "read", "arguments": '{"p": 1}'}}


def test_body_is_one_generate_content_response(server: ScriptedServer) -> None:
    usage = {
        "prompt_tokens": 20,
        "completion_tokens": 9,
        "total_tokens": 29,
        "prompt_tokens_details": {"cached_tokens": 16},
        "completion_tokens_details": {"reasoning_tokens": 5},
    }
    message = {"content": "Reading.", "reasoning_content": "plan", "tool_calls": [CALL]}
    response = settled(server, message, "tool_calls", usage)
    body = GeminiAnswer("req").body(response)
    assert body == {
        "candidates": [
            {
                "content": {
                    "parts": [
                        {"text": "plan", "thought": True},
                        {"text": "Reading."},
                        {"functionCall": {"name": "read", "args": {"p": 1}}},
                    ],
                    "role": "model",
                },
                "finishReason": "STOP",
                "index": 0,
            }
        ],
        "usageMetadata": {
            "promptTokenCount": 20,
            "candidatesTokenCount": 4,
            "totalTokenCount": 29,
            "cachedContentTokenCount": 16,
            "thoughtsTokenCount": 5,
        },
        "modelVersion": "up-model",
        "responseId": "chatcmpl-9",
    }
    hidden = GeminiAnswer("req", thinking=False).body(response)
    assert [p.get("thought") for p in hidden["candidates"][0]["content"]["parts"]] == [None, None]


def test_an_empty_answer_at_the_limit_is_a_content_without_parts(server: ScriptedServer) -> None:
    """As Gemini writes a turn that spent its budget thinking (the MAX_TOKENS capture)."""
    answer = GeminiAnswer("req")
    response = settled(server, {"content": ""}, "length", None)
    assert answer.complete(response)
    body = answer.body(response)
    assert body["candidates"] == [
        {"content": {"role": "model"}, "finishReason": "MAX_TOKENS", "index": 0}
    ]
    assert "usageMetadata" not in body


def test_a_content_filter_stop_is_an_answer(server: ScriptedServer) -> None:
    answer = GeminiAnswer("req")
    response = settled(server, {"content": "I can't"}, "content_filter", None)
    assert answer.complete(response)
    assert answer.body(response)["candidates"][0]["finishReason"] == "SAFETY"


def test_an_undecodable_call_is_refused_never_sent_with_empty_args(server: ScriptedServer) -> None:
    bad = {**CALL, "function": {"name": "read", "arguments": '{"p": '}}
    response = settled(server, {"content": "", "tool_calls": [bad]}, "tool_calls", None)
    answer = GeminiAnswer("req")
    failure = answer.refused(response)
    assert failure is not None and (failure.status, failure.message) == (502, MALFORMED)
    with pytest.raises(UndecodableArguments):
        answer.body(response)
