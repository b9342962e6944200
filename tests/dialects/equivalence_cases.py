"""The generated replies the equivalence tests serve: one reply as a `Case` (its blocking
body and its stream), and the hypothesis strategies that draw them.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

from hypothesis import strategies as st

from llmchat.testing import Reply, Write
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
