"""llmchat: a synchronous, exact toolkit for OpenAI-compatible chat servers.

This module only re-exports the public names; each lives in its own module.
"""

from __future__ import annotations

from . import wire_json
from .backends.openai_common import OpenAICommon
from .errors import LLMChatError
from .messages import Message, normalize_messages
from .settings import Settings

__version__ = "0.1.0"

__all__ = [
    "LLMChatError",
    "Message",
    "OpenAICommon",
    "Settings",
    "normalize_messages",
    "wire_json",
]
