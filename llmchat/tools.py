"""Tool calls: one whole call a model made, in every dialect llmchat speaks."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from . import fastjson
from .errors import InvalidTypeError

__all__ = ["ToolCall", "ToolCallAssembler"]


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One complete tool call.

    `arguments` is always a dict: the decoded JSON object the model wrote.
    When the model's arguments were not a JSON object, `arguments` is ``{}``,
    `arguments_undecodable` is True and `arguments_json` keeps the text as it
    came, so nothing is lost and nothing crashes.
    """

    name: str
    """The function name."""
    arguments: dict[str, Any] = field(default_factory=dict)
    """Decoded arguments; ``{}`` when none were given or they were undecodable."""
    id: str = ""
    """The provider's call id (``""`` when the provider sent none)."""
    type: str = "function"
    """The tool type; always ``"function"`` on the OpenAI wire today."""
    arguments_json: str | None = None
    """The arguments exactly as the provider sent them, when they came as text."""
    arguments_undecodable: bool = False
    """True when `arguments_json` is not a JSON object."""

    @classmethod
    def from_openai(cls, data: Mapping[str, Any]) -> ToolCall:
        """Build from an OpenAI ``tool_calls[*]`` entry (``{"id", "type", "function"}``).

        ``function.arguments`` may be a JSON string (OpenAI) or an object (some
        servers); anything else is kept in `arguments_json` and flagged.
        """
        given = data.get("function")
        function: Mapping[str, Any] = given if isinstance(given, Mapping) else {}
        raw = function.get("arguments")
        arguments, text, undecodable = decode_arguments(raw)
        return cls(
            name=str(function.get("name") or ""),
            arguments=arguments,
            id=str(data.get("id") or ""),
            type=str(data.get("type") or "function"),
            arguments_json=text,
            arguments_undecodable=undecodable,
        )

    def to_openai(self) -> dict[str, Any]:
        """The OpenAI ``tool_calls[*]`` entry; arguments as the original text when known."""
        text = self.arguments_json
        if text is None:
            text = json.dumps(self.arguments, ensure_ascii=False, separators=(",", ":"))
        return {
            "id": self.id,
            "type": self.type,
            "function": {"name": self.name, "arguments": text},
        }

    def to_ollama(self) -> dict[str, Any]:
        """Ollama's ``message.tool_calls[*]`` entry: arguments as a JSON object."""
        return {"function": {"name": self.name, "arguments": dict(self.arguments)}}

    def to_anthropic_block(self) -> dict[str, Any]:
        """An Anthropic ``tool_use`` content block."""
        return {"type": "tool_use", "id": self.id, "name": self.name, "input": dict(self.arguments)}


def decode_arguments(raw: Any) -> tuple[dict[str, Any], str | None, bool]:
    """Return `(arguments, arguments_json, undecodable)` for a provider's arguments value."""
    if raw is None or raw == "":
        return {}, None, False
    if isinstance(raw, Mapping):
        return dict(raw), None, False
    if not isinstance(raw, str):
        return {}, json.dumps(raw), True
    try:
        value = fastjson.loads(raw)
    except ValueError:
        return {}, raw, True
    if not isinstance(value, dict):
        return {}, raw, True
    return value, raw, False


def decoded_call(name: object, raw_arguments: object, call_id: str) -> ToolCall:
    """A whole call from a provider's name and arguments value (`decode_arguments` reads it)."""
    arguments, text, undecodable = decode_arguments(raw_arguments)
    return ToolCall(
        name=str(name or ""),
        arguments=arguments,
        id=call_id,
        arguments_json=text,
        arguments_undecodable=undecodable,
    )


class _Slot:
    __slots__ = ("arguments", "id", "name", "parts", "type")

    def __init__(self) -> None:
        self.id = ""
        self.name = ""
        self.type = "function"
        self.parts: list[str] = []
        self.arguments: Mapping[str, Any] | None = None

    def build(self) -> ToolCall:
        raw: Any = self.arguments if self.arguments is not None else "".join(self.parts)
        arguments, text, undecodable = decode_arguments(raw)
        return ToolCall(
            name=self.name,
            arguments=arguments,
            id=self.id,
            type=self.type,
            arguments_json=text,
            arguments_undecodable=undecodable,
        )


