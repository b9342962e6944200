"""Deterministic request-body bytes.

`encode(body)` turns a request body into the exact bytes llmchat posts. The
same body gives the same bytes on every call and in every process, which is
what lets a provider's prompt cache match a repeated request, and a JSON
Schema's fields reach the model in the order its ``required`` array names.

The rule (spec: REQUEST BODY SERIALIZATION):

- compact (``,`` and ``:``), UTF-8, non-ASCII written as itself;
- arrays keep their order;
- object members are sorted by code point;
- except a JSON Schema's ``properties``: the names in ``required`` first, in
  that array's order (absent names skipped, duplicates once), then the rest,
  sorted. This holds at every schema depth.

Schemas are recognised only where a body of some dialect carries them:
``response_format.json_schema.schema``, ``response_format.schema`` (llama.cpp),
``tools[*].function.parameters``, ``functions[*].parameters`` and a top-level
``json_schema`` (KoboldCpp); Anthropic's ``tools[*].input_schema`` and
``output_format.schema``; the Responses API's ``tools[*].parameters`` and
``text.format.schema``; Ollama's ``format``; Gemini's
``tools[*].functionDeclarations[*].parameters`` (or ``parametersJsonSchema``)
and ``generationConfig.responseSchema`` (or ``responseJsonSchema``).
Everything else — ``messages`` in full, and the values of ``const``,
``default``, ``enum``, ``examples`` inside a schema — is data, emitted with
sorted members and never read as a schema.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from json.encoder import encode_basestring  # the C version
from typing import Any, Final

from .errors import InvalidArgumentError, InvalidTypeError

__all__ = ["encode", "encode_data", "encode_str", "json_string"]


# Data subtrees go through the C encoder in one call: this is what keeps
# encode() within a small factor of plain json.dumps.
def _plain(value: Any) -> Any:
    """Let the C encoder take any mapping, not only dict; `_check` refused the rest."""
    if isinstance(value, Mapping):
        return dict(value)
    raise TypeError(f"a {type(value).__name__} cannot be sent as JSON")


_dump_data: Callable[[Any], str] = json.JSONEncoder(
    ensure_ascii=False,
    allow_nan=False,
    sort_keys=True,
    separators=(",", ":"),
    default=_plain,
).encode
# For parts already rebuilt in wire order: insertion order is the order.
_dump_ordered: Callable[[Any], str] = json.JSONEncoder(
    ensure_ascii=False,
    allow_nan=False,
    separators=(",", ":"),
    default=_plain,
).encode

json_string: Callable[[str], str] = encode_basestring
"""One string as a JSON string literal (quotes included), escaped exactly as `encode_data`
writes it: the C function its encoder calls. For the stream translators' event templates,
which splice one escaped string into constant bytes instead of encoding a whole dict per
token; ``.encode("utf-8")`` of a string with a lone surrogate raises `UnicodeEncodeError`
(a `ValueError`), as `encode_data` raises."""

_MAP_OF_SCHEMAS = frozenset(
    {"properties", "patternProperties", "$defs", "definitions", "dependentSchemas"}
)
_LIST_OF_SCHEMAS = frozenset({"prefixItems", "allOf", "anyOf", "oneOf"})
_ONE_SCHEMA = frozenset(
    {
        "additionalProperties",
        "additionalItems",
        "unevaluatedProperties",
        "unevaluatedItems",
        "contains",
        "not",
        "if",
        "then",
        "else",
        "propertyNames",
    }
)


def encode(body: Any) -> bytes:
    """Return the exact bytes llmchat would post for `body`.

    `body` is normally a request-body mapping, but any JSON value is accepted.
    Raises `ValueError` (`InvalidArgumentError`) for NaN/Infinity, a
    non-string object key or a lone surrogate, and `TypeError`
    (`InvalidTypeError`) for a value JSON cannot carry; each message names
    the path of the offending value. Nothing is sent when it raises.

        >>> encode({"model": "m", "messages": [{"role": "user", "content": "hi"}]})
        b'{"messages":[{"content":"hi","role":"user"}],"model":"m"}'
    """
    text = encode_str(body)
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidArgumentError(
            f"body: a string holds a lone surrogate ({text[exc.start]!r}), which UTF-8 cannot carry"
        ) from None


def encode_data(value: Any) -> bytes:
    """Compact, sorted-member UTF-8 JSON of plain data: no schema reordering, one C call.

    For what llmchat writes rather than posts — the stream translators' lines,
    written once per token — where a JSON Schema position cannot occur, and
    whose keys llmchat itself chose. Data `encode` accepts gives the bytes
    `encode` gives. NaN, a lone surrogate or a value JSON cannot carry raise
    `encode`'s errors, naming the path; unlike `encode`, a non-string key is
    written as a string, as `json.dumps` does, since checking every key would
    cost more than the encoding.
    """
    try:
        return _dump_data(value).encode("utf-8")
    except (ValueError, TypeError, UnicodeEncodeError):
        return encode(value)  # raises, and says what is wrong where


def encode_str(body: Any) -> str:
    """Like `encode`, but return the text before UTF-8 encoding."""
    _check(body)
    try:
        if isinstance(body, Mapping):
            return _body(body)
        return _dump_data(body)
    except ValueError as exc:  # the C encoder refusing a float the walk let pass
        raise InvalidArgumentError(f"body: {exc}") from None


# -- validation -----------------------------------------------------------


def _check(root: Any) -> None:
    """Refuse what JSON cannot carry, naming the path; raise before encoding.

    The C encoder would silently turn an int key into a string and reports a
    bad value without saying where it is, so the walk is ours. Paths are only
    built when something is wrong: each stack entry keeps its parent entry.
    """
    stack: list[tuple[Any, Any, str | int]] = []
    _check_value(root, None, "", stack)
    while stack:
        entry = stack.pop()
        node = entry[0]
        if isinstance(node, Mapping):
            for key, value in node.items():
                if type(key) is not str and not isinstance(key, str):
                    raise InvalidArgumentError(
                        f"{_path(entry)}: object keys must be strings, got "
                        f"{type(key).__name__} key {key!r}"
                    )
                _check_value(value, entry, key, stack)
        else:
            for index, value in enumerate(node):
                _check_value(value, entry, index, stack)


def _check_value(value: Any, parent: Any, step: str | int, stack: list[Any]) -> None:
    kind = type(value)
    if kind is str or kind is int or kind is bool or value is None:
        return
    if kind is dict or kind is list or isinstance(value, (Mapping, list, tuple)):
        stack.append((value, parent, step))
    elif isinstance(value, float):
        if not math.isfinite(value):
            raise InvalidArgumentError(
                f"{_path((value, parent, step))}: {value!r} is not valid JSON "
                "(NaN and Infinity cannot be sent)"
            )
    elif not isinstance(value, (str, int)):
        raise InvalidTypeError(
            f"{_path((value, parent, step))}: a {kind.__name__} cannot be sent as JSON; "
            "use dict, list, str, int, float, bool or None"
        )


def _path(entry: Any) -> str:
    steps: list[str] = []
    while entry is not None and entry[1] is not None:
        step = entry[2]
        steps.append(f"[{step}]" if type(step) is int else f".{step}")
        entry = entry[1]
    if entry is not None and entry[2] != "":
        step = entry[2]
        steps.append(f"[{step}]" if type(step) is int else f".{step}")
    return "body" + "".join(reversed(steps))


# -- body positions ---------------------------------------------------------
#
# A part of the body that may hold a schema is rebuilt as dicts whose
# insertion order is the wire order, then written by the C encoder in one call
# without sorting; the rest goes to the C encoder with sorted keys. One C call
# per part is what keeps encode() within a small factor of plain json.dumps.

_SCALARS: Final = frozenset({str, int, float, bool, type(None)})


def _body(body: Mapping[str, Any]) -> str:
    parts = []
    for key in sorted(body):
        value = body[key]
        builder = _BODY_POSITIONS.get(key)
        text = _dump_data(value) if builder is None else _dump_ordered(builder(value))
        parts.append(f"{encode_basestring(key)}:{text}")
    return "{" + ",".join(parts) + "}"


def _sorted_data(value: Any) -> Any:
    """`value` with every object's members in code-point order, at any depth."""
    kind = type(value)
    if kind in _SCALARS:
        return value
    if kind is dict or (kind is not list and kind is not tuple and isinstance(value, Mapping)):
        return {
            key: member if type(member) in _SCALARS else _sorted_data(member)
            for key in sorted(value)
            for member in (value[key],)
        }
    if kind is list or kind is tuple:
        return [item if type(item) in _SCALARS else _sorted_data(item) for item in value]
    return value


