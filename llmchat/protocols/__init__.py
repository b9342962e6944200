"""Stream translators: an OpenAI chat-completion stream rewritten for other clients.

Import each translator from its own module (e.g. ``llmchat.protocols.ollama``).
"""

from __future__ import annotations

__all__: list[str] = []
