"""Rewrites a decoded OpenAI chat-completion stream as Ollama newline-delimited JSON.

Ollama streams one JSON object per line, each a whole message with a ``done``
flag; there is no prologue and no event framing. `OllamaStream` turns each
decoded OpenAI chunk into at most one such line and closes with the line an
Ollama client reads its token counts from (``done: true``).

A tool call whose arguments are not a JSON object is a parser rejection: the
stream ends with the generic error line (`MALFORMED`), never with the call
sent as ``"arguments": {}`` and a successful close, so no client runs a tool
with arguments the model did not give.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any, Final

from .. import wire_json
from ..tools import ToolCall, ToolCallAssembler
from .chunk_fields import reasoning_text
from .rejection import UndecodableArguments
from .translator import StreamTranslator
from .usage_counts import usage_counts

__all__ = ["OllamaStream", "ollama_tool_call"]

_SHAPES = ("chat", "generate")
_UNFINISHED_TOOL_CALL = "Upstream stream ended inside an unfinished tool call"


_second_prefix: tuple[int, str] = (-1, "")


def _timestamp() -> str:
    """Now in UTC as Ollama writes ``created_at``: RFC 3339 with microseconds.

    The date and time part is formatted once per second: it is written on every
    line, and strftime per line was a measurable share of the proxy's cost.
    """
    global _second_prefix
    now = time.time()
    second = int(now)
    cached, prefix = _second_prefix
    if cached != second:
        prefix = time.strftime("%Y-%m-%dT%H:%M:%S.", time.gmtime(second))
        _second_prefix = (second, prefix)  # one tuple swap: safe across threads
    return f"{prefix}{int((now - second) * 1_000_000):06d}Z"


# The lines of a delta, pre-encoded with the members in `wire_json.encode_data`'s (sorted)
# order: created_at (`_now`'s stamp spliced in), the escaped text
# and the model's JSON string; the same bytes as encoding the line's dict, at a fraction
# of the cost per token.
_CHAT_LINE: Final = (
    b'{"created_at":%b,"done":false,"message":{"content":%b,"role":"assistant"},"model":%b}\n'
)
_CHAT_THINKING_LINE: Final = (
    b'{"created_at":%b,"done":false,"message":{"content":%b,"role":"assistant",'
    b'"thinking":%b},"model":%b}\n'
)
_GENERATE_LINE: Final = b'{"created_at":%b,"done":false,"model":%b,"response":%b}\n'
_GENERATE_THINKING_LINE: Final = (
    b'{"created_at":%b,"done":false,"model":%b,"response":%b,"thinking":%b}\n'
)
_json_string = wire_json.json_string


def ollama_tool_call(call: ToolCall, index: int) -> dict[str, Any]:
    """One ``message.tool_calls[*]`` entry as current Ollama writes it.

    ``function.index`` is the call's position in the answer; ``id`` is the
    upstream's call id, left out when it gave none. Raises
    `UndecodableArguments` for a call whose arguments were not a JSON object.
    """
    if call.arguments_undecodable:
        raise UndecodableArguments(f"tool call {call.name!r}: arguments are not a JSON object")
    out: dict[str, Any] = {}
    if call.id:
        out["id"] = call.id
    out["function"] = {"index": index, "name": call.name, "arguments": dict(call.arguments)}
    return out


class OllamaStream(StreamTranslator):
    """Translate one OpenAI stream into Ollama ``/api/chat`` or ``/api/generate`` lines.

    `model` is named on every line until an upstream chunk names its own.
    `shape` is ``"chat"`` (default; text under ``message``) or ``"generate"``
    (text under ``response``). Tool calls are rendered only for ``chat``.
    Reasoning text goes under ``message.thinking`` (chat) or ``thinking``
    (generate), where Ollama's own thinking models put it. Usage may be spelled
    ``prompt_tokens``/``completion_tokens`` or ``input_tokens``/``output_tokens``;
    cached prompt tokens become ``prompt_eval_cached_count`` on the last line.
    """

    content_type = "application/x-ndjson"

    def __init__(self, model: str, shape: str = "chat") -> None:
        if shape not in _SHAPES:
            raise ValueError(f"shape must be 'chat' or 'generate', not {shape!r}")
        super().__init__(model)
        self._shape = shape
        self._tools = ToolCallAssembler()
        self._calls_sent = 0
        self._cached_tokens: int | None = None
        self._salvaged = b""
        # The model as a JSON string, for the model it was made of (None: not yet made).
        self._quoted_model: tuple[str | None, bytes] = (None, b"")

    # -- public API -------------------------------------------------------

    def finish(
        self,
        done_reason: str | None = None,
        input_tokens: int | None = None,
        output_tokens: int | None = None,
    ) -> bytes:
        """The closing ``done: true`` line; ``b""`` if the stream already ended."""
        if self._finished:
            return b""
        if self._shape == "chat" and self._tools.pending:
            self._tools.finish()
            return self.error_event(502, _UNFINISHED_TOOL_CALL)

        def close() -> bytes:
            self._override_counts(input_tokens, output_tokens)
            reason = done_reason or self._finish_reason or "stop"
            line = self._base()
            if self._shape == "chat":
                line["message"] = {"role": "assistant", "content": ""}
            else:
                line["response"] = ""
            line["done"] = True
            line["done_reason"] = str(reason)
            line["prompt_eval_count"] = self._input_tokens or 0
            if self._cached_tokens is not None:
                line["prompt_eval_cached_count"] = self._cached_tokens
            line["eval_count"] = self._output_tokens or 0
            return self._line(line)

        return self._closing(close)

    def error_event(self, status: int, message: str) -> bytes:
        """End the stream with Ollama's ``{"error": message}`` line.

        `status` is accepted for call-shape parity and not written: the HTTP
        status went out with the first line. ``b""`` if already finished.
        """
        del status
        if self._finished:
            return b""
        self._finished = True
        self._errored = True
        try:
            return self._line({"error": str(message)})
        except Exception:
            return self._line({"error": "Upstream error"})

    # -- internals --------------------------------------------------------

    def _choice(self, delta: Mapping[str, Any], finish_reason: str | None) -> bytes:
        content = delta.get("content")
        text = content if isinstance(content, str) else ""
        thinking = reasoning_text(delta)
        calls: list[ToolCall] = []
        if self._shape == "chat":
            self._tools.feed(delta.get("tool_calls"))
        if finish_reason is not None and self._shape == "chat" and self._tools.pending:
            calls = self._tools.finish()
        if not text and not thinking and not calls:
            return b""
        line = self._base()
        if self._shape == "chat":
            message: dict[str, Any] = {"role": "assistant", "content": text}
            if thinking:
                message["thinking"] = thinking
            line["message"] = message
            if calls:
                first = self._calls_sent
                try:
                    entries = [ollama_tool_call(call, first + i) for i, call in enumerate(calls)]
                except UndecodableArguments:
                    # The base ends the stream with MALFORMED; this delta's text still goes first.
                    if text or thinking:
                        self._salvaged = self._line({**line, "done": False})
                        self._content_bytes += len(text.encode("utf-8"))
                    raise
                message["tool_calls"] = entries
                self._calls_sent += len(calls)
        else:
            line["response"] = text
            if thinking:
                line["thinking"] = thinking
        line["done"] = False
        data = self._line(line)
        self._content_bytes += len(text.encode("utf-8"))
        return data

    def _texts(self, content: str, reasoning: str) -> bytes:
        if not content and not reasoning:
            return b""
        model, quoted_model = self._quoted_model
        if model != self._model:
            model = self._model
            quoted_model = _json_string(model).encode("utf-8")
            self._quoted_model = (model, quoted_model)
        stamp = _json_string(self._now()).encode("utf-8")
        text = _json_string(content).encode("utf-8")
        if self._shape == "chat":
            if reasoning:
                thinking = _json_string(reasoning).encode("utf-8")
                data = _CHAT_THINKING_LINE % (stamp, text, thinking, quoted_model)
            else:
                data = _CHAT_LINE % (stamp, text, quoted_model)
        elif reasoning:
            thinking = _json_string(reasoning).encode("utf-8")
            data = _GENERATE_THINKING_LINE % (stamp, quoted_model, text, thinking)
        else:
            data = _GENERATE_LINE % (stamp, quoted_model, text)
        self._content_bytes += len(content) if content.isascii() else len(content.encode())
        return data

    def _note_usage(self, usage: Mapping[str, Any]) -> None:
        counts = usage_counts(usage)
        if counts.prompt is not None:
            self._input_tokens = counts.prompt
        if counts.completion is not None:
            self._output_tokens = counts.completion
        if counts.cached is not None:
            self._cached_tokens = counts.cached

    def _salvage(self) -> bytes:
        data, self._salvaged = self._salvaged, b""
        return data

    def _base(self) -> dict[str, Any]:
        return {"model": self._model, "created_at": self._now()}

    _now = staticmethod(_timestamp)

    @staticmethod
    def _line(obj: Mapping[str, Any]) -> bytes:
        return wire_json.encode_data(obj) + b"\n"
