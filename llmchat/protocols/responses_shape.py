"""How one Response's output items look for the request that asked: tools and reasoning.

The Responses face (``llmchat.proxy.faces.responses.translate``) serves tool types a chat
upstream does not have by folding them into function tools; on the way out,
each upstream function call goes back as what the client declared: a
``function_call`` (with its ``namespace`` when it came from a ``namespace``
tool) or a ``custom_tool_call`` whose ``input`` is the one string argument
the stand-in function took. The request also decides the reasoning item's
shape: summary parts (``reasoning.summary``) and ``encrypted_content``
(``include``). The face records these in the echo under private keys; the
stream and the whole-body answer read them here, so both shape items alike.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from ..tools import decode_arguments
from .responses_objects import Echo, custom_tool_call_item, function_call_item, reasoning_item

__all__ = ["CALLS", "CARRY", "SUMMARY", "Declared", "OutputShape", "custom_input"]

CALLS: Final = "_calls"
"""The echo's key for the upstream name -> `Declared` map (never part of the Response)."""
SUMMARY: Final = "_summary"
"""The echo's key for "reasoning goes out as summary parts too"."""
CARRY: Final = "_carry"
"""The echo's key for "reasoning goes out in ``encrypted_content`` too"."""
CUSTOM_ARGUMENT: Final = "input"
"""The one argument a custom tool's stand-in function takes: the raw input text."""


@dataclass(frozen=True)
class Declared:
    """One tool as the client declared it: ``function`` or ``custom``, its name, its namespace."""

    kind: str
    name: str
    namespace: str | None = None


def custom_input(arguments: str) -> str | None:
    """A custom tool's raw input from its stand-in's JSON `arguments`; None if unreadable.

    The ``input`` string; a model that named the one argument otherwise is
    still understood when the object holds exactly one string.
    """
    decoded, _, undecodable = decode_arguments(arguments)  # llmchat's one JSON reader
    if undecodable:
        return None
    value = decoded.get(CUSTOM_ARGUMENT)
    if isinstance(value, str):
        return value
    strings = [v for v in decoded.values() if isinstance(v, str)]
    return strings[0] if len(decoded) == 1 and strings else None


@dataclass(frozen=True)
class OutputShape:
    """What the request asked of its output items (see the module)."""

    calls: Mapping[str, Declared]
    summary: bool = False
    carry: bool = False

    @classmethod
    def of(cls, echo: Echo) -> OutputShape:
        calls = echo.get(CALLS)
        return cls(
            calls if isinstance(calls, Mapping) else {},
            bool(echo.get(SUMMARY)),
            bool(echo.get(CARRY)),
        )

    def is_custom(self, upstream_name: str) -> bool:
        declared = self.calls.get(upstream_name)
        return declared is not None and declared.kind == "custom"

    def readable(self, upstream_name: str, arguments: str) -> bool:
        """False for a custom tool's call whose raw input cannot be read from `arguments`."""
        return not self.is_custom(upstream_name) or custom_input(arguments) is not None

    def reasoning(self, item_id: str, text: str | None, status: str) -> dict[str, Any]:
        return reasoning_item(item_id, text, status, summary=self.summary, carry=self.carry)

    def call(
        self, item_id: str, call_id: str, upstream_name: str, arguments: str, status: str
    ) -> dict[str, Any]:
        """The output item for one upstream function call, as the client declared the tool."""
        declared = self.calls.get(upstream_name)
        if declared is None:
            return function_call_item(item_id, call_id, upstream_name, arguments, status)
        if declared.kind == "custom":
            text = custom_input(arguments) if status != "in_progress" else None
            return custom_tool_call_item(
                item_id, call_id, declared.name, text or "", status, declared.namespace
            )
        return function_call_item(
            item_id, call_id, declared.name, arguments, status, declared.namespace
        )
