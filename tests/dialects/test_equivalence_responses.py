"""One Responses answer, two modes: the response object as a blocking body and its SSE
stream give the same Response (text, reasoning, refusal, tool calls, parts, finish,
usage, citations), over real sockets (the loopback `ScriptedServer`).

The generated answer is a list of output items (reasoning with summary or
reasoning-text parts, a message with text, refusal and url citations, function
calls) and a final state (completed, incomplete with a reason, failed). The body is
the response object; the stream is what the API sends for it: ``response.created``,
per item ``output_item.added``, the deltas cut anywhere, ``annotation.added``,
``output_item.done``, then the final event carrying the same object. The SSE bytes
may also be cut at arbitrary offsets.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from llmchat.backends.responses import OpenAIResponses
from llmchat.response import Response
from llmchat.testing import RecordedRequest, Reply, ScriptedServer, Write
from llmchat.testing.script import dumps

HI: Final = [{"role": "user", "content": "Hi"}]
SETTLE_GUARD: Final = 10.0
CHARS: Final = st.characters(exclude_categories=["Cs"])
PIECES: Final = st.lists(st.text(CHARS, min_size=1, max_size=6), min_size=1, max_size=4).map(tuple)


@dataclass(frozen=True)
class Reasoning:
    kind: str  # "summary" or "content"
    segments: tuple[tuple[str, ...], ...]
    encrypted: bool

    def item(self, index: int) -> dict[str, Any]:
        parts = [
            {
                "type": "summary_text" if self.kind == "summary" else "reasoning_text",
                "text": "".join(s),
            }
            for s in self.segments
        ]
        item: dict[str, Any] = {"type": "reasoning", "id": f"rs_{index}", "summary": []}
        item["summary" if self.kind == "summary" else "content"] = parts
        if self.encrypted:
            item["encrypted_content"] = f"enc{index}"
        return item


@dataclass(frozen=True)
class Case:
    reasoning: tuple[Reasoning, ...] = ()
    text: tuple[str, ...] = ()
    refusal: tuple[str, ...] = ()
    citations: tuple[str, ...] = ()
    calls: tuple[tuple[str, str], ...] = ()  # (name, arguments)
    status: str = "completed"
    reason: str | None = None
    usage: Mapping[str, Any] | None = None
    cuts: tuple[int, ...] | None = None

    # -- the two wire forms ---------------------------------------------------------

    def items(self) -> list[dict[str, Any]]:
        out = [r.item(i) for i, r in enumerate(self.reasoning)]
        content: list[dict[str, Any]] = []
        if self.text:
            annotations = [{"type": "url_citation", "url": u, "title": u} for u in self.citations]
            content.append(
                {"type": "output_text", "text": "".join(self.text), "annotations": annotations}
            )
        if self.refusal:
            content.append({"type": "refusal", "refusal": "".join(self.refusal)})
        if content:
            out.append({"type": "message", "id": "msg_1", "role": "assistant", "content": content})
        for i, (name, arguments) in enumerate(self.calls):
            out.append(
                {
                    "type": "function_call",
                    "id": f"fc_{i}",
                    "call_id": f"call_{i}",
                    "name": name,
                    "arguments": arguments,
                }
            )
        return out

    def body(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "id": "resp_1",
            "object": "response",
            "model": "m-1",
            "status": self.status,
            "output": self.items(),
        }
        if self.status == "incomplete":
            body["incomplete_details"] = {"reason": self.reason}
        if self.status == "failed":
            body["error"] = {"code": "server_error", "message": "it broke"}
        if self.usage is not None:
            body["usage"] = dict(self.usage)
        return body

    def events(self) -> list[dict[str, Any]]:
        created = {
            "id": "resp_1",
            "object": "response",
            "model": "m-1",
            "status": "in_progress",
            "output": [],
        }
        out: list[dict[str, Any]] = [{"type": "response.created", "response": created}]
        for item in self.items():
            out.append(
                {"type": "response.output_item.added", "item": {**item, "status": "in_progress"}}
            )
            out += self._deltas(item)
            out.append({"type": "response.output_item.done", "item": item})
        out.append({"type": f"response.{self.status}", "response": self.body()})
        return out

    def _deltas(self, item: dict[str, Any]) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        if item["type"] == "reasoning":
            r = self.reasoning[int(item["id"][3:])]
            kind = "reasoning_summary_text" if r.kind == "summary" else "reasoning_text"
            index = "summary_index" if r.kind == "summary" else "content_index"
            for n, segment in enumerate(r.segments):
                for piece in segment:
                    out.append(
                        {
                            "type": f"response.{kind}.delta",
                            "item_id": item["id"],
                            index: n,
                            "delta": piece,
                        }
                    )
        elif item["type"] == "message":
            out += [
                {"type": "response.output_text.delta", "item_id": "msg_1", "delta": p}
                for p in self.text
            ]
            for url in self.citations:
                annotation = {"type": "url_citation", "url": url, "title": url}
                out.append(
                    {"type": "response.output_text.annotation.added", "annotation": annotation}
                )
            out += [
                {"type": "response.refusal.delta", "item_id": "msg_1", "delta": p}
                for p in self.refusal
            ]
        else:
            half = len(item["arguments"]) // 2
            for piece in (item["arguments"][:half], item["arguments"][half:]):
                out.append({"type": "response.function_call_arguments.delta", "delta": piece})
        return out

    def sse_reply(self) -> Reply:
        frames = b"".join(
            f"event: {e['type']}\ndata: {dumps(e)}\n\n".encode() for e in self.events()
        )
        bounds = sorted({0, len(frames), *(c for c in self.cuts or () if 0 < c < len(frames))})
        steps = [Write(frames[a:b]) for a, b in itertools.pairwise(bounds)]
        return Reply(headers={"Content-Type": "text/event-stream"}, framing="chunked", steps=steps)


@st.composite
def cases(draw: st.DrawFn) -> Case:
    reasoning = draw(
        st.lists(
            st.builds(
                Reasoning,
                st.sampled_from(("summary", "content")),
                st.lists(PIECES, min_size=1, max_size=3).map(tuple),
                st.booleans(),
            ),
            max_size=2,
        )
    )
    text = draw(st.none() | PIECES) or ()
    status, reason = draw(
        st.sampled_from(
            [
                ("completed", None),
                ("incomplete", "max_output_tokens"),
                ("incomplete", "content_filter"),
                ("failed", None),
            ]
        )
    )
    urls = st.sampled_from(
        ["https://a.example/x", "https://b.example/?q=1", "https://a.example/x?utm_source=s"]
    )
    usage = draw(
        st.none()
        | st.builds(
            lambda i, o, c, r: {
                "input_tokens": i,
                "output_tokens": o,
                "total_tokens": i + o,
                "input_tokens_details": {"cached_tokens": c},
                "output_tokens_details": {"reasoning_tokens": r},
            },
            *(st.integers(0, 5000) for _ in range(4)),
        )
    )
    return Case(
        reasoning=tuple(reasoning),
        text=text,
        refusal=draw(st.none() | PIECES) or (),
        citations=tuple(draw(st.lists(urls, max_size=3))) if text else (),
        calls=tuple(
            draw(
                st.lists(
                    st.tuples(
                        st.sampled_from(["f", "g"]),
                        st.dictionaries(st.text(CHARS, max_size=3), st.integers(), max_size=2).map(
                            dumps
                        ),
                    ),
                    max_size=2,
                )
            )
        ),
        status=status,
        reason=reason,
        usage=usage,
        cuts=draw(st.none() | st.lists(st.integers(1, 3000), max_size=8).map(tuple)),
    )


# -- serving and comparing ---------------------------------------------------------------


def view(response: Response) -> dict[str, Any]:
    chunks = list(response)
    return {
        "is_success": response.is_success,
        "error_class": response.error_class,
        "err": response.err,
        "msg": response.msg,
        "reasoning_text": response.reasoning_text,
        "refusal": response.refusal,
        "citations": response.citations,
        "tool_calls": response.tool_calls,
        "reasoning_parts": response.reasoning_parts,
        "finish_reason": response.finish_reason,
        "provider_finish_reason": response.provider_finish_reason,
        "usage": response.usage,
        "counts": (
            response.prompt_tokens,
            response.completion_tokens,
            response.total_tokens,
            response.cached_tokens,
            response.reasoning_tokens,
        ),
        "model": response.model,
        "id": response.id,
        "dropped_frames": response.dropped_frames,
        "chunks.content": "".join(c.content for c in chunks),
        "chunks.thinking": "".join(c.thinking or "" for c in chunks),
        "chunks.refusal": "".join(c.refusal or "" for c in chunks),
        "chunks.tool_calls": [call for c in chunks for call in c.tool_calls or ()],
        "chunks.final_reasons": [c.finish_reason for c in chunks if c.finish_reason],
    }


def serve_both(server: ScriptedServer, case: Case) -> tuple[dict[str, Any], dict[str, Any]]:
    blocking_reply, stream_reply = Reply.json(case.body()), case.sse_reply()

    def script(request: RecordedRequest) -> Reply:
        return stream_reply if (request.json() or {}).get("stream") else blocking_reply

    server.set_script(script)
    with OpenAIResponses(server.url, api_key="sk-test") as backend:
        blocking = backend.chat_completion(HI)
        stream = backend.chat_completion_stream(HI).wait(SETTLE_GUARD)
    assert stream.is_done, "the stream never settled"
    return view(blocking), view(stream)


def expected(case: Case) -> dict[str, Any]:
    """What the answer itself says, for the fields with no room for interpretation."""
    thinking = "\n\n".join("".join(s) for r in case.reasoning for s in r.segments)
    finish = {
        "completed": "tool_calls" if case.calls else "stop",
        "incomplete": "length" if case.reason == "max_output_tokens" else "content_filter",
        "failed": "error",
    }[case.status]
    urls = list(dict.fromkeys(u.replace("?utm_source=s", "") for u in case.citations))
    return {
        "msg": "".join(case.text),
        "reasoning_text": thinking or None,
        "refusal": "".join(case.refusal) or None,
        "tool_calls": [(name, arguments) for name, arguments in case.calls],
        # Parts are kept when the provider's end was reached without an error.
        "parts": 0
        if case.status == "failed"
        else sum(1 for r in case.reasoning if r.encrypted or r.kind == "content"),
        "finish_reason": finish,
        "citations": urls or None,
        "is_success": case.status == "completed",
    }


@pytest.fixture(scope="module")
def server() -> Iterator[ScriptedServer]:
    srv = ScriptedServer()
    with srv:
        yield srv


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=cases())
def test_any_answer_agrees_in_both_modes(server: ScriptedServer, case: Case) -> None:
    blocking, stream = serve_both(server, case)
    problems = {k: (stream[k], blocking[k]) for k in blocking if stream[k] != blocking[k]}
    want = expected(case)
    for mode, got in (("stream", stream), ("blocking", blocking)):
        seen = {
            "msg": got["msg"],
            "reasoning_text": got["reasoning_text"],
            "refusal": got["refusal"],
            "tool_calls": [(c.name, c.arguments_json) for c in got["tool_calls"]],
            "parts": len(got["reasoning_parts"] or []),
            "finish_reason": got["finish_reason"],
            "citations": None
            if got["citations"] is None
            else [url.replace("?utm_source=s", "") for url in got["citations"]],
            "is_success": got["is_success"],
        }
        problems.update({f"{mode}: {k}": (seen[k], v) for k, v in want.items() if seen[k] != v})
    assert not problems, problems
