"""Per-request generation settings: the `Settings` value and the checks on its fields.

`generation.Settings` is the frozen value a caller hands a backend (and its
OpenAI request-body form); `checks` holds each field's check (types, bounds,
JSON Schemas, JSON-only values), run when a `Settings` is built. This package
imports only `llmchat.errors` (and jsonschema, lazily, when a schema is
checked); every backend and dialect imports it.
"""

from __future__ import annotations

from .generation import Settings

__all__ = ["Settings"]
