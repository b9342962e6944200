"""The frame parser: SSE events of an OpenAI-compatible stream into `Chunk`s.

A push stage with no I/O (STYLE rule 5): `StreamParser.feed(event)` returns
the chunks one event produces and keeps the stream's state — the recorded
finish reason, ``[DONE]``, in-band errors, dropped frames, tool calls being
assembled. The reader thread only wires it between the SSE decoder and the
Response; the settle decision reads its state (spec: STREAM TERMINATION
CONTRACT).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final

from .chunk import Chunk
from .completion import inband_error, no_finish, usage_fields
from .sse import SSEEvent
from .tools import ToolCall, ToolCallAssembler

__all__ = ["StreamParser"]

DONE: Final = "[DONE]"


class StreamParser:
    """State of one stream, advanced one SSE event at a time.

    After the finish chunk only usage and the model are taken from later
    events: the finish chunk is the last one whose content, reasoning and
    tool calls count. Every tool call lands whole, exactly once, on the
    chunk that carries the finish reason; a ``stop`` with calls becomes
    ``tool_calls``.
    """

    def __init__(self, kind: str = "chat") -> None:
        self.kind = kind
        self.assembler = ToolCallAssembler()
        self.wire_finish_reason: str | None = None
        """The finish reason exactly as it arrived; None until it does."""
        self.finish_reason: str | None = None
        """The finish reason to act on (``stop`` → ``tool_calls`` when calls landed)."""
        self.done = False
        """True once ``data: [DONE]`` arrived."""
        self.error: str | None = None
        """An in-band provider error; None when there was none."""
        self.dropped = 0
        """Frames that could not be parsed (not UTF-8, not JSON, cut off)."""
        self.saw_tool_calls = False
        self.comments = 0
        self.payload: dict[str, Any] | None = None
        """The JSON object the last event carried; None for comments, [DONE], drops."""

    @property
    def finished(self) -> bool:
        return self.wire_finish_reason is not None

    def feed(self, event: SSEEvent) -> list[Chunk]:
        """Return the chunks `event` produces (often none)."""
        self.payload = None
        if event.data is None:
            if event.comment is not None:
                self.comments += 1
            elif event.undecodable:
                self.dropped += 1
            return []
        if event.undecodable:
            self.dropped += 1
            return []
        if event.data.strip() == DONE:
            self.done = True
            return []
        try:
            payload = json.loads(event.data)
        except ValueError:
            self.dropped += 1  # a garbage frame, or one cut off mid-JSON at end of body
            return []
        if not isinstance(payload, dict):
            self.dropped += 1
            return []
        self.payload = payload
        if self.done:
            return []
        return self._payload(payload)

    def _payload(self, payload: dict[str, Any]) -> list[Chunk]:
        error = inband_error(payload.get("error"))
        if error is not None:
            self.error = self.error or error
            return []
        usage = usage_fields(payload)
        choice = _first_choice(payload.get("choices"))
        if self.finished or not isinstance(choice, Mapping):
            return [self._usage_chunk(payload, usage)] if "usage" in usage else []
        return self._choice(payload, choice, usage)

    def _choice(
        self, payload: dict[str, Any], choice: Mapping[str, Any], usage: dict[str, Any]
    ) -> list[Chunk]:
        error = inband_error(choice.get("error"))
        if error is not None:
            self.error = self.error or error
        content, thinking, refusal = self._delta(choice)
        reason = choice.get("finish_reason")
        landed: list[ToolCall] = []
        if not no_finish(reason):
            self.wire_finish_reason = str(reason)
            landed = self.assembler.finish()
            self.finish_reason = (
                "tool_calls" if landed and self.wire_finish_reason == "stop" else str(reason)
            )
            if self.wire_finish_reason == "error" and self.error is None:
                self.error = "The provider ended the stream with finish_reason 'error'"
        if not (content or thinking or refusal or landed or self.finished or "usage" in usage):
            return []
        model = payload.get("model")
        return [
            Chunk(
                content=content,
                raw=payload,
                is_final=self.finished,
                model=model if isinstance(model, str) else None,
                finish_reason=self.finish_reason,
                tool_calls=landed or None,
                thinking=thinking or None,
                refusal=refusal or None,
                usage=usage.get("usage"),
                cached_tokens=usage.get("cached_tokens"),
            )
        ]

    def _delta(self, choice: Mapping[str, Any]) -> tuple[str, str, str]:
        """`(content, thinking, refusal)` of one choice; tool-call fragments fed on."""
        if self.kind == "text":
            text = choice.get("text")
            return (text if isinstance(text, str) else ""), "", ""
        delta = choice.get("delta")
        if not isinstance(delta, Mapping):
            return "", "", ""
        content, thinking = _content_and_thinking(delta.get("content"))
        for key in ("reasoning_content", "reasoning"):
            value = delta.get(key)
            if isinstance(value, str) and value:
                thinking += value
                break
        refusal = delta.get("refusal")
        fragments = delta.get("tool_calls")
        if isinstance(fragments, list) and fragments:
            self.saw_tool_calls = True
            self.assembler.feed(fragments)
        return content, thinking, refusal if isinstance(refusal, str) else ""

    @staticmethod
    def _usage_chunk(payload: dict[str, Any], usage: dict[str, Any]) -> Chunk:
        model = payload.get("model")
        return Chunk(
            content="",
            raw=payload,
            model=model if isinstance(model, str) else None,
            usage=usage.get("usage"),
            cached_tokens=usage.get("cached_tokens"),
        )


def _first_choice(choices: Any) -> Mapping[str, Any] | None:
    """Choice 0: llmchat asks for one; with n > 1 the others are not mixed in."""
    if not isinstance(choices, list):
        return None
    for choice in choices:
        if isinstance(choice, Mapping) and choice.get("index", 0) == 0:
            return choice
    return None


def _content_and_thinking(content: Any) -> tuple[str, str]:
    """A delta's content as text, with ``thinking`` parts of a list content apart."""
    if isinstance(content, str):
        return content, ""
    if not isinstance(content, list):
        return "", ""
    text: list[str] = []
    thinking: list[str] = []
    for part in content:
        if not isinstance(part, Mapping):
            continue
        if part.get("type") == "thinking":
            value = part.get("thinking", part.get("text"))
            if isinstance(value, str):
                thinking.append(value)
        elif isinstance(part.get("text"), str):
            text.append(part["text"])
    return "".join(text), "".join(thinking)
