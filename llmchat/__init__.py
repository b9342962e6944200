"""llmchat: a synchronous, exact toolkit for OpenAI-compatible chat servers.

This module only re-exports the public names, each imported from its own module
when first named (`_lazy`), so `import llmchat` itself stays cheap.

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

from ._version import __version__ as __version__

# `typing.TYPE_CHECKING` without importing typing, which `import llmchat` alone
# need not load; type checkers treat any constant of this name as True.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from . import wire_json
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

_HOMES = {
    "Anthropic": ".backends.anthropic",
    "Chunk": ".chunk",
    "Gemini": ".backends.gemini",
    "KoboldCpp": ".backends.koboldcpp",
    "LLMChatError": ".errors",
    "Message": ".messages",
    "MockBackend": ".backends.mock",
    "Ollama": ".backends.ollama",
    "OpenAICommon": ".backends.openai_common",
    "OpenAIResponses": ".backends.responses",
    "OpenRouter": ".backends.openrouter",
    "Response": ".response",
    "Settings": ".settings",
    "ToolCall": ".tools",
    "normalize_messages": ".messages",
    "wire_json": ".wire_json",
}
"""Each public name's home module. Nothing is imported until it is named: a
script that uses `OpenAICommon` never loads the other dialects' backends,
and ``import llmchat`` alone loads no HTTP stack (`_lazy`)."""

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

if not TYPE_CHECKING:  # a type checker sees the imports above instead
    from ._lazy import exports

    __getattr__, __dir__ = exports(__name__, _HOMES)
    del exports
