"""ChatML (Qwen, many fine-tunes): ``<|im_start|>role\\ncontent<|im_end|>\\n``."""

from __future__ import annotations

from typing import ClassVar

from ..messages import Message, content_text
from .base import Template

__all__ = ["ChatML"]


class ChatML(Template):
    """The ChatML format, as llama.cpp's ``chatml`` template renders it."""

    name: ClassVar[str] = "chatml"

    def render_messages(self, messages: list[Message], continuation: bool) -> str:
        parts = [f"<|im_start|>{m.role}\n{content_text(m.content)}<|im_end|>\n" for m in messages]
        if continuation and parts:
            parts[-1] = parts[-1][: -len("<|im_end|>\n")]
            return "".join(parts)
        return "".join(parts) + "<|im_start|>assistant\n"
