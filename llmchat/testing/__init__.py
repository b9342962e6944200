"""llmchat.testing: a loopback OpenAI-compatible server with scripted replies and faults.

This module only re-exports; each name lives in its own module.
"""

from __future__ import annotations

from .chat import ChatResponder
from .headers import Headers
from .record import RecordedRequest
from .script import Drop, Pause, Pings, Reply, ScriptError, Stall, Step, WaitFor, Write
from .server import Script, ScriptedServer

__all__ = [
    "ChatResponder",
    "Drop",
    "Headers",
    "Pause",
    "Pings",
    "RecordedRequest",
    "Reply",
    "Script",
    "ScriptError",
    "ScriptedServer",
    "Stall",
    "Step",
    "WaitFor",
    "Write",
]
