"""The OpenAI Responses dialect's pieces: output items, finish states, citations, usage.

Pure functions over decoded JSON, no I/O and no state; `llmchat.dialects.responses`
(the decoder) calls them for stream events and for whole response objects alike,
so a blocking body and its stream read every item the same way.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final
from urllib.parse import urlsplit, urlunsplit

from ..tools import ToolCall
from .base import copy_counts, inband_error, is_count, model_and_usage

__all__ = [
    "DIALECT",
    "THINKING_SEPARATOR",
    "FinishState",
    "citation_key",
    "finish_state",
    "function_call",
    "item_citations",
    "merge_citations",
    "message_texts",
    "payload_citations",
    "reasoning_part",
    "reasoning_segments",
    "url_citations",
    "usage_fields",
]

DIALECT: Final = "responses"
"""The dialect's name, and the tag of its `reasoning_parts`."""
THINKING_SEPARATOR: Final = "\n\n"
"""Between two reasoning segments (summary parts, reasoning-text parts, items)."""
ERR_BACKGROUND: Final = (
    "The response is {status}: background mode is not supported "
    "(llmchat does not poll for a result; send the request without background=true)"
)

FinishState = tuple[str | None, str | None, str | None]
"""`(finish_reason, provider_reason, error)` of a response object."""


# -- finishing ------------------------------------------------------------------------


def finish_state(
    response: Mapping[str, Any], *, has_calls: bool, status: Any = None
) -> FinishState:
    """What a response object's ``status`` says: the finish in OpenAI's names, the wire value.

    ``completed`` is ``stop`` (``tool_calls`` when a function call came),
    ``incomplete`` maps its ``incomplete_details.reason`` (``max_output_tokens``
    is ``length``, ``content_filter`` stays, anything else is the provider's own
    ``incomplete:<reason>``, which the judge fails as unknown), ``failed`` and
    ``cancelled`` are errors, and ``queued``/``in_progress`` (a background
    response answered before it ran) are the background-mode failure.
    `status` stands in when the object has none (the event type said it).
    """
    given = response.get("status")
    state = given if isinstance(given, str) and given else status
    if state == "completed":
        return ("tool_calls" if has_calls else "stop"), "completed", None
    if state == "incomplete":
        details = response.get("incomplete_details")
        reason = details.get("reason") if isinstance(details, Mapping) else None
        wire = f"incomplete:{reason}" if isinstance(reason, str) and reason else "incomplete"
        mapped = {"max_output_tokens": "length", "content_filter": "content_filter"}
        return mapped.get(str(reason), wire), wire, None
    if state in ("failed", "cancelled"):
        message = inband_error(response.get("error")) or f"The response {state}"
        return "error", str(state), message
    if state in ("queued", "in_progress"):
        return None, None, ERR_BACKGROUND.format(status=state)
    return None, None, None


# -- output items -------------------------------------------------------------------


def message_texts(item: Mapping[str, Any]) -> tuple[str, str]:
    """A ``message`` item's `(text, refusal)`: its ``output_text`` and ``refusal`` parts."""
    content = item.get("content")
    if isinstance(content, str):
        return content, ""
    text: list[str] = []
    refusal: list[str] = []
    for part in content if isinstance(content, list) else ():
        if not isinstance(part, Mapping):
            continue
        kind = part.get("type")
        if kind in ("output_text", "text") and isinstance(part.get("text"), str):
            text.append(part["text"])
        elif kind == "refusal" and isinstance(part.get("refusal"), str):
            refusal.append(part["refusal"])
    return "".join(text), "".join(refusal)


def function_call(item: Mapping[str, Any]) -> ToolCall:
    """A ``function_call`` item as a whole `ToolCall` (its id is the ``call_id``)."""
    return ToolCall.from_openai(
        {
            "id": item.get("call_id") or item.get("id") or "",
            "type": "function",
            "function": {"name": item.get("name"), "arguments": item.get("arguments")},
        }
    )


def reasoning_segments(item: Mapping[str, Any]) -> list[str]:
    """A ``reasoning`` item's texts in order: summary parts, then reasoning-text parts."""
    out: list[str] = []
    for key in ("summary", "content"):
        parts = item.get(key)
        for part in parts if isinstance(parts, list) else ():
            if isinstance(part, Mapping) and isinstance(part.get("text"), str) and part["text"]:
                out.append(part["text"])
    return out


