"""What the Responses-face tests share: a function tool and the stream's numbering check."""

from __future__ import annotations

from typing import Any

WEATHER_TOOL: dict[str, Any] = {
    "type": "function",
    "name": "get_weather",
    "description": "Weather for a city",
    "parameters": {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
        "additionalProperties": False,
    },
}


def check_numbering(events: list[Any]) -> None:
    """sequence_number counts from 0 and output_index per item; every delta names its
    item's id and output index, and content_index 0 (each item has one part)."""
    assert [e.sequence_number for e in events] == list(range(len(events)))
    assert events[0].type == "response.created" and events[1].type == "response.in_progress"
    added = [e for e in events if e.type == "response.output_item.added"]
    assert [e.output_index for e in added] == list(range(len(added)))
    ids = {e.output_index: e.item.id for e in added}
    for event in events:
        if hasattr(event, "item_id"):
            assert ids[event.output_index] == event.item_id, event
        if hasattr(event, "content_index"):
            assert event.content_index == 0
