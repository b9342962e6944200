"""`Call`: what one completion's runner needs, taken from the backend when the call starts.

The runners (`_runners`) and the settle point (`_settle`) read a `Call`, never
the backend: the wire request, the decoder factory, the transport, limits and
timeouts, the secrets, and the hooks they run (and `_redactor`) — bound
methods of the backend, taken once per call, so a hook overridden on the
class or on the instance is the one that runs. This module imports no
backend; `OpenAICommon` builds the `Call`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..dialects.base import Dialect
from ..pipeline.think_tags import ThinkTags
from ..redact import Redactor
from ..response import Response
from ..transport import Timeouts, Transport
from ._request import WireRequest

__all__ = ["Call", "LiftUsage", "OnComplete", "Reconcile"]

OnComplete = Callable[[Response], None]
"""A completion hook (`_on_blocking_complete` or `_on_stream_complete`)."""
LiftUsage = Callable[[Response, Mapping[str, Any]], None]
"""`_lift_usage`: usage and model from one decoded payload onto the Response."""
Reconcile = Callable[[Response, str, Mapping[str, Any]], str]
"""`_reconcile_finish_reason`: the finish reason the Response acts on."""


@dataclass(frozen=True, slots=True)
class Call:
    """One completion as its runner sees it: values and bound hooks, no backend."""

    request: WireRequest
    """The request exactly as posted (`prepare_chat_request`'s result)."""
    kind: str
    """``chat`` or ``text``: which dialect decodes the answer."""
    dialect: Callable[[str], Dialect]
    """`_dialect`: a fresh decoder for one completion of a kind."""
    transport: Transport
    timeouts: Timeouts
    max_response_bytes: int | None
    max_event_bytes: int | None
    keep_raw: bool
    """Whether streamed Chunks keep their decoded event (a blocking body always does)."""
    think_tags: ThinkTags | None
    secrets: tuple[str, ...] = field(repr=False)
    """`_secrets()`: the credentials kept out of the wire log."""
    redactor: Callable[[], Redactor]
    """`_redactor`: scrubs a log line about a failure (built only when one is written)."""
    lift_usage: LiftUsage
    reconcile_finish_reason: Reconcile
    on_complete: OnComplete
    """The mode's completion hook: `_on_blocking_complete` or `_on_stream_complete`."""
    lifts_model_only: bool = False
    """True when `lift_usage` is llmchat's own `_lift_usage` (not overridden): then a
    plain frame of a dialect with `plain_usage_is_model` has its model set directly,
    without the call (the per-token path)."""
