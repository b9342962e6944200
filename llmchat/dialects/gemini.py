"""The Gemini dialect (``generateContent`` / ``streamGenerateContent``): payload → `Delta`.

Pure, no I/O (ARCHITECTURE: dialects). One payload is a
``GenerateContentResponse``: a whole blocking body, one SSE event of an
``alt=sse`` stream, or one element of the JSON array a stream without
``alt=sse`` is. All three read the same way; there is no end event: the
payload whose candidate carries ``finishReason`` is the finish, and a clean
end of body after it is success.

Read from candidate 0 (llmchat asks for one): ``text`` parts are the answer,
``thought: true`` parts the reasoning, ``functionCall`` parts whole tool calls
(and Vertex's streamed ``partialArgs`` are assembled into whole ones), and a
part's ``thoughtSignature`` is kept as an opaque reasoning part that says
which part it came on, so the request builder can put it back there.
``promptFeedback.blockReason`` is a ``content_filter`` finish; an ``error``
object (a body, or an event mid-stream) fails with its message. Citations are
the URLs of ``citationMetadata.citationSources`` and of
``groundingMetadata.groundingChunks`` (``web``/``retrievedContext``), in
order of first appearance, each once.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Final

from ..tools import ToolCall
from .base import Delta, Dialect, copy_counts, inband_error, is_count, model_and_usage
from .gemini_calls import PartialCalls, whole_call

__all__ = ["CALL_ID_PREFIX", "FINISH_REASONS", "GeminiContent", "usage_fields"]

FINISH_REASONS: Final[Mapping[str, str]] = {
    "STOP": "stop",
    "MAX_TOKENS": "length",
    "SAFETY": "content_filter",
    "RECITATION": "content_filter",
    "BLOCKLIST": "content_filter",
    "PROHIBITED_CONTENT": "content_filter",
    "SPII": "content_filter",
}
"""Gemini ``finishReason`` → OpenAI's name; any other value passes through unmapped
(``OTHER``, ``MALFORMED_FUNCTION_CALL``, ``LANGUAGE``, ``IMAGE_SAFETY`` … fail as
unknown reasons)."""

CALL_ID_PREFIX: Final = "gemini-call-"
"""Gemini sends no call id (unless ``functionCall.id`` is set): llmchat numbers the
calls of one completion ``gemini-call-0``, ``gemini-call-1`` … in order, the same
in both modes. No call id is sent back to Gemini (it pairs by name and order)."""


class GeminiContent(Dialect):
    """The Gemini ``GenerateContentResponse`` decoder; one instance per completion.

    Keeps the calls numbered so far, a call whose ``partialArgs`` are still
    streaming, and the citations seen so far (each payload's list replaces
    the last, so the running list is what is handed on).
    """

    name: ClassVar[str] = "gemini"
    array_body: ClassVar[bool] = True
    stray_json: ClassVar[bool] = True  # Vertex writes a mid-stream error as bare JSON
    finish_is_last: ClassVar[bool] = False  # some servers repeat finishReason on every chunk

    def __init__(self) -> None:
        self._calls = 0
        self._partial = PartialCalls()
        self._citations: list[str] = []

    def decode(self, payload: Mapping[str, Any], *, whole: bool = False) -> Delta:
        out = Delta(error=inband_error(payload.get("error")), whole=whole)
        model = payload.get("modelVersion")
        if type(model) is str and model:
            out.model = model
        rid = payload.get("responseId")
        if type(rid) is str and rid:
            out.id = rid
        candidate = _candidate(payload.get("candidates"))
        if candidate is not None:
            out.choice = True
            self._candidate(candidate, out)
        else:
            _blocked(payload.get("promptFeedback"), out)
        return out

    def _candidate(self, candidate: Mapping[str, Any], out: Delta) -> None:
        content = candidate.get("content")
        parts = content.get("parts") if isinstance(content, Mapping) else None
        calls: list[ToolCall] = []
        signatures: list[dict[str, Any]] = []
        for part in parts if isinstance(parts, list) else ():
            if isinstance(part, Mapping):
                self._part(part, out, calls, signatures)
        reason = candidate.get("finishReason")
        if type(reason) is str and reason:
            calls += self._partial.finish()
            out.finish_reason = FINISH_REASONS.get(reason, reason)
            out.provider_reason = reason
        # Most chunks carry no citations: skip the walk (profiled at ~2 µs a chunk).
        if ("citationMetadata" in candidate or "groundingMetadata" in candidate) and self._cite(
            candidate
        ):
            out.citations = list(self._citations)
        out.calls = calls or None
        out.parts = signatures or None

    def _part(
        self,
        part: Mapping[str, Any],
        out: Delta,
        calls: list[ToolCall],
        signatures: list[dict[str, Any]],
    ) -> None:
        signature = part.get("thoughtSignature")
        signed = type(signature) is str and bool(signature)
        function_call = part.get("functionCall")
        if isinstance(function_call, Mapping):
            call = self._function_call(function_call, calls)
            if signed and call is not None:
                signatures.append(_signature(str(signature), "functionCall", call))
            return
        text = part.get("text")
        kind = "text"
        if type(text) is str:
            if part.get("thought") is True:
                out.thinking += text
                kind = "thought"
            else:
                out.text += text
        if signed:
            signatures.append(_signature(str(signature), kind))

    def _function_call(
        self, function_call: Mapping[str, Any], calls: list[ToolCall]
    ) -> ToolCall | None:
        """Add what one ``functionCall`` part lands to `calls`; return the call it is of."""
        name = function_call.get("name")
        if type(name) is not str or not name:  # streamed arguments, or a call's end
            open_call = self._partial.open_call
            calls += self._partial.feed(function_call)
            return open_call
        given = function_call.get("id")
        call_id = given if type(given) is str and given else self._next_id()
        if function_call.get("willContinue") is True:
            calls += self._partial.begin(name, call_id)
            return self._partial.open_call
        call = whole_call(function_call, call_id)
        calls += self._partial.finish()
        calls.append(call)
        return call

    def _next_id(self) -> str:
        self._calls += 1
        return f"{CALL_ID_PREFIX}{self._calls - 1}"

    def _cite(self, candidate: Mapping[str, Any]) -> bool:
        """Add the candidate's citation URLs not seen yet; True when one was added."""
        before = len(self._citations)
        for uri in _citation_uris(candidate):
            if uri not in self._citations:
                self._citations.append(uri)
        return len(self._citations) > before

    @staticmethod
    def usage_fields(payload: Mapping[str, Any]) -> dict[str, Any]:
        return usage_fields(payload)


