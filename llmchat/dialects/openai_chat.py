"""The OpenAI chat and text dialects: one wire payload into one neutral `Delta`.

Pure, no I/O (ARCHITECTURE: dialects). A payload is a stream event's JSON or a
whole blocking body: a blocking body is decoded as a one-payload stream, its
``message`` read exactly like a ``delta`` that carries everything (its tool
calls whole rather than as fragments). What the payload *means* for the
completion is decided downstream (`llmchat.pipeline`).

`decode_chat` returns a plain `str` for the most common frame (one content
delta and nothing else), so the hot path allocates nothing but the Chunk.
`parse_completion` gathers a whole body's reading into a `Completion` (public
as `llmchat.completion.parse_completion`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Final

from ..messages import content_text
from ..tools import ToolCall
from .base import Delta, Dialect, inband_error, is_count, model_and_usage
from .openai_shapes import OpenAIChoice, OpenAIChunk, OpenAIDelta, OpenAIUsage

__all__ = [
    "DONE",
    "Completion",
    "Delta",
    "OpenAIChat",
    "OpenAIText",
    "decode_chat",
    "decode_text",
    "inband_error",
    "no_finish",
    "parse_completion",
    "usage_fields",
]

DONE: Final = "[DONE]"
"""The OpenAI stream's end: ``data: [DONE]``, the one event that is not JSON."""
_PLAIN_DELTA: Final = frozenset({"role", "content"})
_TEXT_PARTS: Final = (None, "text", "output_text")


def no_finish(reason: Any) -> bool:
    """True when `reason` means "no finish yet": None, ``""`` or the string ``"null"``."""
    return reason is None or reason == "" or reason == "null"


# Frames come from json.loads, so exact `dict`/`list`/`str` checks are enough
# here, and much cheaper per frame than isinstance against Mapping. The reading
# code is typed with the wire shapes (`openai_shapes`) for checked key names;
# each entry point rebinds its payload to one (`chunk: OpenAIChunk = raw`): a
# local store, not a call, so the hot path stays as cheap as it was.


def decode_chat(payload: Mapping[str, Any], *, whole: bool = False) -> str | Delta:
    """Decode one chat payload (``chat.completion.chunk`` or ``chat.completion``).

    Returns the content string for a frame that is one content delta and
    nothing else (``""`` for an empty one), else a `Delta`. Never raises.
    `whole` is not needed (a ``message`` says it is a whole answer): it is
    taken so that this is `OpenAIChat.decode` itself.
    """
    raw: Any = payload
    chunk: OpenAIChunk = raw
    # The most common frame, tested in this one frame (no helper calls: it runs
    # per token): one content delta with nothing else to look at (no finish,
    # usage, error, citations, reasoning or tool calls). The general path below
    # gives the same result for it.
    if "usage" not in chunk and "error" not in chunk and "citations" not in chunk:
        choices = chunk.get("choices")
        if type(choices) is list and choices:
            first = choices[0]
            if (
                type(first) is dict
                and first.get("finish_reason") is None
                and "error" not in first
                and first.get("index", 0) == 0
            ):
                delta = first.get("delta")
                if type(delta) is dict and delta.keys() <= _PLAIN_DELTA:
                    content = delta.get("content")
                    if content is None:
                        return ""
                    if type(content) is str:
                        return content
    out, choice = _opened(chunk)
    if choice is None:
        return out
    message = choice.get("delta")
    if type(message) is not dict:
        message = choice.get("message")
        if not isinstance(message, Mapping):
            return out
        out.whole = True
    _message(message, out)
    return out


def decode_text(payload: Mapping[str, Any], *, whole: bool = False) -> Delta:
    """Decode one text-completion payload (``choices[0].text``, streamed or whole).

    `whole` is not needed; taken so that this is `OpenAIText.decode` itself.
    """
    raw: Any = payload
    chunk: OpenAIChunk = raw
    out, choice = _opened(chunk)
    if choice is None:
        return out
    text = choice.get("text")
    out.text = text if type(text) is str else content_text(text)
    return out


def _opened(chunk: OpenAIChunk) -> tuple[Delta, OpenAIChoice | None]:
    """What any chunk says (`_common`), and its first choice with that choice's common fields."""
    out = _common(chunk)
    choice = _choice_of(chunk)
    if choice is not None:
        _choice_common(choice, out)
    return out, choice


def _common(payload: OpenAIChunk) -> Delta:
    out = Delta(error=inband_error(payload.get("error")))
    citations = payload.get("citations")
    if isinstance(citations, list):
        out.citations = citations
    return out


def _choice_of(payload: OpenAIChunk) -> OpenAIChoice | None:
    """Choice 0: llmchat asks for one; with n > 1 the others are not mixed in."""
    choices = payload.get("choices")
    if not isinstance(choices, list) or not choices:
        return None
    for choice in choices:
        if isinstance(choice, Mapping) and choice.get("index", 0) == 0:
            return choice
    return None


def _choice_common(choice: OpenAIChoice, out: Delta) -> None:
    out.choice = True
    if out.error is None:
        out.error = inband_error(choice.get("error"))
    reason = choice.get("finish_reason")
    if not no_finish(reason):
        out.finish_reason = str(reason)


