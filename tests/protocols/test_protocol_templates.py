"""The translators' pre-encoded delta events against the dict-encoding translators they replaced.

Random chunk sequences (text, reasoning, both, unicode and control characters,
tool calls, usage, model changes, finish reasons, odd shapes, a lone surrogate)
run through each translator and through its reference (`translator_reference`:
every event a dict encoded by `wire_json.encode_data`, the common chunk taken
by `_choice`). The bytes must be equal, the usage counts too; every event
written must be the canonical encoding of what it parses to; and `text_delta`,
given a common chunk's parts, must write what `delta` writes for the chunk.
"""

from __future__ import annotations

import itertools
import json
import random
from collections.abc import Callable
from typing import Any

import pytest

from llmchat import wire_json
from llmchat.protocols.anthropic import AnthropicStream
from llmchat.protocols.chunk_fields import reasoning_text
from llmchat.protocols.ollama import OllamaStream
from llmchat.protocols.responses import ResponsesStream
from llmchat.protocols.responses_shape import SUMMARY
from llmchat.protocols.translator import StreamTranslator

from ..support.fixed_ids import fix_ids, restart_ids
from .translator_reference import (
    ReferenceAnthropic,
    ReferenceOllama,
    ReferenceResponses,
    chunk_sequence,
)

SEQUENCES = 250
SURROGATE_CHUNK = {"choices": [{"index": 0, "delta": {"content": "bad \ud800"}}]}


@pytest.fixture(autouse=True)
def counted_ids(monkeypatch: pytest.MonkeyPatch) -> None:
    fix_ids(monkeypatch)


def _clock(stream: OllamaStream) -> OllamaStream:
    ticks = itertools.count()
    stream._now = lambda: f"2025-01-01T00:00:00.{next(ticks):06d}Z"  # type: ignore[method-assign]
    return stream


FACES: dict[str, tuple[Callable[[], StreamTranslator], Callable[[], StreamTranslator]]] = {
    "anthropic": (
        lambda: AnthropicStream("m", max_tokens=8),
        lambda: ReferenceAnthropic("m", max_tokens=8),
    ),
    "ollama chat": (lambda: _clock(OllamaStream("m")), lambda: _clock(ReferenceOllama("m"))),
    "ollama generate": (
        lambda: _clock(OllamaStream("m", "generate")),
        lambda: _clock(ReferenceOllama("m", "generate")),
    ),
    "responses": (
        lambda: ResponsesStream({"model": "m"}, response_id="resp_1", created_at=1),
        lambda: ReferenceResponses({"model": "m"}, response_id="resp_1", created_at=1),
    ),
    "responses summary": (
        lambda: ResponsesStream({"model": "m", SUMMARY: True}, response_id="r", created_at=1),
        lambda: ReferenceResponses({"model": "m", SUMMARY: True}, response_id="r", created_at=1),
    ),
}


def _sequence(seed: int) -> list[Any]:
    rng = random.Random(seed)
    chunks = chunk_sequence(rng)
    if rng.random() < 0.05:
        chunks.insert(rng.randint(0, len(chunks)), SURROGATE_CHUNK)
    return chunks


def _run(stream: StreamTranslator, chunks: list[Any], send: Callable[..., bytes]) -> bytes:
    restart_ids()
    out = stream.start()
    for chunk in chunks:
        out += send(stream, chunk)
    return out + stream.finish()  # type: ignore[attr-defined]


def _outcome(stream: StreamTranslator, chunks: list[Any], send: Callable[..., bytes]) -> Any:
    """`_run`'s bytes, or the type of what it raised: a Responses stream cannot put a lone
    surrogate it was given into its failed response (the proxy's `CleanStream` never gives one)."""
    try:
        return _run(stream, chunks, send)
    except ValueError as exc:
        return type(exc)


def _by_delta(stream: StreamTranslator, chunk: Any) -> bytes:
    return stream.delta(chunk)


def _by_parts(stream: StreamTranslator, chunk: Any) -> bytes:
    """`text_delta` for a common chunk (as the proxy sends it), `delta` for the rest."""
    choices = chunk.get("choices")
    if chunk.get("usage") is not None or not isinstance(choices, list) or len(choices) > 1:
        return stream.delta(chunk)
    choice = choices[0] if choices else {"delta": {}}
    delta = choice.get("delta")
    if choice.get("finish_reason") is not None or not isinstance(delta, dict):
        return stream.delta(chunk)
    if delta.get("tool_calls") is not None:
        return stream.delta(chunk)
    content = delta.get("content")
    model, chunk_id = chunk.get("model"), chunk.get("id")
    return stream.text_delta(
        content if isinstance(content, str) else "",
        reasoning_text(delta),
        model if isinstance(model, str) and model else None,
        chunk_id if isinstance(chunk_id, str) and chunk_id else None,
    )


def _frames(face: str, data: bytes) -> list[bytes]:
    """Each event's JSON: an SSE ``data:`` line, or an NDJSON line."""
    if face.startswith("ollama"):
        return data.splitlines()
    frames = []
    for frame in data.split(b"\n\n")[:-1]:
        event, body = frame.split(b"\n")
        assert event.startswith(b"event: ") and body.startswith(b"data: ")
        frames.append(body[len(b"data: ") :])
    return frames


@pytest.mark.parametrize("face", sorted(FACES))
def test_templates_write_what_the_dict_encoding_wrote(face: str) -> None:
    new, reference = FACES[face]
    for seed in range(SEQUENCES):
        chunks = _sequence(seed)
        expected_stream = reference()
        expected = _outcome(expected_stream, chunks, _by_delta)
        for send in (_by_delta, _by_parts):
            stream = new()
            got = _outcome(stream, chunks, send)
            assert got == expected, (face, seed, send.__name__)
            assert stream.usage() == expected_stream.usage(), (face, seed)
            assert stream.errored == expected_stream.errored


@pytest.mark.parametrize("face", sorted(FACES))
def test_every_event_is_the_canonical_encoding_of_what_it_says(face: str) -> None:
    new, _ = FACES[face]
    seen_text = seen_error = False
    for seed in range(SEQUENCES):
        stream = new()
        data = _outcome(stream, _sequence(seed), _by_parts)
        if not isinstance(data, bytes):
            continue
        for frame in _frames(face, data):
            parsed = json.loads(frame)
            assert wire_json.encode_data(parsed) == frame
            seen_text = seen_text or "\\u0000" in frame.decode()
            seen_error = seen_error or stream.errored
    assert seen_text and seen_error  # control characters and a failed stream were covered


@pytest.mark.parametrize("face", sorted(FACES))
def test_text_delta_of_nothing_still_notes_the_model_and_id(face: str) -> None:
    new, _ = FACES[face]
    by_parts = _run(new(), [("", "", "named", "chatcmpl-z"), ("hi",)], _parts)
    chunks = [
        {"id": "chatcmpl-z", "model": "named", "choices": []},
        {"choices": [{"index": 0, "delta": {"content": "hi"}}]},
    ]
    assert by_parts == _run(new(), chunks, _by_delta)
    if not face.startswith("responses"):  # a Response names the model its request named
        assert b'"named"' in by_parts
    if face == "anthropic":
        assert b'"msg_chatcmpl-z"' in by_parts


def _parts(stream: StreamTranslator, parts: tuple[Any, ...]) -> bytes:
    return stream.text_delta(*parts)


def test_text_delta_refuses_what_is_not_text() -> None:
    stream = AnthropicStream("m")
    with pytest.raises(TypeError, match="content"):
        stream.text_delta(None)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="reasoning"):
        stream.text_delta("a", 3)  # type: ignore[arg-type]
