"""Checking a routing config's data: the shipped JSON Schema, then what a schema cannot say.

`config_errors(data)` returns every problem at once, each naming its path the
way a reader finds it in the file (``models.fast[1].nodes[0]: unknown node
'gpu-c'``). The checks beyond the schema (node names a tier uses, duplicate
names, URL schemes, glob syntax) read the data defensively, so they run even
when the schema found something, and never raise on a malformed shape.
Pure: no environment, no I/O but reading the schema file once.
"""

from __future__ import annotations

import difflib
import functools
import json
import re
from collections.abc import Generator, Iterator, Mapping, Sequence
from importlib import resources
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

if TYPE_CHECKING:
    from jsonschema import Draft202012Validator, ValidationError

__all__ = ["config_errors", "glob_problem", "path_text", "schema"]

_PLAIN_KEY = re.compile(r"[A-Za-z0-9_-]+")
_JSON_TYPES = {
    dict: "a mapping",
    list: "a list",
    str: "a string",
    bool: "a boolean",
    int: "an integer",
    float: "a number",
    type(None): "null",
}


@functools.lru_cache(maxsize=1)
def schema() -> Mapping[str, Any]:
    """The JSON Schema that ships in the package (``config.schema.json``), read once."""
    text = resources.files(__package__).joinpath("config.schema.json").read_text("utf-8")
    loaded: dict[str, Any] = json.loads(text)
    return loaded


@functools.lru_cache(maxsize=1)
def _validator() -> Draft202012Validator:
    # Imported here: the proxy imports this package, and jsonschema only matters with --config.
    from jsonschema import Draft202012Validator

    return Draft202012Validator(schema())


def config_errors(data: object) -> list[str]:
    """Every problem with routing config `data`, schema first, each starting with its path."""
    errors = [msg for error in _validator().iter_errors(data) for msg in _schema_messages(error)]
    if isinstance(data, Mapping):
        errors.extend(_semantic_errors(data))
    return sorted(dict.fromkeys(errors), key=_path_order)


def path_text(parts: Sequence[str | int]) -> str:
    """``models.fast[1].nodes[0]`` from its parts; a key that is not a plain word is quoted."""
    text = ""
    for part in parts:
        if isinstance(part, int):
            text += f"[{part}]"
        elif _PLAIN_KEY.fullmatch(part):
            text += f".{part}" if text else part
        else:
            text += f"[{json.dumps(part, ensure_ascii=False)}]"
    return text or "(top level)"


def glob_problem(pattern: str) -> str | None:
    """What makes `pattern` a broken fnmatch glob (an unclosed ``[``), else None.

    fnmatch reads an unclosed ``[`` as a literal; in a config it is a typo.
    The scan is fnmatch.translate's.
    """
    i, n = 0, len(pattern)
    while i < n:
        i += 1
        if pattern[i - 1] != "[":
            continue
        j = i + (pattern[i : i + 1] == "!")
        j += pattern[j : j + 1] == "]"
        j = pattern.find("]", j)
        if j < 0:
            return f"unclosed '[' in glob {pattern!r}"
        i = j + 1
    return None


# -- the schema's findings, in the file's words ------------------------------


def _schema_messages(error: ValidationError) -> Iterator[str]:
    parts: list[str | int] = list(error.absolute_path)
    where = path_text(parts)
    kind, value = error.validator, error.instance
    expected: Any = error.validator_value
    if kind == "additionalProperties" and isinstance(value, Mapping):
        known = list(_schema_of(error).get("properties", {}))
        for key in value:
            if key not in known:
                guess = difflib.get_close_matches(str(key), known, n=1)
                hint = f"did you mean {guess[0]!r}? " if guess else ""
                where = path_text([*parts, str(key)])
                yield f"{where}: unknown key; {hint}known: {', '.join(known)}"
    elif kind == "required" and isinstance(value, Mapping):
        for key in expected:
            if key not in value:
                yield f"{path_text([*parts, key])}: required, missing"
    elif kind == "enum":
        yield f"{where}: {value!r} is not one of {', '.join(map(str, expected))}"
    elif kind == "type":
        wanted = _JSON_TYPES.get(_type_of(expected), expected)
        yield f"{where}: expected {wanted}, got {_kind(value)}"
    elif kind == "minimum":
        yield f"{where}: must be >= {expected}, got {value!r}"
    elif kind == "exclusiveMinimum":
        yield f"{where}: must be > {expected}, got {value!r}"
    elif kind in ("minItems", "minProperties"):
        yield f"{where}: must not be empty"
    elif kind == "minLength":
        yield f"{where}: must not be empty"
    elif kind == "pattern":
        yield f"{where}: {value!r} is not {_PATTERN_WORDS.get(expected, f'matching {expected}')}"
    elif kind == "propertyNames":
        yield f"{where}: name {value!r} is empty or longer than 200 characters"
    else:
        yield f"{where}: {error.message}"


