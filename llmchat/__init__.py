"""llmchat: a synchronous, exact toolkit for OpenAI-compatible chat servers.

This module only re-exports the public names; each lives in its own module.
"""

from __future__ import annotations

from . import wire_json
from ._version import __version__ as __version__
from .backends.anthropic import Anthropic
from .backends.gemini import Gemini
from .backends.koboldcpp import KoboldCpp
from .backends.mock import MockBackend
from .backends.ollama import Ollama
from .backends.openai_common import OpenAICommon
from .backends.openrouter import OpenRouter
from .backends.responses import OpenAIResponses
from .chunk import Chunk
from .errors import LLMChatError
from .messages import Message, normalize_messages
from .response import Response
from .settings import Settings
from .tools import ToolCall

__all__ = [
    "Anthropic",
    "Chunk",
    "Gemini",
    "KoboldCpp",
    "LLMChatError",
    "Message",
    "MockBackend",
    "Ollama",
    "OpenAICommon",
    "OpenAIResponses",
    "OpenRouter",
    "Response",
    "Settings",
    "ToolCall",
    "normalize_messages",
    "wire_json",
]
