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

Schemas are recognised only where a body carries them:
``response_format.json_schema.schema``, ``response_format.schema`` (llama.cpp),
``tools[*].function.parameters``, ``functions[*].parameters`` and a top-level
``json_schema`` (KoboldCpp). Everything else — ``messages`` in full, and the
values of ``const``, ``default``, ``enum``, ``examples`` inside a schema — is
data, emitted with sorted members and never read as a schema.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from json.encoder import encode_basestring  # type: ignore[attr-defined]  # the C version
from typing import Any

from .errors import InvalidArgumentError, InvalidTypeError

__all__ = ["encode", "encode_str"]


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


def _body(body: Mapping[str, Any]) -> str:
    parts = []
    for key in sorted(body):
        value = body[key]
        if key == "response_format":
            text = _response_format(value)
        elif key == "tools":
            text = _list_of(value, _tool)
        elif key == "functions":
            text = _list_of(value, _function)
        elif key == "json_schema":
            text = _schema(value)
        else:
            text = _dump_data(value)
        parts.append(f"{encode_basestring(key)}:{text}")
    return "{" + ",".join(parts) + "}"


def _object(value: Mapping[str, Any], special: Mapping[str, Callable[[Any], str]]) -> str:
    """Encode a mapping with sorted members, routing `special` keys to their encoder."""
    parts = []
    for key in sorted(value):
        encoder = special.get(key, _dump_data)
        parts.append(f"{encode_basestring(key)}:{encoder(value[key])}")
    return "{" + ",".join(parts) + "}"


def _list_of(value: Any, item: Callable[[Any], str]) -> str:
    if not isinstance(value, (list, tuple)):
        return _dump_data(value)
    return "[" + ",".join(item(entry) for entry in value) + "]"


def _response_format(value: Any) -> str:
    if not isinstance(value, Mapping):
        return _dump_data(value)
    return _object(value, _RESPONSE_FORMAT)


def _json_schema_wrapper(value: Any) -> str:
    if not isinstance(value, Mapping):
        return _dump_data(value)
    return _object(value, _WRAPPER)


def _tool(value: Any) -> str:
    if not isinstance(value, Mapping):
        return _dump_data(value)
    return _object(value, _TOOL)


def _function(value: Any) -> str:
    if not isinstance(value, Mapping):
        return _dump_data(value)
    return _object(value, _FUNCTION)


# -- schemas ----------------------------------------------------------------


def _schema(value: Any) -> str:
    """Encode one JSON Schema (a mapping; booleans and the rest are data)."""
    if not isinstance(value, Mapping):
        return _dump_data(value)
    parts = []
    for key in sorted(value):
        member = value[key]
        if key == "properties" and isinstance(member, Mapping):
            text = _properties(member, value.get("required"))
        elif key in _MAP_OF_SCHEMAS and isinstance(member, Mapping):
            text = _schema_map(member, sorted(member))
        elif key in _LIST_OF_SCHEMAS:
            text = _list_of(member, _schema)
        elif key == "items":  # a schema, or (draft 4-7) a list of them
            text = (
                _list_of(member, _schema)
                if isinstance(member, (list, tuple))
                else (_schema(member))
            )
        elif key in _ONE_SCHEMA:
            text = _schema(member)
        else:
            text = _dump_data(member)
        parts.append(f"{encode_basestring(key)}:{text}")
    return "{" + ",".join(parts) + "}"


def _properties(members: Mapping[str, Any], required: Any) -> str:
    return _schema_map(members, property_order(members, required))


def _schema_map(members: Mapping[str, Any], order: list[str]) -> str:
    return (
        "{"
        + ",".join(f"{encode_basestring(name)}:{_schema(members[name])}" for name in order)
        + "}"
    )


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


_WRAPPER: Mapping[str, Callable[[Any], str]] = {"schema": _schema}
_RESPONSE_FORMAT: Mapping[str, Callable[[Any], str]] = {
    "json_schema": _json_schema_wrapper,
    "schema": _schema,
}
_FUNCTION: Mapping[str, Callable[[Any], str]] = {"parameters": _schema}
_TOOL: Mapping[str, Callable[[Any], str]] = {"function": _function}
