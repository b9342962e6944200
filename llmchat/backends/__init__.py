"""Backends: OpenAICommon, its provider subclasses and the other wire dialects."""

from __future__ import annotations

from .gemini import Gemini
from .koboldcpp import KoboldCpp
from .mock import MockBackend, RecordedCall
from .ollama import Ollama
from .openai_common import OpenAICommon
from .openrouter import OpenRouter, OpenRouterResponse

__all__ = [
    "Gemini",
    "KoboldCpp",
    "MockBackend",
    "Ollama",
    "OpenAICommon",
    "OpenRouter",
    "OpenRouterResponse",
    "RecordedCall",
]
