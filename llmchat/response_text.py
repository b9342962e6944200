"""What a Response's answer says so far: its text, reasoning and refusal, and the turn it makes.

`Response` keeps the parts as they arrive (under its lock); this base reads
them, so a reader sees one place for every view of the answer's words.
"""

from __future__ import annotations

from typing import Any

from .messages import Message
from .tools import ToolCall

__all__ = ["AnswerText"]


class AnswerText:
    """The text views of a `Response` (its base): `msg`, `reasoning_text`, `refusal`,
    `to_message`."""

    _text: list[str]
    _reasoning: list[str]
    _refusal: list[str]
    tool_calls: list[ToolCall]
    reasoning_parts: list[dict[str, Any]] | None

    @property
    def msg(self) -> str:
        """The answer text so far (grows while streaming; kept after failure and cancel)."""
        return "".join(self._text)

    @property
    def latest(self) -> str:
        """The same text as `msg`: whatever had arrived, kept after failure and cancel."""
        return "".join(self._text)

    @property
    def reasoning_text(self) -> str | None:
        """The model's reasoning, never part of `msg`; None when the model sent none."""
        return "".join(self._reasoning) if self._reasoning else None

    @property
    def refusal(self) -> str | None:
        """The model's refusal text; None when it did not refuse."""
        return "".join(self._refusal) if self._refusal else None

    def to_message(self) -> Message:
        """The assistant turn to append to the conversation for the next request.

        Its content (None when there is only a tool call), its tool calls in
        OpenAI's shape, and `reasoning_parts`, which the dialect that made them
        sends back (Anthropic requires its thinking blocks in a tool loop) and
        every other dialect leaves out.
        """
        calls = [call.to_openai() for call in self.tool_calls] or None
        text = self.msg
        return Message(
            "assistant",
            text if text or not calls else None,
            tool_calls=calls,
            reasoning_parts=list(self.reasoning_parts) if self.reasoning_parts else None,
        )
