"""llmchat: a synchronous, exact toolkit for OpenAI-compatible chat servers.

This module only re-exports the public names; each lives in its own module.

Words the code uses, one line each:

- *dialect*: a wire llmchat speaks as a client (OpenAI chat and text, Anthropic,
  Responses, Ollama, Gemini): its request builder and pure decoder (`llmchat.dialects`).
- *backend*: a client of one server in one dialect, `OpenAICommon` and its
  kin (`llmchat.backends`); `llmchat.retry` chains several.
- *transport*: how a backend's bytes reach a server and come back, abortable
  and under deadlines (`llmchat.transport`: `RequestsTransport`, `MockTransport`).
- *pipeline*: the one pure path every answer takes, deltas accumulated into
  `Chunk`s and state, then one judge of the ending (`llmchat.pipeline`).
- *face*: what the proxy serves to one kind of client (OpenAI, Ollama,
  Anthropic, Responses): routes, request translation, answer shapes; the
  proxy's faces (`llmchat/proxy/faces/`).
- *translator*: what the proxy writes, an OpenAI stream rewritten for a face's
  clients (`llmchat.protocols`).
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
