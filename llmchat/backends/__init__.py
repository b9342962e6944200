"""Backends: OpenAICommon, its provider subclasses and the other wire dialects.

`CommonOptions` types the keyword arguments a subclass passes on to
`OpenAICommon` (``**common: Unpack[CommonOptions]``).
"""

from __future__ import annotations

from .anthropic import Anthropic
from .gemini import Gemini
from .koboldcpp import KoboldCpp
from .mock import MockBackend, RecordedCall
from .ollama import Ollama
from .openai_common import OpenAICommon
from .openrouter import OpenRouter, OpenRouterResponse
from .options import CommonOptions
from .responses import OpenAIResponses

__all__ = [
    "Anthropic",
    "CommonOptions",
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
