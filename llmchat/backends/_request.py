"""The pieces of a request: `WireRequest`, the OpenAI chat body and message shapes.

Also the input checks every dialect shares (messages, tools). Pure; imports
no backend: `Hooks` runs the request hooks in order and builds the request.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from .._version import __version__
from ..errors import InvalidTypeError
from ..messages import Message, MessageLike, coerce_messages
from ..redact import redact_headers

__all__ = [
    "USER_AGENT",
    "WireRequest",
    "checked_tools",
    "message_list",
    "openai_chat_body",
    "openai_messages",
]

USER_AGENT: Final = f"llmchat/{__version__}"
"""Servers and gateways log clients by it; requests' own would name requests."""


@dataclass(frozen=True, slots=True)
class WireRequest:
    """One request exactly as it would go on the wire.

    `body` is the finished body after every hook; `data` are the bytes posted.
    The repr redacts credentials, so a WireRequest is safe to log.
    """

    method: str
    url: str
    headers: Mapping[str, str] = field(repr=False)
    body: Mapping[str, Any] = field(repr=False)
    data: bytes = field(repr=False)

    def __repr__(self) -> str:
        return (
            f"WireRequest({self.method} {self.url}, headers={redact_headers(self.headers)}, "
            f"{len(self.data)} bytes)"
        )


def openai_chat_body(
    history: list[Message],
    members: dict[str, Any],
    tools: list[Mapping[str, Any]] | None,
    tool_choice: str | Mapping[str, Any] | None,
    *,
    stream: bool,
    include_usage: bool,
) -> dict[str, Any]:
    """The OpenAI chat-completions body (`OpenAICommon._build_chat_body`'s default)."""
    body = members
    body["messages"] = openai_messages(history)
    if tools is not None:
        body["tools"] = tools
    if tool_choice is not None:
        body["tool_choice"] = tool_choice
    if stream:  # a blocking body omits it: false is the API's default
        body["stream"] = True
        if include_usage:
            body["stream_options"] = {"include_usage": True}
    return body


def openai_messages(history: Iterable[Message]) -> list[dict[str, Any]]:
    """Normalized Messages as OpenAI chat dicts (new ones; reasoning parts left out)."""
    out = []
    for message in history:
        wire = message.to_dict()
        wire.pop("reasoning_parts", None)  # another dialect's; not OpenAI's shape
        out.append(wire)
    return out


def message_list(messages: Iterable[MessageLike]) -> list[Message]:
    """`messages` as a new list of Messages; raises `TypeError` naming what is wrong."""
    if messages is None:
        raise InvalidTypeError("messages must be a list of messages, got None")
    return coerce_messages(messages)


def checked_tools(tools: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """`tools` as a new list, each a mapping; raises `TypeError` naming the bad one."""
    if isinstance(tools, (str, bytes, Mapping)) or not isinstance(tools, Sequence):
        raise InvalidTypeError(
            f"tools must be a list of tool definitions, got {type(tools).__name__}"
        )
    for index, tool in enumerate(tools):
        if not isinstance(tool, Mapping):
            raise InvalidTypeError(f"tools[{index}] must be a mapping, got {type(tool).__name__}")
    return list(tools)
