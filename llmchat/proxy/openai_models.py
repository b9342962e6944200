"""OpenAI's ``GET /models`` answer as the proxy makes it: the OpenAI face and routing share it.

A module of its own, free of routing and of any face, so the OpenAI face can
list a key's allowed aliases without importing the routed upstream (which the
one-upstream proxy never loads).
"""

from __future__ import annotations

from typing import Any

__all__ = ["model_list"]


def model_list(names: list[str]) -> dict[str, Any]:
    """OpenAI's ``GET /models`` answer naming `names` (the proxy's own listing)."""
    listing = [
        {"id": name, "object": "model", "created": 0, "owned_by": "llmchat"} for name in names
    ]
    return {"object": "list", "data": listing}
