"""One Gemini reply, three wire forms, one Response.

Each example generates a reply (thought pieces, text pieces, function calls,
thought signatures, citations, a finish reason, usage) and serves it over real
sockets as: a ``generateContent`` body (one candidate holding every part), the
same answer as the JSON array ``streamGenerateContent`` returns without
``alt=sse``, and as an ``alt=sse`` stream cut at arbitrary byte offsets. The
Responses (text, reasoning, calls, reasoning parts, finish, usage, citations,
errors) and what their chunks add up to must be the same.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Final

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from llmchat.backends.gemini import Gemini
from llmchat.chunk import Chunk
from llmchat.response import Response
from llmchat.testing import RecordedRequest, Reply, ScriptedServer, Write

HI: Final = [{"role": "user", "content": "Hi"}]
WAIT: Final = 10.0
FINISHES: Final = ("STOP", "MAX_TOKENS", "SAFETY", "RECITATION", "OTHER")

texts = st.lists(st.text(min_size=1, max_size=8), max_size=4)
args = st.dictionaries(st.sampled_from("abc"), st.integers() | st.text(max_size=5), max_size=3)


@dataclass(frozen=True)
class Case:
    thoughts: tuple[str, ...]
    text: tuple[str, ...]
    calls: tuple[tuple[str, dict[str, Any]], ...]
    text_signature: str | None
    call_signature: str | None
    citations: tuple[str, ...]
    finish: str
    usage: dict[str, int] | None
    cuts: tuple[int, ...]

    def parts(self) -> list[dict[str, Any]]:
        """Every part, whole, in the order a generateContent body holds them."""
        parts: list[dict[str, Any]] = []
        if self.thoughts:
            parts.append({"text": "".join(self.thoughts), "thought": True})
        if self.text:
            parts.append({"text": "".join(self.text)})
        for i, call in enumerate(self.calls):
            parts.append(self.call_part(i, call))
        if self.text_signature:  # on a last empty part, as the stream sends it too
            parts.append({"text": "", "thoughtSignature": self.text_signature})
        return parts

    def call_part(self, i: int, call: tuple[str, dict[str, Any]]) -> dict[str, Any]:
        part: dict[str, Any] = {"functionCall": {"name": call[0], "args": call[1]}}
        if i == 0 and self.call_signature:
            part["thoughtSignature"] = self.call_signature
        return part

    def top(self, final: bool) -> dict[str, Any]:
        out: dict[str, Any] = {"modelVersion": "gemini-x", "responseId": "resp-1"}
        if self.usage is not None:
            out["usageMetadata"] = (
                self.usage if final else {"promptTokenCount": self.usage["promptTokenCount"]}
            )
        return out

    def candidate(
        self, parts: list[dict[str, Any]], final: bool, cite: Sequence[str]
    ) -> dict[str, Any]:
        candidate: dict[str, Any] = {"content": {"role": "model", "parts": parts}, "index": 0}
        if cite:
            candidate["citationMetadata"] = {"citationSources": [{"uri": u} for u in cite]}
        if final:
            candidate["finishReason"] = self.finish
        return candidate

    def body(self) -> dict[str, Any]:
        return {
            "candidates": [self.candidate(self.parts(), True, self.citations)],
            **self.top(True),
        }

    def payloads(self) -> list[dict[str, Any]]:
        """The stream: one payload per piece and per call, then the finish payload."""
        pieces: list[dict[str, Any]] = [{"text": t, "thought": True} for t in self.thoughts]
        pieces += [{"text": t} for t in self.text]
        pieces += [self.call_part(i, c) for i, c in enumerate(self.calls)]
        out = []
        for n, piece in enumerate(pieces):
            cite = self.citations[n : n + 1]  # a URL per payload, the rest at the finish
            out.append({"candidates": [self.candidate([piece], False, cite)], **self.top(False)})
        last: list[dict[str, Any]] = []
        if self.text_signature:
            last.append({"text": "", "thoughtSignature": self.text_signature})
        rest = self.citations[len(pieces) :] if len(pieces) < len(self.citations) else ()
        out.append({"candidates": [self.candidate(last, True, rest)], **self.top(True)})
        return out

    def sse(self) -> bytes:
        return b"".join(b"data: " + json.dumps(p).encode() + b"\n\n" for p in self.payloads())


@st.composite
def cases(draw: st.DrawFn) -> Case:
    usage = None
    if draw(st.booleans()):
        prompt, cands, thoughts = (draw(st.integers(0, 99)) for _ in range(3))
        usage = {
            "promptTokenCount": prompt,
            "candidatesTokenCount": cands,
            "thoughtsTokenCount": thoughts,
            "totalTokenCount": prompt + cands + thoughts,
        }
    case = Case(
        thoughts=tuple(draw(texts)),
        text=tuple(draw(texts)),
        calls=tuple(draw(st.lists(st.tuples(st.sampled_from(["f", "g"]), args), max_size=3))),
        text_signature=draw(st.none() | st.just("TSIG")),
        call_signature=draw(st.none() | st.just("CSIG")),
        citations=tuple(
            draw(st.lists(st.sampled_from(["https://a", "https://b", "https://c"]), max_size=3))
        ),
        finish=draw(st.sampled_from(FINISHES)),
        usage=usage,
        cuts=(),
    )
    size = len(case.sse())
    cuts = tuple(sorted(draw(st.lists(st.integers(1, size - 1), max_size=6))))
    return Case(**{**case.__dict__, "cuts": cuts})


def view(response: Response) -> dict[str, Any]:
    chunks: list[Chunk] = list(response)
    usages = [c.usage for c in chunks if c.usage is not None]
    return {
        "is_success": response.is_success,
        "error_class": response.error_class,
        "err": response.err,
        "msg": response.msg,
        "reasoning_text": response.reasoning_text,
        "tool_calls": response.tool_calls,
        "reasoning_parts": response.reasoning_parts,
        "finish_reason": response.finish_reason,
        "provider_finish_reason": response.provider_finish_reason,
        "prompt_tokens": response.prompt_tokens,
        "completion_tokens": response.completion_tokens,
        "total_tokens": response.total_tokens,
        "reasoning_tokens": response.reasoning_tokens,
        "usage": response.usage,
        "citations": response.citations,
        "model": response.model,
        "id": response.id,
        "dropped_frames": response.dropped_frames,
        "chunk_content": "".join(c.content for c in chunks),
        "chunk_thinking": "".join(c.thinking or "" for c in chunks),
        "chunk_calls": [call for c in chunks for call in c.tool_calls or ()],
        "chunk_reasons": [c.finish_reason for c in chunks if c.finish_reason is not None],
        "chunk_usage": usages[-1] if usages else None,
    }


@pytest.fixture(scope="module")
def server() -> Iterator[ScriptedServer]:
    srv = ScriptedServer()
    with srv:
        yield srv


def serve(server: ScriptedServer, case: Case) -> list[dict[str, Any]]:
    body = case.sse()
    edges = [0, *case.cuts, len(body)]
    replies = {
        "object": Reply.json(case.body()),
        "array": Reply.json(case.payloads()),
        "sse": Reply(
            200,
            {"Content-Type": "text/event-stream"},
            framing="chunked",
            steps=[Write(body[a:b]) for a, b in itertools.pairwise(edges) if b > a],
        ),
    }
    order = iter(["object", "array", "sse"])

    def script(request: RecordedRequest) -> Reply:
        return replies[next(order)]

    server.set_script(script)
    backend = Gemini(server.url, api_key="k", model="m")
    return [
        view(backend.chat_completion(HI)),
        view(backend.chat_completion(HI)),
        view(backend.chat_completion_stream(HI).wait(WAIT)),
    ]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=cases())
def test_any_reply_agrees_in_every_form(server: ScriptedServer, case: Case) -> None:
    whole, array, stream = serve(server, case)
    assert array == whole
    assert stream == whole
    # And the Response is what the case says.
    assert whole["msg"] == "".join(case.text)
    assert whole["reasoning_text"] == ("".join(case.thoughts) or None)
    assert [(c.name, c.arguments) for c in whole["tool_calls"]] == list(case.calls)
    assert [p["on"] for p in whole["reasoning_parts"] or []] == (
        (["functionCall"] if case.call_signature and case.calls else [])
        + (["text"] if case.text_signature else [])
    )
    assert whole["provider_finish_reason"] == case.finish
    assert whole["citations"] == (list(dict.fromkeys(case.citations)) or None)
