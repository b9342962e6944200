"""Per-request generation settings and their OpenAI request-body form.

`Settings` is the one frozen value a caller hands a backend to say *how* to
generate: sampler values, stop sequences, a JSON Schema for the answer,
llama.cpp's slot and reasoning budget, and an `extra_body` escape hatch. Every
field defaults to `None`, and a field that is `None` never reaches the wire, so
a server that knows none of them sees the body it always saw.

Values are checked when a `Settings` is built, long before any network I/O; a
bad one raises `InvalidArgumentError` (a `ValueError`) or `InvalidTypeError`
(a `TypeError`) whose message names the field.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Mapping
from typing import Any, Final

from ..errors import InvalidArgumentError, InvalidTypeError
from .checks import CHECKS as _CHECKS
from .checks import describe as _describe

__all__ = ["Settings"]

# Fields that only shape another field, or only matter locally, and so have no
# wire name of their own unless a provider's `field_names` gives them one.
_NOT_SENT_BY_DEFAULT: Final = frozenset({"json_schema_name", "json_schema_strict", "max_context"})


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True, repr=False)
class Settings:
    """Generation settings for one request; every field is optional.

    Build it with keywords only; each field defaults to `None`, which means
    "not sent" (the server's own default applies). Values are validated on
    construction and a bad one raises `InvalidArgumentError` (`ValueError`) or
    `InvalidTypeError` (`TypeError`) naming the field. Mappings you pass
    (`json_schema`, `logit_bias`, `extra_body`) are copied, so editing your
    dict later changes nothing here; treat the stored ones as read-only.

    `to_body()` turns the set fields into OpenAI request-body members;
    `replace()` and `merged()` return new, validated objects. Equality compares
    every field; `hash()` works only while no mapping field is set.

        s = Settings(max_tokens=256, temperature=0.2, stop=["\\n\\n"])
        s.to_body()  # {"max_tokens": 256, "temperature": 0.2, "stop": ["\\n\\n"]}
    """

    max_tokens: int | None = None
    """Most tokens to generate (reasoning tokens count too), an int >= 1; `None`: not sent."""
    temperature: float | None = None
    """Sampling temperature, a finite number >= 0 (0 is near-greedy); `None`: not sent."""
    top_p: float | None = None
    """Nucleus sampling: keep the fewest tokens holding this much probability, in [0, 1];
    `None`: not sent."""
    top_k: int | None = None
    """Keep only the k most likely tokens, an int >= 0 (0 disables it); `None`: not sent."""
    min_p: float | None = None
    """Drop tokens below this fraction of the top token's probability, in [0, 1];
    `None`: not sent."""
    typical_p: float | None = None
    """Locally typical sampling mass, in [0, 1] (1 disables it); `None`: not sent."""
    repetition_penalty: float | None = None
    """Multiplicative penalty on repeated tokens, a number > 0 (1 disables it); `None`: not sent."""
    frequency_penalty: float | None = None
    """OpenAI's count-scaled repeat penalty, in [-2, 2]; `None`: not sent."""
    presence_penalty: float | None = None
    """OpenAI's flat penalty on any token already present, in [-2, 2]; `None`: not sent."""
    seed: int | None = None
    """Sampling seed, any int (llama.cpp reads -1 as random); `None`: not sent."""
    stop: str | list[str] | tuple[str, ...] | None = None
    """A stop sequence, or a list/tuple of them (stored as a tuple), each non-empty;
    `None`: not sent."""
    logit_bias: Mapping[int | str, float] | None = None
    """Token id (int >= 0 or non-empty str) to a bias in [-100, 100]; keys go out as
    strings; `None`: not sent."""
    logprobs: bool | None = None
    """Whether to return log probabilities of the sampled tokens; `None`: not sent."""
    top_logprobs: int | None = None
    """How many alternatives to return per token with `logprobs`, an int in [0, 20];
    `None`: not sent."""
    json_schema: Mapping[str, Any] | None = None
    """A JSON Schema (an object, checked against its meta-schema) the answer must match;
    sent as `response_format`; `None`: not sent."""
    json_schema_name: str | None = None
    """The schema's name in `response_format`, matching `[A-Za-z0-9_-]{1,64}`;
    `None`: `"response"` is used. Never sent on its own."""
    json_schema_strict: bool | None = None
    """`response_format`'s `strict` flag; `None`: `False` is used. Never sent on its own."""
    reasoning_effort: str | None = None
    """How hard a reasoning model should think (`"none"`, `"low"`, `"high"`, ... — any
    non-empty str, since providers differ); `None`: not sent."""
    reasoning_budget_tokens: int | None = None
    """llama.cpp's per-request thinking budget, an int >= 0, or -1 for unlimited;
    `None`: not sent."""
    id_slot: int | None = None
    """The llama.cpp slot to run on (pins its KV cache), an int >= 0, or -1 to let the
    server choose; `None`: not sent."""
    cache_prompt: bool | None = None
    """Whether llama.cpp may reuse the slot's cached prompt prefix; `None`: not sent."""
    parallel_tool_calls: bool | None = None
    """Whether the model may call several tools in one turn; `None`: not sent."""
    max_context: int | None = None
    """The context window to budget for, an int >= 1. Local by default (not an OpenAI
    field); a provider may map it, e.g. KoboldCpp's `max_context_length`.
    `None`: not sent."""
    xtc_probability: float | None = None
    """Chance that XTC removes the top choices at a step, in [0, 1]; `None`: not sent."""
    xtc_threshold: float | None = None
    """Probability a token needs to count as a top choice for XTC, in [0, 1];
    `None`: not sent."""
    dry_multiplier: float | None = None
    """Strength of the DRY repetition penalty, a number >= 0 (0 disables it);
    `None`: not sent."""
    dry_base: float | None = None
    """Base of DRY's exponential penalty growth, a number >= 1; `None`: not sent."""
    dry_allowed_length: int | None = None
    """Longest repeat DRY leaves unpenalised, an int >= 0; `None`: not sent."""
    dry_sequence_breakers: list[str] | tuple[str, ...] | None = None
    """Strings that end a DRY repeat match, a list/tuple of non-empty str (stored as a
    tuple); `None`: not sent (the server's breakers apply)."""
    extra_body: Mapping[str, Any] | None = None
    """Extra body members, JSON values under str keys, merged last so they override
    every other field; `None`: nothing extra is sent."""

    def __post_init__(self) -> None:
        for name in _FIELD_NAMES:
            value = getattr(self, name)
            if value is not None:
                checked = _CHECKS[name](name, value)
                if checked is not value:
                    object.__setattr__(self, name, checked)

    def __repr__(self) -> str:
        """Show only the fields that are set, e.g. `Settings(max_tokens=64, temperature=0.2)`."""
        inner = ", ".join(f"{name}={value!r}" for name, value in _set_items(self))
        return f"Settings({inner})"

    def replace(self, **changes: Any) -> Settings:
        """Return a copy with `changes` applied; the original is left as it is.

        The changed values are validated like the constructor's (`None` unsets a
        field). An unknown field name raises `InvalidTypeError` naming it.
        """
        checked: dict[str, Any] = {}
        for name, value in changes.items():
            _check_field_name(name, "Settings.replace()")
            checked[name] = None if value is None else _CHECKS[name](name, value)
        return self._with(checked)

    def is_set(self, name: str) -> bool:
        """Return whether field `name` is set (not `None`).

        An unknown name raises `InvalidTypeError`.
        """
        _check_field_name(name, "Settings.is_set()")
        return getattr(self, name) is not None

    def set_fields(self) -> dict[str, Any]:
        """Return the fields that are set, in declaration order, as a new dict.

        Mapping values are deep copies, so the result can be edited freely.
        """
        return {name: _copied(value) for name, value in _set_items(self)}

    def merged(self, other: Settings | None) -> Settings:
        """Return these settings overlaid with `other`: every field set on `other` wins.

        `extra_body` is merged key by key (`other`'s keys win) rather than replaced.
        A backend calls this to combine its default settings with a call's own.
        `other=None` returns `self`.
        """
        if other is None:
            return self
        if not isinstance(other, Settings):
            raise InvalidTypeError(
                f"Settings.merged() takes a Settings or None, got {_describe(other)}"
            )
        changes = dict(_set_items(other))
        if not changes:
            return self
        if not _set_items(self):
            return other  # the common case: a backend with no defaults of its own
        if self.extra_body is not None and other.extra_body is not None:
            changes["extra_body"] = {**self.extra_body, **other.extra_body}
        # Both sides were validated when they were built, so nothing is re-checked.
        return self._with(changes)

    def to_body(self, field_names: Mapping[str, str | None] | None = None) -> dict[str, Any]:
        """Return the OpenAI request-body members for the set fields, as a new dict.

        Each field goes out under its own name, except that `json_schema` (with
        `json_schema_name` and `json_schema_strict`) becomes
        `response_format: {"type": "json_schema", "json_schema": {"name", "schema",
        "strict"}}`, and `max_context` is not sent. `extra_body` is merged last, so
        its keys override everything else.

        `field_names` lets a provider rename or drop fields: it maps a field name
        to its wire name, or to `None` to drop it (e.g. `{"repetition_penalty":
        "repeat_penalty"}`). Naming `json_schema` there sends the bare schema under
        that name instead of `response_format`; `extra_body` can only be dropped.
        Values are JSON-ready (`stop` stays a str if it was one, tuples become
        lists, `logit_bias` keys become strings) and share nothing with `self`.
        """
        names = _checked_field_names(field_names)
        body: dict[str, Any] = {}
        for name, value in _set_items(self):
            if name == "extra_body":
                continue
            if name in names:
                wire = names[name]
            elif name == "json_schema":
                body["response_format"] = self._response_format()
                continue
            else:
                wire = None if name in _NOT_SENT_BY_DEFAULT else name
            if wire is not None:
                body[wire] = _wire_value(value)
        if self.extra_body is not None and names.get("extra_body", "") is not None:
            body.update(copy.deepcopy(self.extra_body))
        return body

    def _with(self, checked: Mapping[str, Any]) -> Settings:
        # Built without __init__ so the fields that did not change (a JSON Schema
        # costs milliseconds to check) are not validated again. There are no
        # cross-field rules, so checking only the changed fields is complete.
        new = object.__new__(type(self))
        for name in _FIELD_NAMES:
            object.__setattr__(new, name, checked.get(name, getattr(self, name)))
        return new

    def _response_format(self) -> dict[str, Any]:
        return {
            "type": "json_schema",
            "json_schema": {
                "name": "response" if self.json_schema_name is None else self.json_schema_name,
                "schema": copy.deepcopy(self.json_schema),
                "strict": bool(self.json_schema_strict),
            },
        }


_FIELD_NAMES: Final = tuple(field.name for field in dataclasses.fields(Settings))


# --- field names and wire values


def _check_field_name(name: Any, where: str) -> None:
    if name in _FIELD_NAMES:
        return
    import difflib  # only on this error path

    close = difflib.get_close_matches(str(name), _FIELD_NAMES, n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    raise InvalidTypeError(f"{where} got an unknown field {name!r}{hint}")


def _checked_field_names(field_names: Mapping[str, str | None] | None) -> Mapping[str, str | None]:
    if field_names is None:
        return {}
    if not isinstance(field_names, Mapping):
        raise InvalidTypeError(
            f"to_body() field_names must be a mapping or None, got {_describe(field_names)}"
        )
    for name, wire in field_names.items():
        _check_field_name(name, "to_body() field_names")
        if wire is not None and (not isinstance(wire, str) or not wire):
            raise InvalidTypeError(
                f"to_body() field_names[{name!r}] must be a non-empty str or None, "
                f"got {_describe(wire)}"
            )
        if name == "extra_body" and wire is not None:
            raise InvalidArgumentError(
                "to_body() field_names['extra_body'] can only be None: extra_body is "
                "merged into the body, it has no wire name"
            )
    return field_names


def _wire_value(value: Any) -> Any:
    if isinstance(value, tuple):
        return list(value)
    if isinstance(value, dict):
        # logit_bias may have int keys; JSON object keys are strings.
        return {str(key): copy.deepcopy(item) for key, item in value.items()}
    return value


def _copied(value: Any) -> Any:
    return copy.deepcopy(value) if isinstance(value, dict) else value


def _set_items(settings: Settings) -> list[tuple[str, Any]]:
    """`settings`' fields that are set, in declaration order, as (name, value) pairs."""
    return [
        (name, value) for name in _FIELD_NAMES if (value := getattr(settings, name)) is not None
    ]
