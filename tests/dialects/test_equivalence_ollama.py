"""One Ollama answer, two modes: the ``stream: false`` body and its NDJSON lines agree.

Each example generates one answer (text and reasoning pieces, whole tool calls
spread over lines, a ``done_reason`` or none, counts, an error line), serves it
over real sockets once as the whole body Ollama sends for ``stream: false`` and
once as the lines it streams (any framing, optionally cut at arbitrary byte
offsets), and compares everything a caller reads: the Response's fields and
what its chunks add up to. Both must also say what the answer says, so agreeing
on losing something fails too. Mirrors tests/test_equivalence.py.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from llmchat.backends.ollama import Ollama
from llmchat.chunk import Chunk
from llmchat.response import Response
from llmchat.testing import RecordedRequest, Reply, ScriptedServer, Write
from llmchat.testing.script import Framing, dumps

from ..support.ollama import HI, NDJSON

SETTLE_GUARD: Final = 10.0
REASONS: Final = ("stop", "length", None, "load", "weird")
Kind = Literal["chat", "text"]

_text = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=6)


@dataclass(frozen=True)
class Case:
    kind: Kind
    text: tuple[str, ...] = ()
    thinking: tuple[str, ...] = ()
    calls: tuple[tuple[str, dict[str, Any]], ...] = ()
    reason: str | None = "stop"
    counts: tuple[int, int] | None = (5, 3)
    cached: int | None = None
    error: str | None = None
    framing: Framing = "chunked"
    cuts: tuple[int, ...] | None = None

    def _answer(self, text: str, thinking: str, calls: Sequence[Any]) -> dict[str, Any]:
        if self.kind == "text":
            out: dict[str, Any] = {"response": text}
            if thinking:
                out["thinking"] = thinking
            return out
        message: dict[str, Any] = {"role": "assistant", "content": text}
        if thinking:
            message["thinking"] = thinking
        if calls:
            message["tool_calls"] = [{"function": {"name": n, "arguments": a}} for n, a in calls]
        return {"message": message}

    def _final(self) -> dict[str, Any]:
        out: dict[str, Any] = {"done": True}
        if self.reason is not None:
            out["done_reason"] = self.reason
        if self.counts is not None:
            out.update(prompt_eval_count=self.counts[0], eval_count=self.counts[1])
            out.update(total_duration=9_000, eval_duration=4_000)
        if self.cached is not None:
            out["prompt_eval_cached_count"] = self.cached
        return out

    def body(self) -> dict[str, Any]:
        body = {"model": "m-1", "created_at": "2025-01-01T00:00:00Z"}
        body.update(self._answer("".join(self.text), "".join(self.thinking), self.calls))
        if self.error is not None:
            return {**body, "done": False, "error": self.error}
        return {**body, **self._final()}

    def lines(self) -> list[dict[str, Any]]:
        top = {"model": "m-1", "created_at": "2025-01-01T00:00:00Z"}
        pieces = [self._answer(t, "", ()) for t in self.text]
        pieces += [self._answer("", t, ()) for t in self.thinking]
        pieces += [self._answer("", "", [c]) for c in self.calls]
        out = [{**top, **piece, "done": False} for piece in pieces]
        if self.error is not None:
            return [*out, {"error": self.error}]
        return [*out, {**top, **self._answer("", "", ()), **self._final()}]

    def stream_reply(self) -> Reply:
        data = [dumps(line).encode("utf-8") + b"\n" for line in self.lines()]
        if self.cuts is not None:
            body = b"".join(data)
            edges = [0, *sorted({c % len(body) for c in self.cuts} - {0}), len(body)]
            data = [body[a:b] for a, b in itertools.pairwise(edges) if b > a]
        return Reply(200, NDJSON, framing=self.framing, steps=[Write(d) for d in data])


@st.composite
def cases(draw: st.DrawFn, kind: Kind) -> Case:
    calls: tuple[tuple[str, dict[str, Any]], ...] = ()
    if kind == "chat":
        calls = tuple(
            draw(
                st.lists(
                    st.tuples(
                        st.sampled_from(["f", "get_weather"]),
                        st.dictionaries(
                            st.sampled_from(["a", "b"]), st.integers() | _text, max_size=2
                        ),
                    ),
                    max_size=3,
                )
            )
        )
    return Case(
        kind=kind,
        text=tuple(draw(st.lists(_text, max_size=5))),
        thinking=tuple(draw(st.lists(_text, max_size=3))),
        calls=calls,
        reason=draw(st.sampled_from(REASONS)),
        counts=draw(st.none() | st.tuples(st.integers(0, 999), st.integers(0, 999))),
        cached=draw(st.none() | st.integers(0, 99)),
        error=draw(st.none() | st.just("model runner crashed")),
        framing=draw(st.sampled_from(["chunked", "close", "length"])),
        cuts=draw(st.none() | st.tuples(*[st.integers(0, 10_000)] * 3)),
    )


def response_view(response: Response) -> dict[str, Any]:
    return {
        "is_success": response.is_success,
        "error_class": response.error_class,
        "err": response.err,
        "msg": response.msg,
        "reasoning_text": response.reasoning_text,
        "tool_calls": [(c.name, c.arguments, c.id) for c in response.tool_calls],
        "finish_reason": response.finish_reason,
        "provider_finish_reason": response.provider_finish_reason,
        "prompt_tokens": response.prompt_tokens,
        "completion_tokens": response.completion_tokens,
        "total_tokens": response.total_tokens,
        "cached_tokens": response.cached_tokens,
        "usage": response.usage,
        "model": response.model,
        "server_total_seconds": response.timing.server_total_seconds,
        "eval_seconds": response.timing.eval_seconds,
        "reasoning_parts": response.reasoning_parts,
    }


def chunk_view(chunks: Sequence[Chunk]) -> dict[str, Any]:
    usages = [c.usage for c in chunks if c.usage is not None]
    return {
        "content": "".join(c.content for c in chunks),
        "thinking": "".join(c.thinking or "" for c in chunks),
        "tool_calls": [call for c in chunks for call in c.tool_calls or ()],
        "finish_reasons": [c.finish_reason for c in chunks if c.finish_reason is not None],
        "usage": usages[-1] if usages else None,
    }


@pytest.fixture(scope="module")
def server() -> Iterator[ScriptedServer]:
    srv = ScriptedServer()
    with srv:
        yield srv


def serve_both(server: ScriptedServer, case: Case) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    blocking, streamed = Reply.json(case.body()), case.stream_reply()

    def script(request: RecordedRequest) -> Reply:
        return streamed if (request.json() or {}).get("stream") else blocking

    server.set_script(script)
    out = []
    with Ollama(server.root, model="m") as backend:
        for stream in (False, True):
            if case.kind == "chat":
                start = backend.chat_completion_stream if stream else backend.chat_completion
            else:
                start = backend.text_completion_stream if stream else backend.text_completion
            response = start(HI).wait(SETTLE_GUARD)
            assert response.is_done, "the stream never settled"
            out.append((response_view(response), chunk_view(list(response))))
    return out


def expected(case: Case) -> dict[str, Any]:
    """What the answer itself says."""
    counts = case.counts
    return {
        "msg": "".join(case.text),
        "reasoning_text": "".join(case.thinking) or None,
        "tool_calls": [(n, a, f"call_{i}") for i, (n, a) in enumerate(case.calls)],
        "prompt_tokens": None if counts is None or case.error else counts[0],
        "completion_tokens": None if counts is None or case.error else counts[1],
        "cached_tokens": None if case.error else case.cached,
        **({} if case.error else {"model": "m-1"}),
    }


def assert_equivalent(server: ScriptedServer, case: Case) -> None:
    (blocking, blocking_chunks), (stream, stream_chunks) = serve_both(server, case)
    if case.error is not None:  # an error line names no model; the body does
        blocking.pop("model"), stream.pop("model")
    problems = {k: (stream[k], blocking[k]) for k in blocking if stream[k] != blocking[k]}
    for mode, view in (("blocking", blocking), ("stream", stream)):
        for key, want in expected(case).items():
            if view[key] != want:
                problems[f"{mode} vs the answer: {key}"] = (view[key], want)
    if case.error is None:
        problems.update(
            {
                f"chunks.{k}": (stream_chunks[k], blocking_chunks[k])
                for k in blocking_chunks
                if stream_chunks[k] != blocking_chunks[k]
            }
        )
    assert not problems, problems


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=cases("chat"))
def test_any_chat_answer_agrees_in_both_modes(server: ScriptedServer, case: Case) -> None:
    assert_equivalent(server, case)


@settings(max_examples=75, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=cases("text"))
def test_any_generate_answer_agrees_in_both_modes(server: ScriptedServer, case: Case) -> None:
    assert_equivalent(server, case)


def test_the_outcomes_follow_the_reason(server: ScriptedServer) -> None:
    """A few fixed cases, so the property above is seen to test real verdicts."""
    for reason, success, err in [
        ("stop", True, None),
        ("length", False, "Hit max tokens"),
        ("weird", False, "Unknown finish reason: weird"),
    ]:
        (blocking, _), (stream, _) = serve_both(server, Case("chat", text=("a",), reason=reason))
        assert (
            (blocking["is_success"], blocking["err"])
            == (success, err)
            == (stream["is_success"], stream["err"])
        )
    (blocking, _), (stream, _) = serve_both(server, Case("chat", calls=(("f", {}),)))
    assert blocking["finish_reason"] == stream["finish_reason"] == "tool_calls"
    (blocking, _), (stream, _) = serve_both(server, Case("chat", reason="load"))
    assert not blocking["is_success"] and blocking["err"] == stream["err"]
    assert "only loaded the model" in (blocking["err"] or "")
