"""Template: the interface every prompt template implements."""

from __future__ import annotations

from collections.abc import Iterable
from typing import ClassVar

from ..messages import Message, MessageLike, coerce_messages

__all__ = ["Template"]


class Template:
    """Renders a conversation into the prompt text a model was trained on.

    Subclasses implement `render_messages`; `render` accepts messages or dicts,
    never mutates what it is given, and hands the subclass a fresh list.
    """

    name: ClassVar[str] = "template"

    def render(self, messages: Iterable[MessageLike], continuation: bool = False) -> str:
        """Return the prompt for `messages`.

        With `continuation=False` the prompt ends with the opening of a new
        assistant turn; with `continuation=True` the last message is left
        open, so the model continues it.
        """
        return self.render_messages(coerce_messages(messages), continuation)

    def render_messages(self, messages: list[Message], continuation: bool) -> str:
        raise NotImplementedError
