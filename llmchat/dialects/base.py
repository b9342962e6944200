"""What every wire dialect shares: the neutral `Delta` and the `Dialect` decoder base.

Pure, no I/O (ARCHITECTURE: dialects). A dialect turns one wire payload (a
stream event's JSON, an NDJSON line, or a whole blocking body) into one
`Delta` in no dialect's spelling; `llmchat.pipeline.accumulate` applies the
deltas and the judge decides the ending. A new wire dialect is a `Dialect`
subclass (and a request builder); nothing downstream changes.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Final, Literal, TypeAlias

from ..tools import ToolCall

__all__ = ["MAX_COUNT", "Delta", "Dialect", "Framing", "inband_error", "is_count", "usage_block"]

Framing: TypeAlias = Literal["sse", "ndjson"]


@dataclass(slots=True)
class Delta:
    """What one payload adds, in no dialect's spelling; every field empty when absent."""

    text: str = ""
    """Answer text."""
    thinking: str = ""
    """Reasoning text (``reasoning_content``, ``thinking_delta``, thought parts …)."""
    refusal: str = ""
    """Refusal text."""
    fragments: list[Any] | None = None
    """OpenAI stream ``tool_calls`` fragments, for `ToolCallAssembler`; None when none."""
    calls: list[ToolCall] | None = None
    """Tool calls that arrived whole (a blocking message, a finished block); None when none."""
    finish_reason: str | None = None
    """The finish reason in OpenAI's names (``stop``, ``length``, ``tool_calls``,
    ``content_filter``), or the provider's own value when it has no such name."""
    provider_reason: str | None = None
    """The provider's own finish value when it differs from `finish_reason`; None: the same."""
    error: str | None = None
    """An in-band provider error message; None when none."""
    citations: list[Any] | None = None
    """Citations this payload carries (replacing earlier ones); None when absent."""
    choice: bool = False
    """True when the payload was part of the answer (not only usage or bookkeeping)."""
    whole: bool = False
    """True when the payload was a whole answer (a blocking body), not a stream delta."""
    end: bool = False
    """True when the payload is the dialect's explicit end of stream (``message_stop``,
    ``response.completed``, ``done: true``); the OpenAI ``[DONE]`` is not JSON and is
    seen by the accumulator itself."""
    parts: list[dict[str, Any]] | None = None
    """Opaque reasoning parts to send back on the next request (a thinking block with
    its signature, a thought signature); None when none."""
    model: str | None = None
    """The model, where the dialect nests it (else the payload's ``model`` is read)."""
    id: str | None = None
    """The completion id, where the dialect nests it (else the payload's ``id``)."""


class Dialect:
    """One completion's decoder for one wire dialect; a fresh instance per completion.

    Subclasses implement `decode` and `usage_fields`; a decoder may keep state
    between payloads (an Anthropic content block being assembled), so it must
    never be shared between completions. Must not raise on any JSON object.
    """

    name: ClassVar[str] = ""
    """The dialect's name in messages and `reasoning_parts` (``"anthropic"`` …)."""
    framing: ClassVar[Framing] = "sse"
    """How a streamed body is framed."""
    done_marker: ClassVar[str | None] = None
    """A non-JSON event that ends the stream (OpenAI's ``[DONE]``); None: none."""
    derives_total: ClassVar[bool] = False
    """True when the dialect never reports a total, so prompt + completion is it."""
    array_body: ClassVar[bool] = False
    """True when a blocking body may be a JSON array of stream payloads (Gemini)."""
    stray_json: ClassVar[bool] = False
    """True when a stream may carry a bare JSON object between SSE events (Vertex AI's
    mid-stream error); see `SSEDecoder`."""
    finish_is_last: ClassVar[bool] = True
    """True when nothing but usage follows the finish (OpenAI's rule). False for a
    dialect that may repeat its finish reason on every chunk (Gemini): later text
    and calls still count, the latest reason wins, and no grace timer is started
    (the stream's own end decides)."""

    plain_usage_is_model: ClassVar[bool] = False
    """True when a payload that `decode` reads as plain text (a `str`) reports nothing
    through `usage_fields` but its ``model`` member (when that is a non-empty str):
    then the runner sets the model itself and calls no `_lift_usage` for it, unless
    a backend overrides that hook. A subclass whose `usage_fields` reads more from
    such a payload sets it False."""

    def decode(self, payload: Mapping[str, Any], *, whole: bool = False) -> str | Delta:
        """One payload as a `Delta` (or the answer text alone for a plain frame)."""
        raise NotImplementedError

    @staticmethod
    def usage_fields(payload: Mapping[str, Any]) -> dict[str, Any]:
        """The Response usage fields `payload` reports, in OpenAI's names.

        Keys: ``usage`` (the provider's raw block), ``prompt_tokens``,
        ``completion_tokens``, ``total_tokens``, ``cached_tokens``,
        ``reasoning_tokens``, ``model``; absent ones left out, 0 kept.
        """
        raise NotImplementedError


