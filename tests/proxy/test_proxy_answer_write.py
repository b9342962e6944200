"""`Answer.write`: an upstream Chunk to a face's bytes, the common chunk without a decoded dict.

`write` sends a text-or-reasoning chunk to `CleanStream.text_delta` as its
parts and every other chunk the way the proxy always did,
``stream.delta(answer.chunk(chunk, id))``. Random Chunk sequences run both
ways through each face's answer must give the same bytes: with and without an
upstream key to scrub (split across deltas, so the windows hold tails), with
thinking shown or hidden, lone surrogates, tool calls (readable or not), usage
and finish reasons.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable

import pytest

from llmchat.chunk import Chunk
from llmchat.proxy.answers import Answer
from llmchat.proxy.faces.anthropic.answer import AnthropicAnswer
from llmchat.proxy.faces.ollama.answer import OllamaAnswer
from llmchat.proxy.faces.responses.routes import ResponsesAnswer
from llmchat.redact import Redactor
from llmchat.tools import ToolCall, decoded_call

from ..support.fixed_ids import fix_ids, restart_ids

KEY = "sk-proj-Zx9Qw7bench"
SEQUENCES = 150
PIECES = (
    "Hello",
    " wörld",
    "",
    "日本",
    'a "quote"',
    "\n\t\x00",
    "sk-",
    "proj-Zx9",
    "Qw7bench",
    KEY,
    " sk-p",
    "bad \ud800 text",
    "🙂",
)


@pytest.fixture(autouse=True)
def counted_ids(monkeypatch: pytest.MonkeyPatch) -> None:
    fix_ids(monkeypatch)


def _answers() -> dict[str, Callable[[], Answer]]:
    thinking = {"type": "enabled", "budget_tokens": 2048}
    return {
        "anthropic": lambda: AnthropicAnswer({"model": "m", "max_tokens": 9, "thinking": thinking}),
        "anthropic, thinking hidden": lambda: AnthropicAnswer({"model": "m", "max_tokens": 9}),
        "ollama chat": lambda: OllamaAnswer({"model": "m"}, "chat"),
        "ollama generate, no think": lambda: OllamaAnswer(
            {"model": "m", "think": False}, "generate"
        ),
        "responses": lambda: ResponsesAnswer({"model": "m"}),
    }


def _text(rng: random.Random) -> str:
    return "".join(rng.choice(PIECES) for _ in range(rng.randint(0, 3)))


def _call(rng: random.Random, index: int) -> ToolCall:
    arguments = rng.choice(['{"a": 1}', '{"k": "' + KEY + '"}', "not json", "{}"])
    return decoded_call(rng.choice(["f", "search"]), arguments, f"call_{index}")


def chunk_sequence(rng: random.Random) -> list[Chunk]:
    """Upstream Chunks as a Response yields them; the last may be final."""
    out = []
    for index in range(rng.randint(1, 12)):
        kind = rng.random()
        model = rng.choice([None, None, "up", "up-" + KEY, "m\ud800", ""])
        raw = {"id": "chatcmpl-raw"} if rng.random() < 0.3 else None
        if kind < 0.45:
            out.append(Chunk(_text(rng), model=model, raw=raw))
        elif kind < 0.65:
            out.append(Chunk("", model=model, thinking=_text(rng) or None, raw=raw))
        elif kind < 0.75:
            out.append(Chunk(_text(rng), model=model, thinking=_text(rng), raw=raw))
        elif kind < 0.82:
            out.append(Chunk("", tool_calls=[_call(rng, index)]))
        elif kind < 0.9:
            usage = {"prompt_tokens": rng.randint(1, 40), "completion_tokens": 3}
            out.append(Chunk("", usage=usage, cached_tokens=rng.choice([None, 2])))
        else:
            out.append(Chunk(_text(rng), model=model))
    if rng.random() < 0.7:
        reason = rng.choice(["stop", "length", "tool_calls"])
        out.append(Chunk(_text(rng), is_final=True, finish_reason=reason))
    return out


def _run(answer: Answer, chunks: list[Chunk], response_id: str | None, fast: bool) -> bytes:
    restart_ids()
    stream = answer.stream()
    if isinstance(answer, OllamaAnswer):
        ticks = itertools.count()
        stream._inner._now = lambda: f"2025-01-01T00:00:00.{next(ticks):06d}Z"
    out = stream.start()
    for chunk in chunks:
        if fast:
            out += answer.write(stream, chunk, response_id)
        else:
            out += stream.delta(answer.chunk(chunk, response_id))
        if stream.errored:
            return out
    return out + stream.finish(None, 5, 7)


@pytest.mark.parametrize("face", sorted(_answers()))
@pytest.mark.parametrize("key", [False, True], ids=["no key", "key"])
def test_write_gives_the_bytes_of_the_decoded_chunk_path(face: str, key: bool) -> None:
    make = _answers()[face]
    redactor = Redactor.of([KEY] if key else [])
    held = 0
    for seed in range(SEQUENCES):
        rng = random.Random(seed)
        chunks = chunk_sequence(rng)
        response_id = rng.choice([None, "chatcmpl-resp"])
        answers = make(), make()
        for answer in answers:
            answer.redactor = redactor
        expected = _run(answers[0], chunks, response_id, fast=False)
        got = _run(answers[1], chunks, response_id, fast=True)
        assert got == expected, (face, seed)
        if key:
            assert KEY.encode() not in got
            held += sum(1 for c in chunks if c.content.endswith(("sk-", " sk-p")))
    assert not key or held  # the windows were made to hold tails


def test_write_takes_the_response_id_else_the_raw_one() -> None:
    answer = AnthropicAnswer({"model": "m", "max_tokens": 9})
    for response_id, expected in ((None, b'"msg_chatcmpl-raw"'), ("r1", b'"msg_r1"')):
        stream = answer.stream()
        data = answer.write(stream, Chunk("hi", raw={"id": "chatcmpl-raw"}), response_id)
        assert expected in data


def _batched(
    answer: Answer, chunks: list[Chunk], response_id: str | None, cuts: list[int]
) -> bytes:
    """`_run`'s fast path with the chunks cut into batches at `cuts`, one `write_batch` each."""
    restart_ids()
    stream = answer.stream()
    if isinstance(answer, OllamaAnswer):
        ticks = itertools.count()
        stream._inner._now = lambda: f"2025-01-01T00:00:00.{next(ticks):06d}Z"
    out = stream.start()
    for start, end in itertools.pairwise([0, *cuts, len(chunks)]):
        if start < end:
            out += answer.write_batch(stream, chunks[start:end], response_id)
        if stream.errored:
            return out
    return out + stream.finish(None, 5, 7)


@pytest.mark.parametrize("face", sorted(_answers()))
@pytest.mark.parametrize("key", [False, True], ids=["no key", "key"])
def test_write_batch_gives_the_bytes_of_one_write_per_chunk(face: str, key: bool) -> None:
    """However the chunks are grouped into batches (one each, all in one, random cuts),
    a stream written by batches is the stream written chunk by chunk."""
    make = _answers()[face]
    redactor = Redactor.of([KEY] if key else [])
    for seed in range(SEQUENCES):
        rng = random.Random(seed)
        chunks = chunk_sequence(rng)
        response_id = rng.choice([None, "chatcmpl-resp"])
        answer = make()
        answer.redactor = redactor
        expected = _run(answer, chunks, response_id, fast=True)
        every = list(range(1, len(chunks)))
        random_cuts = sorted(rng.sample(every, rng.randint(0, len(every))))
        for cuts in (every, [], random_cuts):
            answer = make()
            answer.redactor = redactor
            assert _batched(answer, chunks, response_id, cuts) == expected, (face, seed, cuts)
