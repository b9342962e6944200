"""Anthropic wire forms for tests: a message as its event stream, a stream folded back.

Written from Anthropic's "Streaming Messages" page, without the library: the
two forms of one answer, so a test can serve either and compare.
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Iterable, Mapping
from typing import Any

from llmchat.testing import Reply, Write
from llmchat.testing.script import Framing, dumps

INPUT_USAGE = ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")


def sse(events: Iterable[Mapping[str, Any]]) -> bytes:
    """Events as an Anthropic SSE body (``event:`` line, then ``data:``)."""
    return b"".join(
        f"event: {event.get('type')}\ndata: {dumps(event)}\n\n".encode() for event in events
    )


def sse_reply(body: bytes, *, framing: Framing = "chunked", cuts: Iterable[int] = ()) -> Reply:
    """`body` as a ``text/event-stream`` reply, one write per event or cut at `cuts`."""
    if cuts:
        bounds = sorted({0, len(body), *(c for c in cuts if 0 < c < len(body))})
        pieces = [body[a:b] for a, b in itertools.pairwise(bounds)]
    else:
        pieces = split_events(body)
    return Reply(
        headers={"Content-Type": "text/event-stream"},
        framing=framing,
        steps=[Write(p) for p in pieces],
    )


def split_events(body: bytes) -> list[bytes]:
    """An SSE body cut after each blank line; the pieces join to `body`."""
    return [event for event in re.split(rb"(?<=\n\n)", body) if event]


def payloads(body: bytes) -> list[dict[str, Any]]:
    """The JSON of every ``data:`` field of an SSE body, in order."""
    out = []
    for event in body.decode("utf-8").replace("\r\n", "\n").split("\n\n"):
        data = "\n".join(
            line[5:].removeprefix(" ") for line in event.split("\n") if line.startswith("data:")
        )
        if data:
            out.append(json.loads(data))
    return out


def message_events(message: Mapping[str, Any], *, pieces: int = 2) -> list[dict[str, Any]]:
    """A whole message as the events that stream it (text cut into `pieces`)."""
    usage = dict(message.get("usage") or {})
    head = {k: v for k, v in message.items() if k not in ("content", "usage")}
    head.update(content=[], stop_reason=None, stop_sequence=None)
    head["usage"] = {k: usage[k] for k in INPUT_USAGE if k in usage} | {"output_tokens": 1}
    events: list[dict[str, Any]] = [{"type": "message_start", "message": head}]
    for index, block in enumerate(message.get("content") or []):
        events += _block_events(index, block, pieces)
    delta = {
        "stop_reason": message.get("stop_reason"),
        "stop_sequence": message.get("stop_sequence"),
    }
    events.append({"type": "message_delta", "delta": delta, "usage": usage})
    events.append({"type": "message_stop"})
    return events


def _cut(text: str, pieces: int) -> list[str]:
    size = max(1, -(-len(text) // max(1, pieces)))
    return [text[i : i + size] for i in range(0, len(text), size)]


def _block_events(index: int, block: Mapping[str, Any], pieces: int) -> list[dict[str, Any]]:
    kind = block.get("type")

    def delta(d: dict[str, Any]) -> dict[str, Any]:
        return {"type": "content_block_delta", "index": index, "delta": d}

    deltas: list[dict[str, Any]] = []
    if kind == "text":
        opened: dict[str, Any] = {"type": "text", "text": ""}
        deltas = [delta({"type": "text_delta", "text": p}) for p in _cut(block["text"], pieces)]
        deltas += [
            delta({"type": "citations_delta", "citation": c}) for c in block.get("citations") or []
        ]
    elif kind == "thinking":
        opened = {"type": "thinking", "thinking": "", "signature": ""}
        deltas = [
            delta({"type": "thinking_delta", "thinking": p})
            for p in _cut(block["thinking"], pieces)
        ]
        deltas.append(delta({"type": "signature_delta", "signature": block.get("signature", "")}))
    elif kind == "tool_use":
        opened = {k: v for k, v in block.items() if k != "input"} | {"input": {}}
        text = json.dumps(block.get("input") or {})
        deltas = [
            delta({"type": "input_json_delta", "partial_json": p}) for p in _cut(text, pieces)
        ]
    else:
        opened = dict(block)
    return [
        {"type": "content_block_start", "index": index, "content_block": opened},
        *deltas,
        {"type": "content_block_stop", "index": index},
    ]


def fold(events: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """A stream's events folded into the message a blocking call would have answered."""
    message: dict[str, Any] = {}
    blocks: dict[Any, dict[str, Any]] = {}
    order: list[Any] = []
    json_text: dict[Any, str] = {}
    for event in events:
        kind = event.get("type")
        if kind == "message_start":
            message = dict(event["message"])
            message["usage"] = dict(message.get("usage") or {})
            message["usage"].pop("output_tokens", None)
        elif kind == "content_block_start":
            blocks[event["index"]] = dict(event["content_block"])
            order.append(event["index"])
        elif kind == "content_block_delta":
            _apply(blocks.get(event["index"]), event["delta"], json_text, event["index"])
        elif kind == "content_block_stop" and event["index"] in json_text:
            try:
                blocks[event["index"]]["input"] = json.loads(json_text.pop(event["index"]))
            except ValueError:
                pass
        elif kind == "message_delta":
            message.update(event.get("delta") or {})
            message["usage"] = message.get("usage", {}) | dict(event.get("usage") or {})
    message["content"] = [blocks[i] for i in order]
    return message


def _apply(
    block: dict[str, Any] | None, delta: Mapping[str, Any], json_text: dict[Any, str], index: Any
) -> None:
    if block is None:
        return
    kind = delta.get("type")
    if kind == "text_delta":
        block["text"] = block.get("text", "") + delta["text"]
    elif kind == "thinking_delta":
        block["thinking"] = block.get("thinking", "") + delta["thinking"]
    elif kind == "signature_delta":
        block["signature"] = block.get("signature", "") + delta["signature"]
    elif kind == "citations_delta":
        block["citations"] = [*(block.get("citations") or []), delta["citation"]]
    elif kind == "input_json_delta":
        json_text[index] = json_text.get(index, "") + delta["partial_json"]