def _message(message: OpenAIDelta, out: Delta) -> None:
    """A ``delta`` or a ``message``: the same members, the calls whole in a message."""
    content = message.get("content")
    if type(content) is str:
        out.text = content
    elif content is not None:
        out.text, out.thinking = _content_parts(content)
    value = message.get("reasoning_content")
    if not (type(value) is str and value):
        value = message.get("reasoning")
    if type(value) is str and value:
        out.thinking += value
    refusal = message.get("refusal")
    if type(refusal) is str:
        out.refusal = refusal
    calls = message.get("tool_calls")
    if type(calls) is list and calls:
        if out.whole:
            out.calls = [ToolCall.from_openai(c) for c in calls if isinstance(c, Mapping)]
        else:
            out.fragments = calls


def _content_parts(content: Any) -> tuple[str, str]:
    """A list content as `(text, thinking)`: ``thinking`` parts apart from text parts.

    A thinking part's value is a string, or (Mistral) itself a list of text parts.
    """
    if not isinstance(content, list):
        return content_text(content), ""
    text: list[str] = []
    thinking: list[str] = []
    for part in content:
        if not isinstance(part, Mapping):
            continue
        kind = part.get("type")
        if kind == "thinking":
            value = part.get("thinking", part.get("text"))
            thinking.append(value if isinstance(value, str) else content_text(value))
        elif kind in _TEXT_PARTS and isinstance(part.get("text"), str):
            text.append(part["text"])
    return "".join(text), "".join(thinking)


def usage_fields(payload: Mapping[str, Any]) -> dict[str, Any]:
    """The Response usage fields a body or stream event reports; absent keys left out.

    Reads ``usage.{prompt,completion,total}_tokens``,
    ``usage.prompt_tokens_details.cached_tokens``,
    ``usage.completion_tokens_details.reasoning_tokens``, the raw ``usage``
    block, and ``model``; ``input_tokens``/``output_tokens`` (and
    ``input_tokens_details.cached_tokens``) where the usual names are absent.
    A count of 0 is kept: 0 is a real value. A llama-server older than
    ``prompt_tokens_details`` says its cache hits only as ``timings.cache_n``:
    read there when the usage block does not say.
    """
    fields, usage = model_and_usage(payload)
    if usage is not None:
        raw: Any = usage
        _counts(raw, fields)
    if "cached_tokens" not in fields:
        timings = payload.get("timings")
        cache_n = timings.get("cache_n") if isinstance(timings, Mapping) else None
        if is_count(cache_n):
            fields["cached_tokens"] = cache_n
    return fields


def _counts(usage: OpenAIUsage, fields: dict[str, Any]) -> None:
    """The counts of a ``usage`` block into `fields`.

    Some OpenAI-compatible gateways spell the counts as the Responses API
    does (``input_tokens``, ``output_tokens``): read where the usual name is absent.
    """
    for key, value, alias in (
        ("prompt_tokens", usage.get("prompt_tokens"), usage.get("input_tokens")),
        ("completion_tokens", usage.get("completion_tokens"), usage.get("output_tokens")),
        ("total_tokens", usage.get("total_tokens"), None),
    ):
        if is_count(value):
            fields[key] = value
        elif is_count(alias):
            fields[key] = alias
    prompt = usage.get("prompt_tokens_details")
    cached = prompt.get("cached_tokens") if isinstance(prompt, Mapping) else None
    if not is_count(cached):
        given = usage.get("input_tokens_details")
        cached = given.get("cached_tokens") if isinstance(given, Mapping) else None
    if is_count(cached):
        fields["cached_tokens"] = cached
    completion = usage.get("completion_tokens_details")
    reasoning = completion.get("reasoning_tokens") if isinstance(completion, Mapping) else None
    if is_count(reasoning):
        fields["reasoning_tokens"] = reasoning


class OpenAIChat(Dialect):
    """The chat-completions dialect (``chat.completion`` / ``chat.completion.chunk``)."""

    name: ClassVar[str] = "openai"
    done_marker: ClassVar[str | None] = DONE
    plain_usage_is_model: ClassVar[bool] = True  # a plain frame has no "usage" member

    # The function itself, not a method calling it: one call less per frame.
    decode = staticmethod(decode_chat)

    @staticmethod
    def usage_fields(payload: Mapping[str, Any]) -> dict[str, Any]:
        if "usage" not in payload:  # most stream frames: only the model to take
            model = payload.get("model")
            return {"model": model} if type(model) is str and model else {}
        return usage_fields(payload)


class OpenAIText(OpenAIChat):
    """The text-completions dialect (``choices[0].text``, streamed or whole)."""

    decode = staticmethod(decode_text)


@dataclass(slots=True)
class Completion:
    """What one non-streamed completion body says."""

    text: str = ""
    reasoning: str | None = None
    refusal: str | None = None
    tool_calls: list[ToolCall] = field(default_factory=list)
    finish_reason: str | None = None
    model: str | None = None
    id: str | None = None
    citations: list[Any] | None = None
    error: str | None = None
    """An in-band provider error (top-level or a choice's `error`); None when none."""


def parse_completion(payload: Mapping[str, Any], *, kind: str = "chat") -> Completion:
    """Read a ``chat.completion`` (`kind="chat"`) or ``text_completion`` body.

    The dialect decoder's reading, gathered; never raises on odd shapes.
    """
    decoded = decode_text(payload) if kind == "text" else decode_chat(payload)
    delta = Delta(text=decoded, choice=True) if isinstance(decoded, str) else decoded
    model, pid = payload.get("model"), payload.get("id")
    return Completion(
        text=delta.text,
        reasoning=delta.thinking or None,
        refusal=delta.refusal or None,
        tool_calls=list(delta.calls or ()),
        finish_reason=delta.finish_reason,
        model=model if isinstance(model, str) and model else None,
        id=pid if isinstance(pid, str) and pid else None,
        citations=delta.citations,
        error=delta.error,
    )
