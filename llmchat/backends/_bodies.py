"""The chat-body builders a backend class names as its `body_builder`.

A dialect backend differs from `OpenAICommon` in the chat body it posts;
rather than each overriding `_build_chat_body`, it names its builder here as
a class attribute, and the one `_build_chat_body` calls it. A builder gets
the backend (for its class attributes) and a `ChatParts`, and returns a new
body dict; it must raise `ValueError`/`TypeError` naming the field for input
it cannot send. This module holds only the types: the default, the OpenAI
body, is `_hooks`' (beside the builder it calls), and each dialect backend's
builder lives in its own module (`anthropic`, `gemini`, `ollama`,
`responses`), so `OpenAICommon` loads no other dialect's request code.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple, Protocol

from ..messages import Message

__all__ = ["BodyHost", "ChatBodyBuilder", "ChatParts"]


class ChatParts(NamedTuple):
    """What a chat body is built from, as `_build_chat_body` gets it."""

    history: list[Message]
    """The normalized conversation (OpenAI-shaped `Message`s)."""
    members: dict[str, Any]
    """The members `_get_api_settings` returned: a fresh dict, the builder's to use."""
    tools: list[Mapping[str, Any]] | None
    """The checked tools (OpenAI-shaped), or None."""
    tool_choice: str | Mapping[str, Any] | None
    stream: bool


class BodyHost(Protocol):
    """What a builder may read of the backend (a builder for one class narrows it)."""

    @property
    def send_include_usage(self) -> bool: ...


class ChatBodyBuilder(Protocol):
    """The type of `OpenAICommon.body_builder` (set it as ``staticmethod(fn)``)."""

    def __call__(self, backend: BodyHost, parts: ChatParts) -> dict[str, Any]: ...
