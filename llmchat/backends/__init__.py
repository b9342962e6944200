"""Backends: OpenAICommon, its provider subclasses and the other wire dialects.

`CommonOptions` types the keyword arguments a subclass passes on to
`OpenAICommon` (``**common: Unpack[CommonOptions]``); `BackendOptions` adds
`api_key`, `model` and `settings`, for a subclass that takes them as keywords too.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
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

_HOMES = {
    "Anthropic": ".anthropic",
    "BackendOptions": ".options",
    "CommonOptions": ".options",
    "Gemini": ".gemini",
    "KoboldCpp": ".koboldcpp",
    "MockBackend": ".mock",
    "Ollama": ".ollama",
    "OpenAICommon": ".openai_common",
    "OpenAIResponses": ".responses",
    "OpenRouter": ".openrouter",
    "OpenRouterResponse": ".openrouter",
    "RecordedCall": ".mock",
}
"""Each public name's home module, imported when the name is first asked for:
this package's ``__init__`` runs before any of its modules, so importing
`openai_common` alone must not load every other dialect's backend."""

if not TYPE_CHECKING:  # a type checker sees the imports above instead
    from .._lazy import exports

    __getattr__, __dir__ = exports(__name__, _HOMES)
    del exports
