"""Backends: OpenAICommon, its provider subclasses and the other wire dialects.

`CommonOptions` types the keyword arguments a subclass passes on to
`OpenAICommon` (``**common: Unpack[CommonOptions]``); `BackendOptions` adds
`api_key`, `model` and `settings`, for a subclass that takes them as keywords too.
"""

from __future__ import annotations

from .anthropic import Anthropic
from .gemini import Gemini
from .koboldcpp import KoboldCpp
from .mock import MockBackend, RecordedCall
from .ollama import Ollama
from .openai_common import OpenAICommon
from .openrouter import OpenRouter, OpenRouterResponse
from .options import BackendOptions, CommonOptions
from .responses import OpenAIResponses

__all__ = [
    "Anthropic",
    "BackendOptions",
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
