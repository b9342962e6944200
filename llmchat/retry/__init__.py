"""Retries and fallback chains: `Inference` runs one request over several backends.

`inference.Inference` drives the run (attempts, waits, the run deadline,
`cancel()`); `policy` holds the pure decisions (`classify`'s three buckets,
`backoff` and ``Retry-After``); `attempts` holds what a run reports (`Attempt`)
and the exceptions that end it (`Exhausted`, `Truncated`, `TimedOut`,
`Cancelled`). This package imports `llmchat.errors` and `llmchat.response`
and drives backends only through their `chat_completion_stream`; it never
imports the proxy, the CLI or a backend module.
"""

from __future__ import annotations

from .attempts import Attempt, Cancelled, Exhausted, TimedOut, Truncated
from .inference import Inference
from .policy import MAX_BACKOFF, MAX_RETRY_AFTER, backoff, classify

__all__ = [
    "MAX_BACKOFF",
    "MAX_RETRY_AFTER",
    "Attempt",
    "Cancelled",
    "Exhausted",
    "Inference",
    "TimedOut",
    "Truncated",
    "backoff",
    "classify",
]
