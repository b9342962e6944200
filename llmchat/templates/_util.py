"""Shared pieces of the built-in templates."""

from __future__ import annotations

from ..messages import Message, content_text

__all__ = ["close_turns", "text_of"]


def text_of(message: Message, trim: bool) -> str:
    """The message's text (`content_text`), stripped of outer whitespace when `trim`."""
    text = content_text(message.content)
    return text.strip() if trim else text


def close_turns(turns: list[tuple[str, str]], generation_prompt: str, continuation: bool) -> str:
    """Join ``(text, closing)`` turns into a prompt.

    Normally every turn is closed and `generation_prompt` is appended. With
    `continuation`, the last turn's closing is left off (the model continues
    that message) and no generation prompt is added (an empty
    conversation then renders as nothing).
    """
    if continuation:
        if not turns:
            return ""
        body = "".join(text + closing for text, closing in turns[:-1])
        return body + turns[-1][0]
    return "".join(text + closing for text, closing in turns) + generation_prompt