def _candidate(candidates: Any) -> Mapping[str, Any] | None:
    """Candidate 0 (``index`` absent means 0); None when there is none."""
    if not isinstance(candidates, list):
        return None
    for candidate in candidates:
        if isinstance(candidate, Mapping) and candidate.get("index", 0) in (0, None):
            return candidate
    return None


def _blocked(feedback: Any, out: Delta) -> None:
    """``promptFeedback.blockReason``: the prompt was refused, a content_filter finish."""
    if not isinstance(feedback, Mapping):
        return
    reason = feedback.get("blockReason")
    if type(reason) is str and reason and reason != "BLOCK_REASON_UNSPECIFIED":
        out.choice = True
        out.finish_reason = "content_filter"
        out.provider_reason = f"blockReason:{reason}"


def _signature(signature: str, on: str, call: ToolCall | None = None) -> dict[str, Any]:
    """A thought signature as an opaque reasoning part, saying which part it came on.

    ``on`` is ``functionCall`` (then ``id`` and ``name`` name the call), ``text``
    or ``thought``; the request builder puts it back on that part.
    """
    part: dict[str, Any] = {"dialect": "gemini", "thoughtSignature": signature, "on": on}
    if call is not None:
        part["id"] = call.id
        part["name"] = call.name
    return part


def _citation_uris(candidate: Mapping[str, Any]) -> list[str]:
    uris: list[str] = []
    citations = candidate.get("citationMetadata")
    sources = citations.get("citationSources") if isinstance(citations, Mapping) else None
    for source in sources if isinstance(sources, list) else ():
        if isinstance(source, Mapping) and type(source.get("uri")) is str and source["uri"]:
            uris.append(source["uri"])
    grounding = candidate.get("groundingMetadata")
    chunks = grounding.get("groundingChunks") if isinstance(grounding, Mapping) else None
    for chunk in chunks if isinstance(chunks, list) else ():
        if not isinstance(chunk, Mapping):
            continue
        for key in ("web", "retrievedContext", "maps"):
            source = chunk.get(key)
            if isinstance(source, Mapping) and type(source.get("uri")) is str and source["uri"]:
                uris.append(source["uri"])
    return uris


def usage_fields(payload: Mapping[str, Any]) -> dict[str, Any]:
    """The Response usage fields of one payload, in OpenAI's names; absent ones left out.

    ``promptTokenCount`` → prompt_tokens; ``candidatesTokenCount`` +
    ``thoughtsTokenCount`` → completion_tokens (OpenAI's completion count
    includes reasoning; Gemini's candidates count does not); ``thoughtsTokenCount``
    → reasoning_tokens; ``cachedContentTokenCount`` → cached_tokens;
    ``totalTokenCount`` → total_tokens; ``modelVersion`` → model; the raw
    ``usageMetadata`` → usage. 0 is kept.
    """
    fields, usage = model_and_usage(payload, "modelVersion", "usageMetadata")
    if usage is None:
        return fields
    copy_counts(usage, _USAGE_KEYS, fields)
    counts: list[int] = [
        usage[key]
        for key in ("candidatesTokenCount", "thoughtsTokenCount")
        if is_count(usage.get(key))
    ]
    if counts:
        fields["completion_tokens"] = sum(counts)
    return fields


_USAGE_KEYS: Final = (
    ("promptTokenCount", "prompt_tokens"),
    ("totalTokenCount", "total_tokens"),
    ("thoughtsTokenCount", "reasoning_tokens"),
    ("cachedContentTokenCount", "cached_tokens"),
)