def _object(value: Any, special: Mapping[str, Callable[[Any], Any]]) -> Any:
    """A mapping with sorted members, `special` keys rebuilt by their builder."""
    if not isinstance(value, Mapping):
        return _sorted_data(value)
    out = {}
    for key in sorted(value):
        builder = special.get(key)
        out[key] = _sorted_data(value[key]) if builder is None else builder(value[key])
    return out


def _list_of(value: Any, item: Callable[[Any], Any]) -> Any:
    if not isinstance(value, (list, tuple)):
        return _sorted_data(value)
    return [item(entry) for entry in value]


def _response_format(value: Any) -> Any:
    return _object(value, _RESPONSE_FORMAT)


def _json_schema_wrapper(value: Any) -> Any:
    return _object(value, _WRAPPER)


def _tools(value: Any) -> Any:
    return _list_of(value, _tool)


def _tool(value: Any) -> Any:
    return _object(value, _TOOL)


def _functions(value: Any) -> Any:
    return _list_of(value, _function)


def _function(value: Any) -> Any:
    return _object(value, _FUNCTION)


# -- schemas ----------------------------------------------------------------


def _schema(value: Any) -> Any:
    """One JSON Schema in wire order (a mapping; booleans and the rest are data)."""
    if not isinstance(value, Mapping):
        return _sorted_data(value)
    out: dict[str, Any] = {}
    for key in sorted(value):
        member = value[key]
        if type(member) in _SCALARS:  # most members: "type", "description", booleans
            out[key] = member
            continue
        kind = _KEYWORDS.get(key)
        if kind is None:
            out[key] = _sorted_data(member)
        elif kind == "map" and isinstance(member, Mapping):
            order = (
                property_order(member, value.get("required"))
                if key == "properties"
                else sorted(member)
            )
            out[key] = {name: _schema(member[name]) for name in order}
        elif kind == "list" or (kind == "items" and isinstance(member, (list, tuple))):
            out[key] = _list_of(member, _schema)
        elif kind in ("one", "items"):
            out[key] = _schema(member)
        else:
            out[key] = _sorted_data(member)
    return out


