"""Gemini ``functionCall`` parts as whole `ToolCall`s, streamed arguments included.

Pure, no I/O. A ``functionCall`` part with a ``name`` and no ``willContinue``
is a whole call. Vertex AI's streamed function-call arguments
(``streamFunctionCallArguments``) send instead: a part with the ``name`` and
``willContinue: true`` (the call begins), parts with ``partialArgs``
(``[{"jsonPath": "$.location", "stringValue": "Bos", "willContinue": true}]``,
string values joined, other values set), then an empty ``functionCall: {}``
(the call is done). A call still open when the finish comes lands then.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final

from ..tools import ToolCall, decoded_call

__all__ = ["PartialCalls", "whole_call"]

_STEP: Final = re.compile(r"\.([^.\[\]]+)|\[(\d+)\]|\['([^']*)'\]")
_VALUE_KEYS: Final = ("numberValue", "boolValue", "structValue", "listValue")


def whole_call(function_call: Mapping[str, Any], call_id: str) -> ToolCall:
    """A complete ``functionCall`` (``name``, ``args`` object) as a `ToolCall`."""
    return decoded_call(function_call.get("name"), function_call.get("args"), call_id)


class PartialCalls:
    """The one call whose arguments are still streaming; None open most of the time."""

    def __init__(self) -> None:
        self._open: ToolCall | None = None

    @property
    def open_call(self) -> ToolCall | None:
        """The call being assembled; None when none is."""
        return self._open

    def begin(self, name: str, call_id: str) -> list[ToolCall]:
        """A call begins; returns the call it closes (one still open), if any."""
        landed = self.finish()
        self._open = ToolCall(name=name, arguments={}, id=call_id)
        return landed

    def feed(self, function_call: Mapping[str, Any]) -> list[ToolCall]:
        """A nameless ``functionCall`` part: arguments for the open call, or its end."""
        pieces = function_call.get("partialArgs")
        if isinstance(pieces, list) and self._open is not None:
            for piece in pieces:
                if isinstance(piece, Mapping):
                    _apply(self._open.arguments, piece)
        if pieces or function_call.get("willContinue") is True:
            return []
        return self.finish()

    def finish(self) -> list[ToolCall]:
        """Close the open call (at its ``functionCall: {}``, or at the finish)."""
        call, self._open = self._open, None
        return [] if call is None else [call]


def _apply(arguments: dict[str, Any], piece: Mapping[str, Any]) -> None:
    """Set (or, for ``stringValue``, extend) the value at ``jsonPath`` in `arguments`."""
    path = piece.get("jsonPath")
    steps = _steps(path) if isinstance(path, str) else None
    if not steps:
        return
    target: Any = arguments
    for step, following in zip(steps, [*steps[1:], None], strict=True):
        if following is None:
            _put(target, step, piece)
            return
        target = _child(target, step, following)
        if target is None:
            return


def _steps(path: str) -> list[str | int] | None:
    if not path.startswith("$"):
        return None
    steps: list[str | int] = []
    rest = path[1:]
    while rest:
        found = _STEP.match(rest)
        if found is None:
            return None
        key, index, quoted = found.groups()
        steps.append(int(index) if index is not None else key if key is not None else quoted)
        rest = rest[found.end() :]
    return steps


def _child(target: Any, step: str | int, following: str | int) -> Any:
    """The container at `step` in `target`, made when missing; None when impossible."""
    empty: Any = [] if isinstance(following, int) else {}
    if isinstance(step, str) and isinstance(target, dict):
        return target.setdefault(step, empty)
    if isinstance(step, int) and isinstance(target, list):
        while len(target) <= step:
            target.append(None)
        if target[step] is None:
            target[step] = empty
        return target[step]
    return None


def _put(target: Any, step: str | int, piece: Mapping[str, Any]) -> None:
    if isinstance(step, int):
        if not isinstance(target, list):
            return
        while len(target) <= step:
            target.append(None)
    elif not isinstance(target, dict):
        return
    current = target[step] if isinstance(step, int) else target.get(step)
    if isinstance(piece.get("stringValue"), str):
        prefix = current if isinstance(current, str) else ""
        target[step] = prefix + piece["stringValue"]
        return
    if "nullValue" in piece:
        target[step] = None
        return
    for key in _VALUE_KEYS:
        if key in piece:
            target[step] = piece[key]
            return
