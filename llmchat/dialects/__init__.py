"""Wire dialects: pure decoders from one provider payload to neutral deltas (no I/O)."""

from __future__ import annotations

from .base import Delta, Dialect
from .openai_chat import OpenAIChat, OpenAIText, decode_chat, decode_text

__all__ = ["Delta", "Dialect", "OpenAIChat", "OpenAIText", "decode_chat", "decode_text"]
