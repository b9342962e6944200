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
from .completion import ERR_PROVIDER, inband_error, no_finish, usage_fields
from .sse import SSEEvent
from .tools import ToolCall, ToolCallAssembler

__all__ = ["StreamParser"]

DONE: Final = "[DONE]"
_NO_USAGE: Final[dict[str, Any]] = {}
_PLAIN_DELTA: Final = frozenset({"role", "content"})


class StreamParser:
    """State of one stream, advanced one SSE event at a time.

    After the finish chunk only usage and the model are taken from later
    events: the finish chunk is the last one whose content, reasoning and
    tool calls count. Every tool call lands whole, exactly once, on the
    chunk that carries the finish reason; a ``stop`` with calls becomes
    ``tool_calls``.
    """

    def __init__(self, kind: str = "chat", *, keep_raw: bool = True) -> None:
        self.kind = kind
        self.keep_raw = keep_raw
        """Whether each Chunk keeps its decoded event as `raw` (memory: ~1 KB a frame)."""
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
        self.undecodable = 0
        """Of `dropped`, the frames that were not UTF-8: their text is lost."""
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
        data = event.data
        if data is None or event.undecodable:
            if event.comment is not None:
                self.comments += 1
            elif event.undecodable:
                self.dropped += 1
                self.undecodable += 1
            return []
        if len(data) < 16 and data.strip() == DONE:
            self.done = True
            return []
        try:
            payload = _parse_json(data)
        except ValueError:
            self.dropped += 1  # a garbage frame, or one cut off mid-JSON at end of body
            return []
        if type(payload) is not dict:
            self.dropped += 1
            return []
        self.payload = payload
        if self.done:
            return []
        return self._payload(payload)

    # Frames come from json.loads, so exact `dict`/`list`/`str` checks are enough
    # here, and much cheaper per frame than isinstance against Mapping.

    def _payload(self, payload: dict[str, Any]) -> list[Chunk]:
        plain = self._plain_content(payload)
        if plain is not None:
            if not plain:
                return []
            model = payload.get("model")
            raw = payload if self.keep_raw else None
            return [Chunk(plain, raw, False, model if type(model) is str else None)]
        if payload.get("error"):
            self.error = self.error or inband_error(payload["error"])
            return []
        usage = usage_fields(payload) if "usage" in payload else _NO_USAGE
        choices = payload.get("choices")
        if self.wire_finish_reason is not None or not choices or type(choices) is not list:
            return [self._usage_chunk(payload, usage)] if "usage" in usage else []
        choice = choices[0]
        if type(choice) is not dict or choice.get("index", 0) != 0:
            choice = _first_choice(choices)
            if choice is None:
                return [self._usage_chunk(payload, usage)] if "usage" in usage else []
        return self._choice(payload, choice, usage)

    def _plain_content(self, payload: dict[str, Any]) -> str | None:
        """The content of the most common frame, or None for anything else.

        Most frames of a stream are one content delta with nothing else to look
        at (no finish, usage, error, reasoning or tool calls); they skip the
        general path below, which gives the same result for them.
        """
        if (
            self.wire_finish_reason is not None
            or self.kind != "chat"
            or "usage" in payload
            or "error" in payload
        ):
            return None
        choices = payload.get("choices")
        if type(choices) is not list or not choices:
            return None
        choice = choices[0]
        if (
            type(choice) is not dict
            or choice.get("finish_reason") is not None
            or "error" in choice
            or choice.get("index", 0) != 0
        ):
            return None
        delta = choice.get("delta")
        if type(delta) is not dict or not delta.keys() <= _PLAIN_DELTA:
            return None
        content = delta.get("content")
        if content is None:
            return ""
        return content if type(content) is str else None

    def _choice(
        self, payload: dict[str, Any], choice: dict[str, Any], usage: dict[str, Any]
    ) -> list[Chunk]:
        if choice.get("error"):
            self.error = self.error or inband_error(choice["error"])
        content, thinking, refusal = self._delta(choice)
        reason = choice.get("finish_reason")
        landed: list[ToolCall] = []
        if reason is not None and not no_finish(reason):
            self.wire_finish_reason = str(reason)
            landed = self.assembler.finish()
            self.finish_reason = (
                "tool_calls" if landed and self.wire_finish_reason == "stop" else str(reason)
            )
            if self.wire_finish_reason == "error" and self.error is None:
                self.error = ERR_PROVIDER
        final = self.wire_finish_reason is not None
        if not (content or thinking or refusal or landed or final or "usage" in usage):
            return []
        model = payload.get("model")
        return [
            Chunk(
                content,
                payload if self.keep_raw else None,
                final,
                model if type(model) is str else None,
                self.finish_reason,
                landed or None,
                None,
                thinking or None,
                refusal or None,
                usage.get("usage"),
                usage.get("cached_tokens"),
            )
        ]

    def _delta(self, choice: dict[str, Any]) -> tuple[str, str, str]:
        """`(content, thinking, refusal)` of one choice; tool-call fragments fed on."""
        if self.kind == "text":
            text = choice.get("text")
            return (text if type(text) is str else ""), "", ""
        delta = choice.get("delta")
        if type(delta) is not dict:
            return "", "", ""
        content = delta.get("content")
        thinking = ""
        if type(content) is not str:
            content, thinking = _content_and_thinking(content)
        if not delta.keys() <= _PLAIN_DELTA:  # reasoning, refusal or tool calls too
            for key in ("reasoning_content", "reasoning"):
                value = delta.get(key)
                if type(value) is str and value:
                    thinking += value
                    break
            fragments = delta.get("tool_calls")
            if type(fragments) is list and fragments:
                self.saw_tool_calls = True
                self.assembler.feed(fragments)
            refusal = delta.get("refusal")
            return content, thinking, refusal if type(refusal) is str else ""
        return content, thinking, ""

    def _usage_chunk(self, payload: dict[str, Any], usage: dict[str, Any]) -> Chunk:
        model = payload.get("model")
        return Chunk(
            content="",
            raw=payload if self.keep_raw else None,
            model=model if type(model) is str else None,
            usage=usage.get("usage"),
            cached_tokens=usage.get("cached_tokens"),
        )


def _parse_json(text: str) -> Any:
    """`json.loads` without its two whitespace regex passes in the common case."""
    try:
        value, end = _raw_decode(text)
    except ValueError:
        return json.loads(text)  # leading whitespace, or really not JSON: loads decides
    if end != len(text) and text[end:].strip():
        raise ValueError(f"extra data after the JSON value at {end}")
    return value


_raw_decode = json.JSONDecoder().raw_decode


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
