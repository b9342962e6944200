"""Wire dialects: pure decoders from one provider payload to neutral deltas (no I/O)."""

from __future__ import annotations

from .openai_chat import Delta, decode_chat, decode_text

__all__ = ["Delta", "decode_chat", "decode_text"]
