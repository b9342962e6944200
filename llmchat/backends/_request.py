"""Request building for `OpenAICommon`: the wire request, its body and headers.

The chat and text bodies go through the backend's request hooks in order
(`_get_api_settings`, `_finalize_request_body`, `_encode_request_body`,
`_get_api_headers`); bad input raises before anything is sent. Also the
argument checks the constructor shares.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

from .._version import __version__
from ..errors import InvalidArgumentError, InvalidTypeError
from ..messages import Message, MessageLike, coerce_messages
from ..redact import redact_headers
from ..settings import Settings
from ..urls import join_url

if TYPE_CHECKING:
    from .openai_common import OpenAICommon

__all__ = [
    "USER_AGENT",
    "WireRequest",
    "chat_request",
    "openai_chat_body",
    "openai_messages",
    "text_request",
    "wire_request",
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


def chat_request(
    backend: OpenAICommon,
    messages: Iterable[MessageLike],
    tools: Sequence[Mapping[str, Any]] | None,
    tool_choice: str | Mapping[str, Any] | None,
    settings: Settings | None,
    *,
    stream: bool,
) -> WireRequest:
    """The chat request for `prepare_chat_request`, in every dialect.

    The checks every dialect shares come first (messages, tools, tool_choice),
    then the backend's `_chat_route` and `_build_chat_body` make the dialect's
    path and body, then the usual hooks.
    """
    members = backend._get_api_settings(settings)
    history = backend.normalized_messages(_message_list(messages))
    checked = None if tools is None else _checked_tools(tools)
    if tool_choice is not None and not isinstance(tool_choice, (str, Mapping)):
        raise InvalidTypeError("tool_choice must be a str, a mapping or None")
    path = backend._chat_route(members, stream=stream)
    body = backend._build_chat_body(history, members, checked, tool_choice, stream=stream)
    return wire_request(backend, path, body, stream=stream)


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


def text_request(
    backend: OpenAICommon,
    messages: Iterable[MessageLike],
    continuation: bool,
    settings: Settings | None,
    *,
    stream: bool,
) -> WireRequest:
    """The text-completion request for `OpenAICommon.prepare_text_request`."""
    if backend.text_dialect is None:
        raise InvalidArgumentError(
            f"{type(backend).__name__} has no text completions; use chat_completion"
        )
    if backend.template is None:
        raise InvalidArgumentError(
            "text completions need a prompt template: pass template=… to the backend "
            "(e.g. llmchat.templates.ChatML())"
        )
    body = backend._get_api_settings(settings)
    body["prompt"] = backend.template.render(
        backend.normalized_messages(_message_list(messages)), continuation=continuation
    )
    if stream:
        body["stream"] = True
        if backend.send_include_usage:
            body["stream_options"] = {"include_usage": True}
    return wire_request(backend, backend.text_path, body, stream=stream)


def wire_request(
    backend: OpenAICommon, path: str, body: dict[str, Any], *, stream: bool
) -> WireRequest:
    """The finished body (after `_finalize_request_body`), its bytes and headers."""
    body = backend._finalize_request_body(body)
    data = backend._encode_request_body(body)
    headers = backend._get_api_headers()
    if stream and not any(name.lower() == "accept-encoding" for name in headers):
        # A compressed token stream saves little and makes intermediaries buffer;
        # the reader still decodes whatever a server sends. A hook's own header wins.
        headers["Accept-Encoding"] = "identity"
    return WireRequest(
        method="POST",
        url=join_url(backend.api_url, path),
        headers=headers,
        body=body,
        data=data,
    )


def _message_list(messages: Iterable[MessageLike]) -> list[Message]:
    if messages is None:
        raise InvalidTypeError("messages must be a list of messages, got None")
    return coerce_messages(messages)


def _checked_tools(tools: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    if isinstance(tools, (str, bytes, Mapping)) or not isinstance(tools, Sequence):
        raise InvalidTypeError(
            f"tools must be a list of tool definitions, got {type(tools).__name__}"
        )
    for index, tool in enumerate(tools):
        if not isinstance(tool, Mapping):
            raise InvalidTypeError(f"tools[{index}] must be a mapping, got {type(tool).__name__}")
    return list(tools)
