"""Prompt templates for text completions: render a conversation as one prompt."""

from __future__ import annotations

from .base import Template
from .chatml import ChatML

__all__ = ["ChatML", "Template"]
