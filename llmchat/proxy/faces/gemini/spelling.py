"""A GenerateContentRequest in camelCase, whichever spelling the client wrote; pure.

Google's API takes every field in camelCase or in snake_case (protobuf's JSON
mapping accepts both), and google-genai 3.x sends some in snake_case:
``parameters_json_schema`` on a function declaration, ``include_thoughts``,
``thinking_budget`` and ``thinking_level`` in ``thinkingConfig``. The face reads
one spelling, so a request is rewritten once, up front. What is the client's
own data keeps its keys as written: a call's ``args``, a result's
``response``, and every schema (property names are the user's).
When both spellings of a field are given, the camelCase one wins.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

__all__ = ["camel_case"]

# Fields whose value is the client's own data or a schema: kept as written.
_OPAQUE: Final = frozenset(
    {
        "args",
        "response",
        "parameters",
        "parametersJsonSchema",
        "responseSchema",
        "responseJsonSchema",
        "_responseJsonSchema",
        "responseJsonSchemaOrdering",
        "data",
    }
)


def camel_case(value: Any) -> Any:
    """`value` (a request, or any part of one) with every field name in camelCase."""
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for key, member in value.items():
            name = _camel(key) if isinstance(key, str) else key
            if name in out and name != key:
                continue  # the camelCase spelling came first: it wins
            out[name] = member if name in _OPAQUE else camel_case(member)
        return out
    if isinstance(value, list):
        return [camel_case(item) for item in value]
    return value


def _camel(name: str) -> str:
    if "_" not in name[1:]:
        return name
    head, *rest = name.split("_")
    if not head:  # a leading underscore (``_responseJsonSchema``) is part of the name
        return name
    return head + "".join(word[:1].upper() + word[1:] for word in rest)