def property_order(members: Mapping[str, Any], required: Any) -> list[str]:
    """Return the member names of a `properties` map in wire order.

    Required names first, in `required`'s order (names not in `members` are
    skipped, duplicates taken once), then the remaining names sorted.
    """
    order: list[str] = []
    if isinstance(required, (list, tuple)):
        seen: set[str] = set()
        for name in required:
            if type(name) is str and name in members and name not in seen:
                seen.add(name)
                order.append(name)
        if seen:
            order.extend(sorted(name for name in members if name not in seen))
            return order
    return sorted(members)


_KEYWORDS: Final[Mapping[str, str]] = {
    **dict.fromkeys(_MAP_OF_SCHEMAS, "map"),
    **dict.fromkeys(_LIST_OF_SCHEMAS, "list"),
    **dict.fromkeys(_ONE_SCHEMA, "one"),
    "items": "items",  # a schema, or (drafts 4-7) a list of them
}
_WRAPPER: Final[Mapping[str, Callable[[Any], Any]]] = {"schema": _schema}
_RESPONSE_FORMAT: Final[Mapping[str, Callable[[Any], Any]]] = {
    "json_schema": _json_schema_wrapper,
    "schema": _schema,
}
_FUNCTION: Final[Mapping[str, Callable[[Any], Any]]] = {
    "parameters": _schema,
    "parametersJsonSchema": _schema,  # Gemini
}
_TOOL: Final[Mapping[str, Callable[[Any], Any]]] = {
    "function": _function,  # OpenAI chat, Ollama
    "input_schema": _schema,  # Anthropic
    "parameters": _schema,  # OpenAI Responses (flat function tools)
    "functionDeclarations": _functions,  # Gemini
}
_TEXT: Final[Mapping[str, Callable[[Any], Any]]] = {"format": _json_schema_wrapper}
_GENERATION_CONFIG: Final[Mapping[str, Callable[[Any], Any]]] = {
    "responseSchema": _schema,
    "responseJsonSchema": _schema,
}
_BODY_POSITIONS: Final[Mapping[str, Callable[[Any], Any]]] = {
    "response_format": _response_format,
    "tools": _tools,
    "functions": _functions,
    "json_schema": _schema,
    "format": _schema,  # Ollama: "json" (data) or a schema
    "output_format": _json_schema_wrapper,  # Anthropic structured outputs
    "text": lambda value: _object(value, _TEXT),  # OpenAI Responses: text.format.schema
    "generationConfig": lambda value: _object(value, _GENERATION_CONFIG),  # Gemini
}
