"""Prompt templates for text completions: render a conversation as one prompt.

Built-ins: `ChatML`, `Llama3`, `Llama4`, `Gemma2`, `MistralV7`; any Hugging
Face chat template runs through `Jinja2Template` (needs jinja2, imported only
when one is built).
"""

from __future__ import annotations

from .base import Template
from .chatml import ChatML
from .gemma import Gemma2
from .jinja import Jinja2Template
from .llama import Llama3, Llama4
from .mistral import MistralV7

__all__ = ["ChatML", "Gemma2", "Jinja2Template", "Llama3", "Llama4", "MistralV7", "Template"]