_PATTERN_WORDS = {
    "^[A-Za-z0-9][A-Za-z0-9._:-]{0,63}$": "a name: up to 64 of A-Z a-z 0-9 . _ : -, "
    "starting with a letter or digit",
    "^[A-Za-z_][A-Za-z0-9_]*$": "an environment variable name",
}


def _schema_of(error: ValidationError) -> Mapping[str, Any]:
    return error.schema if isinstance(error.schema, Mapping) else {}


def _type_of(expected: object) -> type:
    names = {"object": dict, "array": list, "string": str, "integer": int, "number": float}
    return names.get(str(expected), object)


def _kind(value: object) -> str:
    return _JSON_TYPES.get(type(value), type(value).__name__)


# -- what the schema cannot say ----------------------------------------------


def _semantic_errors(data: Mapping[Any, Any]) -> Iterator[str]:
    nodes = _items(data.get("nodes"))
    known = yield from _node_errors(nodes)
    models = data.get("models")
    if isinstance(models, Mapping):
        for alias, tiers in models.items():
            yield from _alias_errors(alias, tiers, known)
    yield from _key_errors(_items(data.get("keys")))
    yield from _budget_errors(_items(data.get("keys")), bool(data.get("prices")))


def _budget_errors(keys: list[tuple[int, Mapping[Any, Any]]], priced: bool) -> Iterator[str]:
    """A budget that limits nothing, or a cost budget with no price to count cost by."""
    for i, key in keys:
        budget = key.get("budget")
        if not isinstance(budget, Mapping):
            continue
        if all(budget.get(limit) is None for limit in ("cost", "tokens", "rpm")):
            yield f"keys[{i}].budget: sets no limit (cost, tokens or rpm)"
        if budget.get("cost") is not None and not priced:
            yield f"keys[{i}].budget.cost: needs `prices` (no request would ever cost anything)"


def _items(value: object) -> list[tuple[int, Mapping[Any, Any]]]:
    if not isinstance(value, list):
        return []
    return [(i, item) for i, item in enumerate(value) if isinstance(item, Mapping)]


def _node_errors(
    nodes: list[tuple[int, Mapping[Any, Any]]],
) -> Generator[str, None, set[str]]:
    yield from _duplicates("nodes", nodes, "name")
    for i, node in nodes:
        url = node.get("url")
        if isinstance(url, str) and url:
            problem = _url_problem(url)
            if problem:
                yield f"nodes[{i}].url: {problem}"
    return {node["name"] for _, node in nodes if isinstance(node.get("name"), str)}


def _url_problem(url: str) -> str | None:
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - a bad port raises here
    except ValueError as exc:
        return f"{url!r} is not a URL ({exc})"
    if parts.scheme not in ("http", "https"):
        return f"{url!r} must start with http:// or https://"
    if not parts.hostname:
        return f"{url!r} names no host"
    return None


def _alias_errors(alias: object, tiers: object, known: set[str]) -> Iterator[str]:
    if not isinstance(alias, str):
        yield f"models: the name {alias!r} is not a string (quote it in YAML)"
        return
    problem = glob_problem(alias)
    if problem:
        yield f"{path_text(['models', alias])}: {problem}"
    for t, tier in _items(tiers):
        names = tier.get("nodes")
        if not isinstance(names, list):
            continue
        seen: set[str] = set()
        for n, name in enumerate(names):
            where = path_text(["models", alias, t, "nodes", n])
            if not isinstance(name, str):
                continue
            if name not in known:
                yield f"{where}: unknown node {name!r}"
            elif name in seen:
                yield f"{where}: {name!r} is listed twice in this tier"
            seen.add(name)


def _key_errors(keys: list[tuple[int, Mapping[Any, Any]]]) -> Iterator[str]:
    yield from _duplicates("keys", keys, "name")
    yield from _duplicates("keys", keys, "key_env")
    for i, key in keys:
        models = key.get("models")
        for m, pattern in enumerate(models if isinstance(models, list) else []):
            problem = glob_problem(pattern) if isinstance(pattern, str) else None
            if problem:
                yield f"keys[{i}].models[{m}]: {problem}"


def _duplicates(
    where: str, items: list[tuple[int, Mapping[Any, Any]]], field: str
) -> Iterator[str]:
    first: dict[str, int] = {}
    for i, item in items:
        value = item.get(field)
        if not isinstance(value, str):
            continue
        if value in first:
            yield f"{where}[{i}].{field}: duplicate {value!r} (also {where}[{first[value]}])"
        else:
            first[value] = i


def _path_order(message: str) -> tuple[int, ...]:
    # The top level (an unknown section too) first, then the sections in the file's
    # order, then by the numbers in the path.
    head = message.split(":", 1)[0]
    section = next((n for n, s in enumerate(_SECTIONS) if head.startswith(s)), 0)
    return (section, *(int(d) for d in re.findall(r"\[(\d+)\]", head)))


_SECTIONS = ("(top level)", "nodes", "models", "keys", "routing")
