"""MockBackend's scripted replies: checked when given, and played as wire bytes.

A reply is a dict (`text`, `reasoning`, `tool_calls`, `finish_reason`,
`usage`, or `error_class`/`error_status`/`err`); `parse_reply` checks it and
`completion`, `stream_events` and `error_answer` render it as the body, the
SSE events or the failure a real server would send, so the real pipeline
decides it.
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from ..errors import ERROR_CLASSES, InvalidArgumentError, InvalidTypeError
from ..tools import ToolCall
from ..transport.exceptions import ScriptedFailure
from ..transport.mock_script import (
    MockResponse,
    Piece,
    Raise,
    Step,
    TimedOut,
)

__all__ = [
    "Reply",
    "completion",
    "error_answer",
    "parse_reply",
    "reply_dict",
    "stream_events",
]

_REPLY_KEYS: Final = frozenset(
    {"text", "reasoning", "tool_calls", "finish_reason", "usage"}
    | {"error_class", "error_status", "err"}
)
_ERROR_KEYS: Final = frozenset({"error_class", "error_status", "err"})
_ERROR_CLASSES: Final = frozenset(ERROR_CLASSES)
_TOKEN: Final = re.compile(r"\s*\S+|\s+")
_ARGUMENT_PIECE: Final = 8
"""Characters of tool-call arguments per streamed fragment."""


@dataclass(frozen=True, slots=True)
class Reply:
    """One scripted reply, checked."""

    text: str = ""
    reasoning: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    finish_reason: str = "stop"
    usage: dict[str, Any] | None = None
    error_class: str | None = None
    error_status: int | None = None
    err: str | None = None


def error_answer(reply: Reply, before: list[Step], stream: bool) -> MockResponse:
    if reply.error_class == "http":
        status = reply.error_status if reply.error_status is not None else 500
        if reply.err is None:
            return MockResponse(status, before_headers=before)
        return MockResponse.error(status, reply.err, before_headers=before)
    if reply.error_class in ("timeout", "connection") and reply.err is not None:
        # The scripted text is the Response's err, as the docstring promises.
        scripted = ScriptedFailure(
            "timeout" if reply.error_class == "timeout" else "connection", reply.err
        )
        return MockResponse(before_headers=[*before, Raise(scripted)])
    if reply.error_class == "timeout":
        return MockResponse(before_headers=[*before, TimedOut()])
    if reply.error_class == "connection":
        refused = ConnectionRefusedError(111, "Connection refused")
        return MockResponse(before_headers=[*before, Raise(refused)])
    if reply.error_class == "response":
        error = {"error": {"message": reply.err or "Mock response error", "type": "server_error"}}
        if stream:
            return MockResponse.sse([error], done=False, before_headers=before)
        return MockResponse.json(error, before_headers=before)
    failure = RuntimeError(reply.err or "Mock unknown error")
    return MockResponse(before_headers=[*before, Raise(failure)])


def _wire_call(call: ToolCall) -> dict[str, Any]:
    """A tool call as it goes on the wire; arguments as text only when they came as text."""
    entry = call.to_openai()
    if call.arguments_json is None:
        entry["function"]["arguments"] = dict(call.arguments)
    return entry


def _head(kind: str, model: str | None, number: int, *, chunk: bool) -> dict[str, Any]:
    if kind == "chat":
        prefix, obj = "chatcmpl-mock", "chat.completion.chunk" if chunk else "chat.completion"
    else:
        prefix, obj = "cmpl-mock", "text_completion"
    head: dict[str, Any] = {"id": f"{prefix}-{number}", "object": obj, "created": int(time.time())}
    if model is not None:
        head["model"] = model
    return head


def completion(reply: Reply, kind: str, model: str | None, number: int) -> dict[str, Any]:
    """A blocking ``chat.completion`` or ``text_completion`` body."""
    choice: dict[str, Any] = {"index": 0}
    if kind == "chat":
        message: dict[str, Any] = {"role": "assistant"}
        message["content"] = reply.text if reply.text or not reply.tool_calls else None
        if reply.reasoning:
            message["reasoning_content"] = reply.reasoning
        if reply.tool_calls:
            message["tool_calls"] = [_wire_call(call) for call in reply.tool_calls]
        choice["message"] = message
    else:
        choice["text"] = reply.text
    choice["finish_reason"] = reply.finish_reason
    payload = _head(kind, model, number, chunk=False)
    payload["choices"] = [choice]
    if reply.usage is not None:
        payload["usage"] = reply.usage
    return payload


def stream_events(
    reply: Reply, kind: str, model: str | None, number: int, include_usage: bool
) -> list[Mapping[str, Any] | Piece]:
    """The SSE events of a streamed reply, in the order a server sends them."""
    head = _head(kind, model, number, chunk=True)

    def event(choice: dict[str, Any], **extra: Any) -> dict[str, Any]:
        return {**head, "choices": [{"index": 0, **choice}], **extra}

    events: list[Mapping[str, Any] | Piece] = []
    if kind == "chat":
        first = True
        for name, text in (("reasoning_content", reply.reasoning), ("content", reply.text)):
            for piece in _TOKEN.findall(text):
                delta = {"role": "assistant", name: piece} if first else {name: piece}
                first = False
                events.append(event({"delta": delta, "finish_reason": None}))
        for index, call in enumerate(reply.tool_calls):
            for fragment in _fragments(index, call):
                events.append(event({"delta": {"tool_calls": [fragment]}, "finish_reason": None}))
        finish = event({"delta": {}, "finish_reason": reply.finish_reason})
    else:
        for piece in _TOKEN.findall(reply.text):
            events.append(event({"text": piece, "finish_reason": None}))
        finish = event({"text": "", "finish_reason": reply.finish_reason})
    if reply.usage is not None and not include_usage:
        finish["usage"] = reply.usage  # a server not asked for the usage event
    events.append(finish)
    if reply.usage is not None and include_usage:
        events.append({**head, "choices": [], "usage": reply.usage})
    return events


def _fragments(index: int, call: ToolCall) -> list[dict[str, Any]]:
    """One tool call as streamed fragments: id and name first, then the arguments in pieces."""
    start: dict[str, Any] = {"index": index, "id": call.id, "type": call.type}
    text = call.arguments_json
    if text is None:  # arguments as an object, whole, as some servers send them
        start["function"] = {"name": call.name, "arguments": dict(call.arguments)}
        return [start]
    start["function"] = {"name": call.name, "arguments": ""}
    pieces = [text[i : i + _ARGUMENT_PIECE] for i in range(0, len(text), _ARGUMENT_PIECE)]
    return [start] + [{"index": index, "function": {"arguments": piece}} for piece in pieces]


def parse_reply(index: int, reply: Any) -> Reply:
    where = f"replies[{index}]"
    if not isinstance(reply, Mapping):
        raise InvalidTypeError(f"{where} must be a dict, got {type(reply).__name__}")
    unknown = sorted(set(reply) - _REPLY_KEYS, key=str)
    if unknown:
        raise InvalidArgumentError(
            f"{where} has unknown key(s): {', '.join(map(str, unknown))} "
            f"(allowed: {', '.join(sorted(_REPLY_KEYS))})"
        )
    if _ERROR_KEYS & set(reply):
        return _parse_error(where, reply)
    for name in ("text", "reasoning"):
        if not isinstance(reply.get(name, ""), str):
            raise InvalidTypeError(f"{where}.{name} must be a str")
    calls = reply.get("tool_calls") or []
    if isinstance(calls, (str, bytes, Mapping)) or not isinstance(calls, Sequence):
        raise InvalidTypeError(f"{where}.tool_calls must be a list")
    tool_calls: list[ToolCall] = []
    for position, call in enumerate(calls):
        if isinstance(call, ToolCall):
            tool_calls.append(call)
        elif isinstance(call, Mapping):
            tool_calls.append(ToolCall.from_openai(call))
        else:
            raise InvalidTypeError(
                f"{where}.tool_calls[{position}] must be a dict or a ToolCall, "
                f"got {type(call).__name__}"
            )
    finish = reply.get("finish_reason")
    if finish is None:
        finish = "tool_calls" if tool_calls else "stop"
    if not isinstance(finish, str) or not finish:
        raise InvalidTypeError(f"{where}.finish_reason must be a non-empty str")
    usage = reply.get("usage")
    if usage is not None and not isinstance(usage, Mapping):
        raise InvalidTypeError(f"{where}.usage must be a dict")
    return Reply(
        text=reply.get("text", ""),
        reasoning=reply.get("reasoning", ""),
        tool_calls=tuple(tool_calls),
        finish_reason=finish,
        usage=dict(usage) if usage is not None else None,
    )


def _parse_error(where: str, reply: Mapping[str, Any]) -> Reply:
    others = sorted(set(reply) - _ERROR_KEYS)
    if others:
        raise InvalidArgumentError(
            f"{where} is an error reply and cannot also have: {', '.join(others)}"
        )
    status = reply.get("error_status")
    if status is not None and (isinstance(status, bool) or not isinstance(status, int)):
        raise InvalidTypeError(f"{where}.error_status must be an int or None")
    if status is not None and not 400 <= status <= 599:
        raise InvalidArgumentError(f"{where}.error_status must be an HTTP error status (400-599)")
    error_class = reply.get("error_class")
    if error_class is None:
        error_class = "http" if status is not None else "unknown"
    if error_class not in _ERROR_CLASSES:
        raise InvalidArgumentError(
            f"{where}.error_class must be one of {', '.join(sorted(_ERROR_CLASSES))}, "
            f"got {error_class!r}"
        )
    if status is not None and error_class != "http":
        raise InvalidArgumentError(
            f"{where}.error_status goes with error_class 'http' only, got {error_class!r}"
        )
    err = reply.get("err")
    if err is not None and not isinstance(err, str):
        raise InvalidTypeError(f"{where}.err must be a str")
    return Reply(error_class=error_class, error_status=status, err=err)


def reply_dict(reply: Reply) -> dict[str, Any]:
    if reply.error_class is not None:
        return {
            "error_class": reply.error_class,
            "error_status": reply.error_status,
            "err": reply.err,
        }
    out: dict[str, Any] = {
        "text": reply.text,
        "reasoning": reply.reasoning,
        "tool_calls": list(reply.tool_calls),
        "finish_reason": reply.finish_reason,
    }
    if reply.usage is not None:
        out["usage"] = reply.usage
    return out
