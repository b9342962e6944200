"""A usage event: what one proxied request cost and how it ended, never any text or key.

Every sink (`sinks`) and store (`store`, `sql`) takes this one shape; its
fields are bounded by `fields`' rules. Imports nothing of the proxy but
`usage.fields`.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass, field, fields
from typing import Any

from .fields import RULES, clean

__all__ = ["CLIENT_ABORT_STATUS", "PROBE_STATUSES", "UsageEvent", "key_id_of"]

CLIENT_ABORT_STATUS = 499
"""The status recorded when the client hung up (nginx's convention; never sent)."""

PROBE_STATUSES = frozenset({401, 404, 405})
"""Refusals anyone can provoke without a key: no key, no such route, wrong method."""


@dataclass
class UsageEvent:
    """What one request cost and how it ended. Never holds a credential or any text."""

    request_id: str
    face: str
    """``ollama``, ``anthropic``, ``openai`` or ``proxy`` (health, models, …)."""
    route: str
    """The route served, e.g. ``/api/chat``; ``(unknown)`` for a path the proxy does not serve."""
    model: str | None = None
    """The model the client asked for (the upstream's when it named its own)."""
    stream: bool = False
    status: int = 200
    """The HTTP status sent; 499 when the client hung up."""
    ok: bool = True
    """False for any failure, including an error line after a 200."""
    duration_ms: float = 0.0
    input_tokens: int | None = None
    output_tokens: int | None = None
    content_bytes: int = 0
    """UTF-8 bytes of answer text written to the client: an observation, not an estimate."""
    error_type: str | None = None
    """``client_abort``, an upstream error class (``http``, ``timeout``, …), or a
    face error (``invalid_request``, ``unauthorized``, ``too_large``, ``not_found``)."""
    started_at: float = field(default_factory=time.time)
    """Unix time the request arrived."""
    key_id: str | None = None
    """Which client key was accepted, as a non-reversible id (`key_id_of`); None when
    the proxy checks no key or the request presented none that passed."""
    node: str | None = None
    """The routed node that answered (`llmchat.proxy.routing`); None without routing."""
    tier: int | None = None
    """The index of the alias's tier that node served; None without routing."""
    alias: str | None = None
    """The configured name (or glob) the client's model matched; None without routing."""
    cached_tokens: int | None = None
    """Of `input_tokens`, those the upstream served from its prompt cache (llama-server's
    ``cache_n``, OpenAI's ``prompt_tokens_details.cached_tokens``, Anthropic's
    ``cache_read_input_tokens``, ...); None when the upstream did not say."""
    cache_write_tokens: int | None = None
    """Of `input_tokens`, those written to the upstream's prompt cache (Anthropic's
    ``cache_creation_input_tokens``); None when the upstream did not say."""
    reasoning_tokens: int | None = None
    """Of `output_tokens`, the model's reasoning (OpenAI's ``reasoning_tokens``,
    Anthropic's ``thinking_tokens``, Gemini's ``thoughtsTokenCount``); None: not said."""
    cost: float | None = None
    """What the request cost by the config's `prices` (per million tokens, in the
    prices' currency); None when no price names its model or no tokens were counted.
    Computed in decimal and rounded once to 1e-9 (`usage.prices`); this float is that
    amount's nearest, and `money.nanos_of` gives the exact integer nanos back."""
    ttfb_ms: float | None = None
    """From the request's arrival to the first byte of the answer's body handed to the
    server (a stream's first piece, a blocking answer's body); None: no body was sent."""
    wait_ms: float | None = None
    """How long routing waited for a slot on a node (every attempt's wait, summed; a
    request refused as busy waited too); None without routing or before it routed."""

    def as_dict(self) -> dict[str, Any]:
        """The fields as every sink gets them, each within its `fields` rule."""
        # Every field is a scalar: a shallow copy is the same dict as
        # `dataclasses.asdict`, at a twentieth of its cost per request.
        return clean({name: getattr(self, name) for name in _FIELDS})

    @property
    def is_probe(self) -> bool:
        """A refusal a client without a key can provoke at will."""
        # Gemini's face answers a wrong key with Google's 400 (error_type unauthorized).
        return self.key_id is None and (
            self.status in PROBE_STATUSES or self.error_type == "unauthorized"
        )


_FIELDS: tuple[str, ...] = tuple(f.name for f in fields(UsageEvent))
assert _FIELDS == tuple(RULES), "every UsageEvent field needs a rule in usage.fields, in order"


_KEY_ID_SALT = b"llmchat usage key id v1"


def key_id_of(key: str) -> str:
    """A short id for client key `key`: the same in every process, never the key.

    PBKDF2 with many rounds (computed once per configured key), so a guessable
    key is still costly to confirm from its id.
    """
    digest = hashlib.pbkdf2_hmac("sha256", key.encode("utf-8"), _KEY_ID_SALT, 50_000)
    return "key_" + digest.hex()[:12]
