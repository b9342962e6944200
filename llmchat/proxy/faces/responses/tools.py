"""The Responses face's tools: every tool type a client declares, as chat function tools.

Pure, no I/O. A chat upstream knows one kind of tool, the JSON-argument
function; the Responses API has several. By the face's liberal rule
(`translate`), each is served, folded or dropped, never refused:

- ``function`` is sent as is;
- ``namespace`` (a named group of function and custom tools, as Codex sends
  its own) is flattened into its tools;
- ``custom`` (a freeform tool whose input is raw text, optionally under a
  grammar) becomes a function with one string argument, ``input``; its
  grammar goes into the description, since the model must still write it;
- hosted tools the upstream cannot run (``web_search``, ``file_search``,
  ``code_interpreter``, ``mcp``, ``tool_search`` …) and any unknown type are
  dropped, one DEBUG line each.

Upstream names: a tool keeps its own name when that name is unique across
everything served, since that is the name the client's prompts and the
tool descriptions use (Codex's ``exec`` description says ``tools.exec_command``,
not ``functions__exec_command``). Only names that collide across namespaces
become ``namespace__name``. `ToolSet.calls` maps each upstream name back to
what the client declared (kind, name, namespace), so a call goes back as the
``function_call`` or ``custom_tool_call`` item, with the ``namespace`` field,
exactly as the real API sends it.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ....errors import InvalidArgumentError, InvalidTypeError
from ....protocols.responses_shape import CUSTOM_ARGUMENT, Declared
from ...field_checks import json_type, require_bool, require_mapping, require_str

__all__ = ["CUSTOM_ARGUMENT", "Declared", "ToolSet", "dropped", "tool_set"]

log = logging.getLogger("llmchat.proxy")


def dropped(path: str, why: str) -> None:
    """The one DEBUG line the liberal rule leaves for a field the face does not send."""
    log.debug("responses face: dropped %s (%s)", path, why)


@dataclass
class ToolSet:
    """Every served tool: chat definitions, the Responses echo, and the names mapped both ways."""

    chat: list[dict[str, Any]] = field(default_factory=list)
    echo: list[dict[str, Any]] = field(default_factory=list)
    calls: dict[str, Declared] = field(default_factory=dict)
    """Upstream function name -> the tool the client declared."""

    def upstream_name(self, name: str, namespace: str | None = None) -> str:
        """The upstream name of the client's tool `name` (in `namespace`), or `name` itself."""
        fallback = None
        for upstream, declared in self.calls.items():
            if declared.name == name:
                if declared.namespace == namespace:
                    return upstream
                fallback = fallback or upstream
        return fallback or name


_Entry = tuple[str | None, dict[str, Any], Declared]  # (namespace, chat function, declared)


def tool_set(top: Any, extra: list[tuple[str, Any]]) -> ToolSet:
    """The served tools of a request's ``tools`` (`top`) and its ``additional_tools``
    input items (`extra`: each item's path and its ``tools`` value)."""
    out = ToolSet()
    entries: list[_Entry] = []
    if top is not None:
        if not isinstance(top, list):
            raise InvalidTypeError(f"tools: must be a list, not {json_type(top)}")
        for index, given in enumerate(top):
            echoed = _collect(given, f"tools[{index}]", None, entries)
            if echoed is not None:
                out.echo.append(echoed)
    for where, tools in extra:
        if not isinstance(tools, list):
            dropped(where, f"not a list of tools but {json_type(tools)}")
            continue
        for index, given in enumerate(tools):
            _collect(given, f"{where}[{index}]", None, entries)
    counts: dict[str, int] = {}
    for _, function, _ in entries:
        counts[function["name"]] = counts.get(function["name"], 0) + 1
    for namespace, function, declared in entries:
        name = function["name"]
        if counts[name] > 1 and namespace:
            name = f"{namespace}__{name}"
        base, suffix = name, 2
        while name in out.calls:  # the same name twice in one namespace: keep both callable
            name, suffix = f"{base}_{suffix}", suffix + 1
        out.calls[name] = declared
        out.chat.append({"type": "function", "function": {**function, "name": name}})
    return out


def _collect(
    given: Any, where: str, namespace: str | None, entries: list[_Entry]
) -> dict[str, Any] | None:
    """Add the functions `given` holds to `entries`; the tool's echo, or None if dropped."""
    tool = require_mapping(given, where)
    kind = tool.get("type")
    if kind == "function":
        function, echoed = _function(tool, where)
        entries.append((namespace, function, Declared("function", function["name"], namespace)))
        return echoed
    if kind == "custom":
        function = _custom(tool, where)
        entries.append((namespace, function, Declared("custom", function["name"], namespace)))
        return dict(tool)
    if kind == "namespace" and namespace is None:
        name = require_str(tool.get("name"), f"{where}.name")
        inner = tool.get("tools")
        if not isinstance(inner, list):
            raise InvalidTypeError(f"{where}.tools: must be a list, not {json_type(inner)}")
        for index, member in enumerate(inner):
            _collect(member, f"{where}.tools[{index}]", name or None, entries)
        return dict(tool)
    dropped(f"{where} ({kind!r})", "a tool the upstream cannot run")
    return None


def _function(tool: Mapping[str, Any], where: str) -> tuple[dict[str, Any], dict[str, Any]]:
    name = _name(tool, where)
    function: dict[str, Any] = {"name": name}
    echoed: dict[str, Any] = {"type": "function", "name": name}
    description = tool.get("description")
    if description is not None:
        function["description"] = echoed["description"] = require_str(
            description, f"{where}.description"
        )
    parameters = tool.get("parameters")
    if parameters is not None:
        function["parameters"] = dict(require_mapping(parameters, f"{where}.parameters"))
    else:
        function["parameters"] = {"type": "object", "properties": {}}
    echoed["parameters"] = function["parameters"]
    strict = tool.get("strict")
    if strict is not None:
        function["strict"] = require_bool(strict, f"{where}.strict")
    echoed["strict"] = bool(strict) if strict is not None else True
    return function, echoed


def _custom(tool: Mapping[str, Any], where: str) -> dict[str, Any]:
    name = _name(tool, where)
    text = tool.get("description")
    parts = [require_str(text, f"{where}.description")] if text else []
    parts.append(
        f"This is a freeform tool: put its raw input, exactly as written, in the "
        f"`{CUSTOM_ARGUMENT}` string (it is not JSON)."
    )
    shape = tool.get("format")
    if isinstance(shape, Mapping) and shape.get("type") == "grammar":
        syntax = shape.get("syntax") or "lark"
        definition = shape.get("definition")
        if isinstance(definition, str) and definition.strip():
            parts.append(f"The input must match this {syntax} grammar:\n{definition.strip()}")
    parameters = {
        "type": "object",
        "properties": {CUSTOM_ARGUMENT: {"type": "string", "description": "The raw input."}},
        "required": [CUSTOM_ARGUMENT],
        "additionalProperties": False,
    }
    return {"name": name, "description": "\n\n".join(parts), "parameters": parameters}


def _name(tool: Mapping[str, Any], where: str) -> str:
    name = require_str(tool.get("name"), f"{where}.name")
    if not name:
        raise InvalidArgumentError(f"{where}.name: must not be empty")
    return name
