"""Backends: OpenAICommon, its provider subclasses and the other wire dialects."""

from __future__ import annotations

from .anthropic import Anthropic
from .gemini import Gemini
from .koboldcpp import KoboldCpp
from .mock import MockBackend, RecordedCall
from .ollama import Ollama
from .openai_common import OpenAICommon
from .openrouter import OpenRouter, OpenRouterResponse
from .responses import OpenAIResponses

__all__ = [
    "Anthropic",
    "Gemini",
    "KoboldCpp",
    "MockBackend",
    "Ollama",
    "OpenAICommon",
    "OpenAIResponses",
    "OpenRouter",
    "OpenRouterResponse",
    "RecordedCall",
]
