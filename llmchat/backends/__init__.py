"""Backends: OpenAICommon and its provider subclasses."""

from __future__ import annotations

from .koboldcpp import KoboldCpp
from .openai_common import OpenAICommon
from .openrouter import OpenRouter, OpenRouterResponse

__all__ = ["KoboldCpp", "OpenAICommon", "OpenRouter", "OpenRouterResponse"]