def reasoning_part(item: Mapping[str, Any]) -> dict[str, Any] | None:
    """The `reasoning_parts` entry for a ``reasoning`` item, or None when it is no use.

    Kept only when it can go back statelessly: it carries ``encrypted_content``
    (OpenAI with ``include: ["reasoning.encrypted_content"]``) or reasoning text
    (llama.cpp, DeepSeek). A bare ``rs_…`` id means nothing with ``store: false``
    and would make the next request fail, so it is dropped.
    """
    encrypted = item.get("encrypted_content")
    if not (isinstance(encrypted, str) and encrypted) and not _has_text(item.get("content")):
        return None
    return {"dialect": DIALECT, "item": dict(item)}


def _has_text(parts: Any) -> bool:
    return isinstance(parts, list) and any(
        isinstance(p, Mapping) and isinstance(p.get("text"), str) and p["text"] for p in parts
    )


# -- citations ------------------------------------------------------------------------


def citation_key(citation: Any) -> str | None:
    """The identity two citations share when they are one source: the URL, ``utm_*`` dropped."""
    url = citation.get("url") if isinstance(citation, Mapping) else citation
    if not isinstance(url, str) or not url:
        return None
    try:
        parts = urlsplit(url)
    except ValueError:
        return url
    kept = [
        pair
        for pair in parts.query.split("&")
        if pair and not pair.split("=", 1)[0].lower().startswith("utm_")
    ]
    query = "&".join(kept)
    return urlunsplit((parts.scheme, parts.netloc, parts.path, query, parts.fragment))


def item_citations(item: Mapping[str, Any]) -> list[Any]:
    """The ``url_citation`` annotations of a ``message`` item's text parts, and any
    Perplexity-style ``results`` of a ``search_results`` item."""
    if item.get("type") == "search_results":
        results = item.get("results")
        return list(results) if isinstance(results, list) else []
    out: list[Any] = []
    content = item.get("content")
    for part in content if isinstance(content, list) else ():
        if isinstance(part, Mapping):
            out += url_citations(part.get("annotations"))
    return out


def url_citations(annotations: Any) -> list[Any]:
    """The ``url_citation`` entries of an annotations list (file citations are not URLs)."""
    if isinstance(annotations, Mapping):
        annotations = [annotations]
    if not isinstance(annotations, list):
        return []
    return [a for a in annotations if isinstance(a, Mapping) and a.get("type") == "url_citation"]


def payload_citations(payload: Mapping[str, Any]) -> list[Any]:
    """Perplexity-style top-level ``search_results`` (objects) and ``citations`` (URLs)."""
    out: list[Any] = []
    for key in ("search_results", "citations"):
        value = payload.get(key)
        if isinstance(value, list):
            out += value
    return out


def merge_citations(into: list[str], keys: set[str], new: Iterable[Any]) -> bool:
    """Add the URLs of `new` not yet in `into` (by `citation_key`); True when any was.

    A citation is its URL as first sent (the shape Perplexity's ``citations`` and
    the Gemini dialect give `Response.citations`); titles stay in the raw events.
    """
    added = False
    for citation in new:
        key = citation_key(citation)
        if key is None or key in keys:
            continue
        keys.add(key)
        into.append(citation["url"] if isinstance(citation, Mapping) else citation)
        added = True
    return added


# -- usage ----------------------------------------------------------------------------


def usage_fields(payload: Mapping[str, Any]) -> dict[str, Any]:
    """The Response usage fields a response object or event reports, in OpenAI's names.

    Reads the body's own ``usage``/``model`` or, in a stream event, its
    ``response``'s: ``input_tokens``, ``output_tokens``, ``total_tokens``,
    ``input_tokens_details.cached_tokens``, ``output_tokens_details.reasoning_tokens``.
    """
    nested = payload.get("response")
    source = nested if isinstance(nested, Mapping) else payload
    fields, usage = model_and_usage(source)
    if usage is None:
        return fields
    copy_counts(usage, _USAGE_KEYS, fields)
    for block, wire, name in _USAGE_DETAILS:
        details = usage.get(block)
        if isinstance(details, Mapping) and is_count(details.get(wire)):
            fields[name] = details[wire]
    return fields


_USAGE_KEYS: Final = (
    ("input_tokens", "prompt_tokens"),
    ("output_tokens", "completion_tokens"),
    ("total_tokens", "total_tokens"),
)
_USAGE_DETAILS: Final = (
    ("input_tokens_details", "cached_tokens", "cached_tokens"),
    ("output_tokens_details", "reasoning_tokens", "reasoning_tokens"),
)
