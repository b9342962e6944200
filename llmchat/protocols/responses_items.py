"""The Responses stream's output items in the making, and their pre-encoded delta events.

`ResponsesStream` keeps one `OutputItem` per item of the response's ``output``
(reasoning, message or function call) and one `PendingCall` per upstream tool
call; the per-token delta events are byte templates an item's own members
(`OutputItem.at`) are spliced into.
"""

from __future__ import annotations

from typing import Any, Final

from .. import wire_json
from .responses_objects import message_item
from .responses_shape import OutputShape

__all__ = [
    "ARGUMENTS_DELTA",
    "OUTPUT_TEXT_DELTA",
    "REASONING_TEXT_DELTA",
    "SUMMARY_TEXT_DELTA",
    "OutputItem",
    "PendingCall",
]

# The delta events, pre-encoded with the members in `wire_json.encode_data`'s (sorted)
# order: the escaped delta, the item's own members (`OutputItem.at`) and the sequence number
# are spliced in, the same bytes as encoding the event's dict, without one per token.
OUTPUT_TEXT_DELTA: Final = (
    b'event: response.output_text.delta\ndata: {"content_index":0,"delta":%b%b%d,'
    b'"type":"response.output_text.delta"}\n\n'
)
REASONING_TEXT_DELTA: Final = (
    b'event: response.reasoning_text.delta\ndata: {"content_index":0,"delta":%b%b%d,'
    b'"type":"response.reasoning_text.delta"}\n\n'
)
SUMMARY_TEXT_DELTA: Final = (
    b'event: response.reasoning_summary_text.delta\ndata: {"delta":%b%b%d,'
    b'"summary_index":0,"type":"response.reasoning_summary_text.delta"}\n\n'
)
ARGUMENTS_DELTA: Final = (
    b'event: response.function_call_arguments.delta\ndata: {"delta":%b%b%d,'
    b'"type":"response.function_call_arguments.delta"}\n\n'
)
_json_string = wire_json.json_string


class OutputItem:
    """One output item: where it stands in ``output`` and what it holds so far."""

    __slots__ = ("at", "call_id", "id", "index", "kind", "name", "output", "parts")

    def __init__(self, kind: str, index: int, item_id: str, output: OutputShape) -> None:
        self.kind = kind  # "reasoning", "message" or "function_call"
        self.output = output
        self.index = index
        self.id = item_id
        self.parts: list[str] = []
        self.call_id = ""
        self.name = ""
        # Its members of a delta event, between the delta and the sequence number.
        quoted = _json_string(item_id).encode("utf-8")
        logprobs = b'"logprobs":[],' if kind == "message" else b""
        self.at = b',"item_id":%b,%b"output_index":%d,"sequence_number":' % (
            quoted,
            logprobs,
            index,
        )

    @property
    def text(self) -> str:
        """Everything it holds so far, joined."""
        return "".join(self.parts)

    def shape(self, status: str) -> dict[str, Any]:
        """The item as the response's ``output`` shows it, with `status`."""
        if self.kind == "reasoning":
            return self.output.reasoning(self.id, self.text, status)
        if self.kind == "message":
            return message_item(self.id, self.text, status)
        return self.output.call(self.id, self.call_id, self.name, self.text, status)


class PendingCall:
    """One upstream tool call on its way to becoming one ``function_call`` item."""

    __slots__ = ("buffered", "id", "item", "name")

    def __init__(self) -> None:
        self.id = ""
        self.name = ""
        self.buffered: list[str] = []  # arguments that came before the name
        self.item: OutputItem | None = None
