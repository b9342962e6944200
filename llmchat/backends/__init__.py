"""Backends: OpenAICommon and its provider subclasses."""

from __future__ import annotations

from .koboldcpp import KoboldCpp
from .mock import MockBackend, RecordedCall
from .openai_common import OpenAICommon
from .openrouter import OpenRouter, OpenRouterResponse

__all__ = [
    "KoboldCpp",
    "MockBackend",
    "OpenAICommon",
    "OpenRouter",
    "OpenRouterResponse",
    "RecordedCall",
]