LLAMA_CPP_SETTINGS: Final = (
    "xtc_probability",
    "xtc_threshold",
    "dry_multiplier",
    "dry_base",
    "dry_allowed_length",
    "dry_sequence_breakers",
    "id_slot",
    "cache_prompt",
)
"""`Settings` fields only llama.cpp-style servers read (XTC, DRY, slot, prompt cache):
the other dialects have no member for them and leave them out of the body."""

OPENAI_ONLY_SAMPLERS: Final = (
    "min_p",
    "typical_p",
    "repetition_penalty",
    "frequency_penalty",
    "presence_penalty",
    "seed",
    "logit_bias",
)
"""Sampler settings of OpenAI chat (and llama.cpp) that neither Anthropic's Messages
nor the Responses API has a member for: both leave them out of the body."""


def inband_error(error: Any) -> str | None:
    """The message of a provider's in-band `error` value; None when there is none."""
    if not error:  # None, False, "" and {} all mean "no error"
        return None
    if isinstance(error, Mapping):
        message = error.get("message")
        return str(message) if message else str(dict(error))
    return str(error)


MAX_COUNT: Final = 2**53 - 1
"""The largest count read: every JSON reader (JavaScript too) holds it exactly."""


def is_count(value: Any) -> bool:
    """True for a token count: an int (not a bool) from 0 to `MAX_COUNT`."""
    return type(value) is int and 0 <= value <= MAX_COUNT


def usage_block(usage: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of a provider's raw usage block in which every count is a count or None.

    The rule at the decode boundary (spec: TOKEN COUNTS): a member whose name
    says it is a count (``*tokens``, ``*Tokens``, ``*_count``, ``*Count``, at
    the top or in a nested details block) and whose value is not a count by
    `is_count` (negative, a bool, a float, a string, past `MAX_COUNT`) is read
    as None: unknown. Nothing downstream (`Response.usage`, a proxy face's
    ``eval_count``, the usage store) then sees ``-5``. Other members are kept.
    """
    out = dict(usage)
    for key, value in out.items():
        if type(value) is dict:
            out[key] = usage_block(value)
        elif type(value) is list:  # Gemini's per-modality details: [{"tokenCount": n}, …]
            out[key] = [usage_block(item) if type(item) is dict else item for item in value]
        elif _COUNT_NAME.search(key) and not is_count(value) and value is not None:
            out[key] = None
    return out


def lone_content(message: object, keys: frozenset[str]) -> str | None:
    """The text of a message or delta that holds nothing but `keys`: the fast path's test.

    `message` must be a dict whose keys are all in `keys` and whose
    ``content`` is a str (absent or null: ``""``); anything else gives None,
    and the caller reads the frame the general way.
    """
    if type(message) is not dict or not message.keys() <= keys:
        return None
    content = message.get("content")
    if content is None:
        return ""
    return content if type(content) is str else None


def model_and_usage(
    source: Mapping[str, Any], model_key: str = "model", usage_key: str = "usage"
) -> tuple[dict[str, Any], Mapping[str, Any] | None]:
    """What every dialect's `usage_fields` starts from, and the usage block to count from.

    The fields hold ``model`` when `source` names one (a non-empty str) and
    ``usage``, the raw block with its counts checked (`usage_block`); the
    block is None when `source` has none (then there are no counts either).
    """
    fields: dict[str, Any] = {}
    model = source.get(model_key)
    if type(model) is str and model:
        fields["model"] = model
    usage = source.get(usage_key)
    if not isinstance(usage, Mapping):
        return fields, None
    fields["usage"] = usage_block(usage)
    return fields, usage


def copy_counts(
    usage: Mapping[str, Any], keys: Iterable[tuple[str, str]], fields: dict[str, Any]
) -> None:
    """Each ``(wire, name)`` of `keys` whose `usage` value is a count, into `fields` as `name`."""
    for wire, name in keys:
        if is_count(usage.get(wire)):
            fields[name] = usage[wire]


_COUNT_NAME: Final = re.compile(r"(?:tokens|Tokens|_count|Count)$")
