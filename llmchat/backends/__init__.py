"""Backends: OpenAICommon and its provider subclasses."""

from __future__ import annotations

from .openai_common import OpenAICommon

__all__ = ["OpenAICommon"]
