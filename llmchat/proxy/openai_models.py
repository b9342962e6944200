"""The ``GET /v1/models`` answer the proxy makes itself; the OpenAI face and routing share it.

A module of its own, free of routing and of any face, so the OpenAI face can
list a key's allowed aliases without importing the routed upstream (which the
one-upstream proxy never loads).
"""

from __future__ import annotations

from typing import Any

__all__ = ["model_list"]


def model_list(names: list[str]) -> dict[str, Any]:
    """The ``GET /v1/models`` answer naming `names` (the proxy's own listing).

    OpenAI's and Anthropic's list share the path and ``data[].id``: each entry
    also has Anthropic's members (``type``, ``display_name``, ``created_at``) and
    the page its ``has_more``, ``first_id`` and ``last_id``, so both SDKs (and
    an agent's model picker) read the same answer whole.
    """
    listing = [
        {
            "id": name,
            "object": "model",
            "created": 0,
            "owned_by": "llmchat",
            "type": "model",
            "display_name": name,
            "created_at": "1970-01-01T00:00:00Z",
        }
        for name in names
    ]
    first, last = (names[0], names[-1]) if names else (None, None)
    return {
        "object": "list",
        "data": listing,
        "has_more": False,
        "first_id": first,
        "last_id": last,
    }