class ToolCallAssembler:
    """Assembles streamed OpenAI tool-call fragments into whole `ToolCall`s.

    A push stage with no I/O: `feed(fragments)` takes one delta's
    ``tool_calls`` list; `finish()` returns every call begun since the last
    finish, whole, in the order they began, exactly once. Fragments are
    matched to a call by ``index``, else by ``id``, else by their position in
    the delta. A fragment bringing a new ``id`` under an ``index`` that already
    holds another call starts a new call (Ollama sends index 0 for every
    parallel call). String ``arguments`` are appended; an object replaces.
    """

    def __init__(self) -> None:
        self._slots: list[_Slot] = []
        self._by_key: dict[Any, _Slot] = {}

    @property
    def pending(self) -> bool:
        """True while some call has begun and not been handed out by `finish()`."""
        return bool(self._slots)

    def feed(self, fragments: Any) -> None:
        if not isinstance(fragments, list):
            return
        for position, fragment in enumerate(fragments):
            if isinstance(fragment, Mapping):
                self._apply(self._slot_for(fragment, position), fragment)

    def finish(self) -> list[ToolCall]:
        calls = [slot.build() for slot in self._slots]
        self._slots = []
        self._by_key = {}
        return calls

    def _slot_for(self, fragment: Mapping[str, Any], position: int) -> _Slot:
        return slot_for_fragment(fragment, position, self._slots, self._by_key, _Slot)

    @staticmethod
    def _apply(slot: _Slot, fragment: Mapping[str, Any]) -> None:
        call_id = fragment.get("id")
        if isinstance(call_id, str) and call_id and not slot.id:
            slot.id = call_id
        if isinstance(fragment.get("type"), str) and fragment["type"]:
            slot.type = fragment["type"]
        function = fragment.get("function")
        if not isinstance(function, Mapping):
            return
        name = function.get("name")
        if isinstance(name, str) and name and not slot.name:
            slot.name = name
        arguments = function.get("arguments")
        if isinstance(arguments, str):
            slot.parts.append(arguments)
        elif isinstance(arguments, Mapping):
            slot.arguments = arguments
            slot.parts = []


_S = TypeVar("_S", bound="_HasId")


class _HasId(Protocol):
    @property
    def id(self) -> str | None: ...


def slot_for_fragment(
    fragment: Mapping[str, Any],
    position: int,
    slots: list[_S],
    by_key: dict[Any, _S],
    new: Callable[[], _S],
) -> _S:
    """The call a tool-call fragment belongs to, in `slots` (a new one is appended if none).

    A fragment is matched by its ``index``, else its ``id``, else its position
    in the delta's list; one whose id differs from the matched call's starts a
    new call. Shared so every reader of fragments groups them the same way.
    """
    index = fragment.get("index")
    call_id = fragment.get("id")
    call_id = call_id if isinstance(call_id, str) and call_id else None
    if isinstance(index, int) and not isinstance(index, bool):
        key: Any = ("index", index)
    elif call_id is not None:
        key = ("id", call_id)
    else:
        key = ("position", position)
    slot = by_key.get(key)
    if slot is None and key[0] == "position" and position < len(slots):
        # An unkeyed fragment continues the call at its position (one begun by id).
        slot = slots[position]
    if slot is None or (call_id is not None and slot.id and slot.id != call_id):
        slot = new()
        slots.append(slot)
        by_key[key] = slot
    return slot


def tool_definitions(tools: object) -> Sequence[Any]:
    """`tools` when it is a list of tool definitions (a sequence, not a str or mapping).

    Raises `InvalidTypeError` otherwise, in the one wording every request
    builder (and `ToolLoop`) uses; the definitions themselves are each
    reader's to check.
    """
    if isinstance(tools, (str, bytes, Mapping)) or not isinstance(tools, Sequence):
        raise InvalidTypeError(
            f"tools must be a list of tool definitions, got {type(tools).__name__}"
        )
    return tools
