"""Google Gemma 2 (and Gemma 3 text) prompt format."""

from __future__ import annotations

from typing import ClassVar

from ..messages import Message
from ._util import close_turns, text_of
from .base import Template

__all__ = ["Gemma2"]


class Gemma2(Template):
    """Gemma: ``<start_of_turn>user\\n…<end_of_turn>\\n``, the assistant's role is ``model``.

    Gemma has no system role. As llama.cpp's ``gemma`` template and Gemma 3's
    own template do, system text is rendered as user text: it is put, followed
    by a blank line, at the start of the next user turn (several system
    messages are joined with blank lines; a system message with no user turn
    after it becomes a user turn of its own). Contents are trimmed, as Gemma's
    template does. The prompt starts with `bos_token` (``<bos>``).
    """

    name: ClassVar[str] = "gemma2"

    def __init__(self, bos_token: str = "<bos>"):
        self.bos_token = bos_token

    def render_messages(self, messages: list[Message], continuation: bool) -> str:
        turns: list[tuple[str, str]] = []
        pending: list[str] = []
        for m in messages:
            text = text_of(m, trim=True)
            if m.role == "system":
                pending.append(text)
                continue
            role = "model" if m.role == "assistant" else m.role
            if pending and role != "model":
                text = "\n\n".join(pending) + "\n\n" + text
                pending = []
            turns.append((f"<start_of_turn>{role}\n{text}", "<end_of_turn>\n"))
        if pending:
            turns.append(("<start_of_turn>user\n" + "\n\n".join(pending), "<end_of_turn>\n"))
        return self.bos_token + close_turns(turns, "<start_of_turn>model\n", continuation)
