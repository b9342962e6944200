"""Serving a generated reply both ways and reading what a caller sees: the views compared,
and the one assertion that they agree (test_equivalence.py's docstring says what agree means).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from llmchat import OpenAICommon
from llmchat.chunk import Chunk
from llmchat.response import Response
from llmchat.templates import ChatML
from llmchat.testing import RecordedRequest, Reply, ScriptedServer

from .equivalence_cases import HI, SETTLE_GUARD, Case, Kind

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
