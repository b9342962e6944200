"""One reply, two modes: a blocking body and its SSE stream must give the same Response.

Each example generates one reply, serves it over real sockets (the loopback
`ScriptedServer`) once as a blocking body (``chat.completion`` or
``text_completion``) and once as the equivalent stream (``chat.completion.chunk``
deltas or ``choices[0].text`` pieces, then a ``choices: []`` usage event, then
``[DONE]``), and compares everything a caller reads. Only the public API is
used, so the file runs unchanged against any core.

What "equivalent" means, by the spec (``/work/shared/specs/llm-chat-openaicommon.txt``:
STREAM TERMINATION CONTRACT, "Correcting a provider's finish reason"):

- The blocking message holds the whole reply: text, reasoning (in the same
  spelling the stream uses: ``reasoning_content``, ``reasoning``, or a list
  ``content`` of ``thinking`` and ``text`` parts), refusal, and every tool call
  whole in ``message.tool_calls``; the stream carries the same pieces as deltas,
  tool calls in one of the assembly styles the library accepts (by index, by id
  without index, by position, whole in one delta), arguments cut anywhere.
- Top-level ``citations`` are on the body; in the stream on every event, on the
  first, or on the finish event (never only after it: after the finish chunk
  only usage and model count).
- The usage block is on the body; in the stream it is the ``choices: []`` event
  after the finish chunk, as ``stream_options.include_usage`` sends it.
- An in-band ``error`` object is on the body (top level or on the choice); in
  the stream it is an event of its own after the content and before the finish
  chunk. Such replies carry no tool calls (where a failed stream's half-made
  calls should go is not what this file tests).

Chunks are compared as a caller who iterates reads them (`chunk_view`): the
text, reasoning and refusal they add up to, every tool call (each lands whole on
exactly one chunk), the finish reason they carry, and the last usage and
citations any chunk carried. A stream cannot hold its usage on the chunk that
carries the finish reason (the usage frame comes after it, and that chunk is
published when it arrives), so "the final Chunk's usage" is read as the last
usage a chunk carried. Chunks are not compared for replies with an in-band error:
whether a failed blocking body publishes its one chunk is not settled by the spec.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from llmchat import OpenAICommon
from llmchat.chunk import Chunk
from llmchat.response import Response
from llmchat.templates import ChatML
from llmchat.testing import RecordedRequest, Reply, ScriptedServer, Write
from llmchat.testing.script import Framing, dumps

HI: Final = [{"role": "user", "content": "Hi"}]
SETTLE_GUARD: Final = 10.0  # a hang guard only: every stream here ends on [DONE]
FINISH_REASONS: Final = ("stop", "tool_calls", "length", "content_filter", "eos", None)
REASONING_STYLES: Final = ("reasoning_content", "reasoning", "list")
CALL_STYLES: Final = ("index", "id", "position", "whole")

Kind = Literal["chat", "text"]


# -- the generated reply ---------------------------------------------------------------


@dataclass(frozen=True)
class Call:
    """One tool call: whole for the body, `pieces` (joined: `arguments`) for the stream."""

    id: str
    name: str
    pieces: tuple[str, ...]

    @property
    def arguments(self) -> str:
        return "".join(self.pieces)


@dataclass(frozen=True)
class Case:
    """One reply, as data; `body()` and `events()` are its two wire forms."""

    kind: Kind
    text: tuple[str, ...] = ()
    reasoning_style: str = "reasoning_content"
    reasoning: tuple[str, ...] = ()
    nested_thinking: bool = False
    """In the list spelling, each ``thinking`` value is a list of text parts (Mistral's)."""
    refusal: tuple[str, ...] = ()
    calls: tuple[Call, ...] = ()
    call_style: str = "index"
    call_order: tuple[int, ...] = ()
    """For the index and id styles: which call each argument fragment after the heads
    belongs to, in stream order (each call's own fragments stay in order)."""
    finish: str | None = "stop"
    usage: Mapping[str, Any] | None = None
    citations: tuple[str, ...] | None = None
    citations_at: str = "every"
    error: tuple[str, Mapping[str, Any]] | None = None
    """``("top" | "choice", error object)``."""
    model: str | None = "m-1"
    completion_id: str | None = "cmpl-1"
    role_delta: bool = True
    framing: Framing = "chunked"
    cuts: tuple[int, ...] | None = None
    """Byte offsets to cut the whole SSE body at; None: one write per event."""
    map_eos: bool = False
    """Serve it to a backend whose `_reconcile_finish_reason` maps ``eos`` to ``stop``."""

    # -- the blocking body ------------------------------------------------------

    def body(self) -> dict[str, Any]:
        choice: dict[str, Any] = {"index": 0}
        if self.kind == "text":
            choice["text"] = "".join(self.text)
        else:
            choice["message"] = self._message()
        choice["finish_reason"] = self.finish
        if self.error is not None and self.error[0] == "choice":
            choice["error"] = dict(self.error[1])
        body = self._top("chat.completion" if self.kind == "chat" else "text_completion")
        body["choices"] = [choice]
        if self.usage is not None:
            body["usage"] = dict(self.usage)
        if self.citations is not None:
            body["citations"] = list(self.citations)
        if self.error is not None and self.error[0] == "top":
            body["error"] = dict(self.error[1])
        return body

    def _message(self) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant"}
        text = "".join(self.text)
        if self.reasoning and self.reasoning_style == "list":
            message["content"] = [self._thinking(p) for p in self.reasoning] + [
                {"type": "text", "text": p} for p in self.text
            ]
        else:
            message["content"] = text if text or not self.calls else None
            if self.reasoning:
                message[self.reasoning_style] = "".join(self.reasoning)
        if self.refusal:
            message["refusal"] = "".join(self.refusal)
        if self.calls:
            message["tool_calls"] = [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": call.arguments},
                }
                for call in self.calls
            ]
        return message

    def _thinking(self, text: str) -> dict[str, Any]:
        if self.nested_thinking:
            return {"type": "thinking", "thinking": [{"type": "text", "text": text}]}
        return {"type": "thinking", "thinking": text}

    def _top(self, obj: str) -> dict[str, Any]:
        top: dict[str, Any] = {}
        if self.completion_id is not None:
            top["id"] = self.completion_id
        top["object"] = obj
        if self.model is not None:
            top["model"] = self.model
        return top

    # -- the stream ---------------------------------------------------------------

    def events(self) -> list[dict[str, Any]]:
        """Every JSON event of the stream, in order ([DONE] not included)."""
        content = self._content_events() or [self._choice_event({"role": "assistant"})]
        finish = [] if self.finish is None else [self._choice_event({}, self.finish)]
        error = [] if self.error is None else [self._error_event()]
        if self.citations is not None:
            # Never only on the error event: whether an error frame's other members
            # count is not what this file tests.
            hosts = {
                "first": content[:1],
                "finish": (finish or content)[-1:],
                "every": [*content, *error, *finish],
            }[self.citations_at]
            for host in hosts:
                host["citations"] = list(self.citations)
        events = [*content, *error, *finish]
        if self.usage is not None:
            usage = self._top(self._chunk_object())
            usage["choices"] = []
            usage["usage"] = dict(self.usage)
            if self.citations is not None and self.citations_at == "every":
                usage["citations"] = list(self.citations)
            events.append(usage)
        return events

    def _chunk_object(self) -> str:
        return "chat.completion.chunk" if self.kind == "chat" else "text_completion"

    def _choice_event(self, delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        event = self._top(self._chunk_object())
        choice: dict[str, Any] = {"index": 0}
        if self.kind == "text":
            choice["text"] = delta.get("content", "")
        else:
            choice["delta"] = delta
        choice["finish_reason"] = finish
        event["choices"] = [choice]
        return event

    def _error_event(self) -> dict[str, Any]:
        assert self.error is not None
        where, error = self.error
        if where == "top":
            event = self._top(self._chunk_object())
            event["error"] = dict(error)
            return event
        event = self._choice_event({})
        event["choices"][0]["error"] = dict(error)
        return event

    def _content_events(self) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        if self.kind == "text":
            return [self._choice_event({"content": p}) for p in self.text]
        if self.role_delta:
            out.append(self._choice_event({"role": "assistant", "content": ""}))
        for piece in self.reasoning:
            if self.reasoning_style == "list":
                out.append(self._choice_event({"content": [self._thinking(piece)]}))
            else:
                out.append(self._choice_event({self.reasoning_style: piece}))
        for piece in self.text:
            if self.reasoning_style == "list" and self.reasoning:
                out.append(self._choice_event({"content": [{"type": "text", "text": piece}]}))
            else:
                out.append(self._choice_event({"content": piece}))
        out += [self._choice_event({"refusal": piece}) for piece in self.refusal]
        out += [self._choice_event({"tool_calls": f}) for f in self._call_deltas()]
        return out

    def _call_deltas(self) -> list[list[dict[str, Any]]]:
        """The `tool_calls` list of each delta that carries fragments."""
        calls = self.calls
        if not calls:
            return []
        if self.call_style == "whole":
            return [
                [_head(call, index=i, arguments=call.arguments)] for i, call in enumerate(calls)
            ]
        if self.call_style == "position":
            deltas = [[_head(call, index=None, arguments=call.pieces[0]) for call in calls]]
            for step in range(1, max(len(call.pieces) for call in calls)):
                deltas.append(
                    [
                        {"function": {"arguments": c.pieces[step] if step < len(c.pieces) else ""}}
                        for c in calls
                    ]
                )
            return deltas
        by_index = self.call_style == "index"
        deltas = [
            [_head(call, index=i if by_index else None, arguments=call.pieces[0])]
            for i, call in enumerate(calls)
        ]
        taken = [1] * len(calls)
        for i in self.call_order:
            call = calls[i]
            fragment: dict[str, Any] = {"function": {"arguments": call.pieces[taken[i]]}}
            fragment.update({"index": i} if by_index else {"id": call.id})
            taken[i] += 1
            deltas.append([fragment])
        return deltas

    def sse_reply(self) -> Reply:
        frames = b"".join(f"data: {dumps(e)}\n\n".encode() for e in self.events())
        frames += b"data: [DONE]\n\n"
        if self.cuts is None:
            return Reply.sse(self.events(), framing=self.framing)
        bounds = sorted({0, len(frames), *(c for c in self.cuts if 0 < c < len(frames))})
        steps = [Write(frames[a:b]) for a, b in itertools.pairwise(bounds)]
        return Reply(
            headers={"Content-Type": "text/event-stream"}, framing=self.framing, steps=steps
        )


def _head(call: Call, *, index: int | None, arguments: str) -> dict[str, Any]:
    head: dict[str, Any] = {} if index is None else {"index": index}
    head.update(
        {"id": call.id, "type": "function", "function": {"name": call.name, "arguments": arguments}}
    )
    return head


# -- strategies --------------------------------------------------------------------------

CHARS: Final = st.characters(exclude_categories=["Cs"])  # JSON text must be UTF-8
TEXT: Final = st.text(CHARS, max_size=6)
SOME_TEXT: Final = st.text(CHARS, min_size=1, max_size=6)
JSON_LEAF: Final = st.one_of(st.none(), st.booleans(), st.integers(-5, 5), TEXT)


@st.composite
def usages(draw: st.DrawFn) -> dict[str, Any]:
    prompt = draw(st.integers(0, 500))
    completion = draw(st.integers(0, 500))
    usage: dict[str, Any] = {"prompt_tokens": prompt, "completion_tokens": completion}
    if draw(st.booleans()):
        usage["total_tokens"] = prompt + completion
    if draw(st.booleans()):
        usage["prompt_tokens_details"] = {"cached_tokens": draw(st.integers(0, prompt))}
    if draw(st.booleans()):
        usage["completion_tokens_details"] = {"reasoning_tokens": draw(st.integers(0, completion))}
    return usage


@st.composite
def tool_calls(draw: st.DrawFn, style: str) -> tuple[Call, ...]:
    count = draw(st.integers(1, 3))
    calls = []
    for i in range(count):
        arguments = draw(st.dictionaries(st.text(max_size=4), JSON_LEAF, max_size=3))
        text = json.dumps(arguments, ensure_ascii=draw(st.booleans()))
        if style == "whole":
            pieces: tuple[str, ...] = (text,)
        else:
            cuts = draw(st.lists(st.integers(0, len(text)), max_size=4, unique=True))
            bounds = [0, *sorted(cuts), len(text)]
            pieces = tuple(text[a:b] for a, b in itertools.pairwise(bounds))
        name = draw(st.sampled_from(("get_weather", "search", "llm_version")))
        calls.append(Call(id=f"call_{i}_{draw(st.integers(0, 99))}", name=name, pieces=pieces))
    return tuple(calls)


@st.composite
def interleaving(draw: st.DrawFn, calls: tuple[Call, ...]) -> tuple[int, ...]:
    """An order of every call's fragments after its head, each call's own kept in order."""
    left = [len(call.pieces) - 1 for call in calls]
    order: list[int] = []
    while any(left):
        i = draw(st.sampled_from([i for i, n in enumerate(left) if n]))
        left[i] -= 1
        order.append(i)
    return tuple(order)


ALL_FEATURES: Final = frozenset(
    {"reasoning", "list", "refusal", "tools", "citations", "errors", "eos_map", "wire"}
)


@st.composite
def cases(draw: st.DrawFn, kind: Kind, features: frozenset[str] = ALL_FEATURES) -> Case:
    """A reply of `kind` using only the listed `features` (text, finish and usage always)."""
    chat = kind == "chat"
    styles = [s for s in REASONING_STYLES if s != "list" or "list" in features]
    reasoning_style = draw(st.sampled_from(styles))
    reasoning: tuple[str, ...] = ()
    if chat and ("reasoning" in features or "list" in features):
        reasoning = tuple(draw(st.lists(SOME_TEXT, max_size=3)))
    refusal: tuple[str, ...] = ()
    if chat and "refusal" in features:
        refusal = tuple(draw(st.lists(SOME_TEXT, max_size=2)))
    error: tuple[str, Mapping[str, Any]] | None = None
    if "errors" in features and draw(st.booleans()):
        message = draw(st.sampled_from(("Upstream overloaded", "rate limited", "boom")))
        error = (draw(st.sampled_from(("top", "choice"))), {"message": message, "code": 502})
    calls: tuple[Call, ...] = ()
    call_style = draw(st.sampled_from(CALL_STYLES))
    call_order: tuple[int, ...] = ()
    if chat and "tools" in features and error is None and draw(st.booleans()):
        calls = draw(tool_calls(call_style))
        call_order = draw(interleaving(calls))
    citations = None
    if "citations" in features and draw(st.booleans()):
        urls = st.sampled_from(("https://a.example/1", "https://b.example/2", "https://c.example"))
        citations = tuple(draw(st.lists(urls, min_size=1, max_size=3)))
    wire = "wire" in features
    return Case(
        kind=kind,
        text=tuple(draw(st.lists(TEXT, max_size=4))),
        reasoning_style=reasoning_style,
        reasoning=reasoning,
        nested_thinking="list" in features and draw(st.booleans()),
        refusal=refusal,
        calls=calls,
        call_style=call_style,
        call_order=call_order,
        finish=draw(st.sampled_from(FINISH_REASONS)),
        usage=draw(st.none() | usages()),
        citations=citations,
        citations_at=draw(st.sampled_from(("every", "first", "finish"))),
        error=error,
        model=draw(st.sampled_from(("m-1", None))),
        completion_id=draw(st.sampled_from(("cmpl-1", None))),
        role_delta=draw(st.booleans()),
        framing=draw(st.sampled_from(("chunked", "close"))) if wire else "chunked",
        cuts=draw(st.none() | st.lists(st.integers(1, 2000), max_size=8).map(tuple))
        if wire
        else None,
        map_eos="eos_map" in features and draw(st.booleans()),
    )


# -- serving and reading -----------------------------------------------------------------


class RecordingBackend(OpenAICommon):
    """Records every `_reconcile_finish_reason` reason and completion hook; maps eos if asked."""

    def __init__(self, url: str, *, map_eos: bool) -> None:
        super().__init__(url, template=ChatML())
        self.map_eos = map_eos
        self.reconciled: list[str] = []
        self.completed: list[str] = []

    def _reconcile_finish_reason(
        self, response: Response, reason: str, request: Mapping[str, Any]
    ) -> str:
        self.reconciled.append(reason)
        return "stop" if self.map_eos and reason == "eos" else reason

    def _on_blocking_complete(self, response: Response) -> None:
        self.completed.append("blocking")

    def _on_stream_complete(self, response: Response) -> None:
        self.completed.append("stream")


def response_view(response: Response) -> dict[str, Any]:
    """Every field of a settled Response that a caller reads."""
    return {
        "is_done": response.is_done,
        "is_success": response.is_success,
        "is_cancelled": response.is_cancelled,
        "error_class": response.error_class,
        "err": response.err,
        "msg": response.msg,
        "reasoning_text": response.reasoning_text,
        "refusal": response.refusal,
        "citations": response.citations,
        "tool_calls": response.tool_calls,
        "finish_reason": response.finish_reason,
        "provider_finish_reason": response.provider_finish_reason,
        "prompt_tokens": response.prompt_tokens,
        "completion_tokens": response.completion_tokens,
        "total_tokens": response.total_tokens,
        "cached_tokens": response.cached_tokens,
        "reasoning_tokens": response.reasoning_tokens,
        "usage": response.usage,
        "model": response.model,
        "id": response.id,
        "dropped_frames": response.dropped_frames,
    }


def chunk_view(chunks: Sequence[Chunk]) -> dict[str, Any]:
    """What a caller iterating the chunks reads from them (see the module docstring)."""
    reasons = [c.finish_reason for c in chunks if c.finish_reason is not None]
    usages_seen = [c.usage for c in chunks if c.usage is not None]
    citations_seen = [c.citations for c in chunks if c.citations is not None]
    return {
        "content": "".join(c.content for c in chunks),
        "thinking": "".join(c.thinking or "" for c in chunks),
        "refusal": "".join(c.refusal or "" for c in chunks),
        "tool_calls": [call for c in chunks for call in c.tool_calls or ()],
        "finish_reasons": reasons,
        "final_chunks_with_a_reason": sum(1 for c in chunks if c.is_final and c.finish_reason),
        "usage": usages_seen[-1] if usages_seen else None,
        "citations": citations_seen[-1] if citations_seen else None,
    }


@dataclass(frozen=True)
class Outcome:
    response: dict[str, Any]
    chunks: dict[str, Any]
    reconciled: list[str]
    completed: list[str]


def complete(backend: OpenAICommon, kind: Kind, *, stream: bool) -> Response:
    """One completion of `kind`, blocking or streamed, for the conversation `HI`."""
    if kind == "chat":
        return backend.chat_completion_stream(HI) if stream else backend.chat_completion(HI)
    return backend.text_completion_stream(HI) if stream else backend.text_completion(HI)


def serve_both(server: ScriptedServer, case: Case) -> tuple[Outcome, Outcome]:
    """Serve `case` blocking, then streamed; return what each Response came to."""
    blocking_reply = Reply.json(case.body())
    stream_reply = case.sse_reply()

    def script(request: RecordedRequest) -> Reply:
        return stream_reply if (request.json() or {}).get("stream") else blocking_reply

    server.set_script(script)
    outcomes = []
    for stream in (False, True):
        backend = RecordingBackend(server.url, map_eos=case.map_eos)
        try:
            response = complete(backend, case.kind, stream=stream)
            assert response.wait(SETTLE_GUARD).is_done, "the stream never settled"
            outcomes.append(
                Outcome(
                    response_view(response),
                    chunk_view(list(response)),
                    list(backend.reconciled),
                    list(backend.completed),
                )
            )
        finally:
            backend.close()
    return outcomes[0], outcomes[1]


def differences(stream: Mapping[str, Any], blocking: Mapping[str, Any]) -> dict[str, Any]:
    """`{field: (stream's value, blocking's value)}` for every field that differs."""
    return {k: (stream[k], blocking[k]) for k in blocking if stream[k] != blocking[k]}


def reply_view(case: Case) -> dict[str, Any]:
    """What the reply itself says, for the fields the spec leaves no room on."""
    usage = case.usage or {}
    details = usage.get("prompt_tokens_details") or {}
    return {
        "msg": "".join(case.text),
        "reasoning_text": "".join(case.reasoning) or None,
        "refusal": "".join(case.refusal) or None,
        "tool_calls": [(c.name, c.id, json.loads(c.arguments)) for c in case.calls],
        "citations": None if case.citations is None else list(case.citations),
        "prompt_tokens": usage.get("prompt_tokens"),
        "completion_tokens": usage.get("completion_tokens"),
        "cached_tokens": details.get("cached_tokens"),
        "model": case.model,
    }


def as_reply_view(response: Mapping[str, Any]) -> dict[str, Any]:
    view = {key: response[key] for key in reply_view(Case("chat"))}
    view["tool_calls"] = [(c.name, c.id, c.arguments) for c in response["tool_calls"]]
    return view


def assert_equivalent(case: Case, blocking: Outcome, stream: Outcome) -> None:
    """The property: what both modes made of one reply agrees (values: stream, blocking).

    Both also say what the reply says (`reply_view`: text, reasoning, refusal,
    calls, citations, counts, model), so agreeing on losing something fails too.
    """
    problems: dict[str, Any] = {}
    problems.update(differences(stream.response, blocking.response))
    expected = reply_view(case)
    for mode, outcome in (("stream", stream), ("blocking", blocking)):
        got = as_reply_view(outcome.response)
        problems.update(
            {
                f"{mode} vs the reply: {k}": (got[k], expected[k])
                for k in expected
                if got[k] != expected[k]
            }
        )
    if case.error is None:
        problems.update(
            {f"chunks.{k}": v for k, v in differences(stream.chunks, blocking.chunks).items()}
        )
    if stream.reconciled != blocking.reconciled:
        problems["_reconcile_finish_reason was handed"] = (stream.reconciled, blocking.reconciled)
    # The hook sees the provider's reason, at most once.
    for mode, outcome in (("stream", stream), ("blocking", blocking)):
        if len(outcome.reconciled) > 1 or any(r != case.finish for r in outcome.reconciled):
            problems[f"{mode}: reconciled, not the provider's {case.finish!r} once"] = (
                outcome.reconciled
            )
        # Each mode's completion hook runs exactly when it succeeds.
        if outcome.completed != ([mode] if outcome.response["is_success"] else []):
            problems[f"{mode}: completion hook ran, success"] = (
                outcome.completed,
                outcome.response["is_success"],
            )
    assert not problems, problems


@pytest.fixture(scope="module")
def server() -> Iterator[ScriptedServer]:
    srv = ScriptedServer()
    with srv:
        yield srv


# -- the properties ----------------------------------------------------------------------

CHAT_FAMILIES: Final = {
    # Text pieces, reasoning_content / reasoning, refusal, every finish reason and
    # usage, over every framing: what the old core already agrees on.
    "prose": frozenset({"reasoning", "refusal", "wire"}),
    "list-content": frozenset({"list"}),
    "tool-calls": frozenset({"tools", "wire"}),
    "citations": frozenset({"citations"}),
    "in-band-errors": frozenset({"errors", "reasoning"}),
    "eos-reconciled": frozenset({"eos_map", "tools"}),
}


@pytest.mark.parametrize("family", list(CHAT_FAMILIES))
@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_chat_family_agrees_in_both_modes(
    server: ScriptedServer, family: str, data: st.DataObject
) -> None:
    case = data.draw(cases("chat", CHAT_FAMILIES[family]), label="case")
    assert_equivalent(case, *serve_both(server, case))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=cases("chat"))
def test_any_chat_reply_agrees_in_both_modes(server: ScriptedServer, case: Case) -> None:
    assert_equivalent(case, *serve_both(server, case))


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=cases("text"))
def test_any_text_reply_agrees_in_both_modes(server: ScriptedServer, case: Case) -> None:
    assert_equivalent(case, *serve_both(server, case))
