"""Rewrites a decoded OpenAI chat-completion stream as Anthropic Messages API events.

An Anthropic client reads a message as a sequence of server-sent events:
``message_start``, then content blocks (each ``content_block_start``, its
deltas, ``content_block_stop``), then ``message_delta`` with the stop reason
and ``message_stop``. Blocks never interleave, so `AnthropicStream` keeps one
block open at a time and closes it before opening the next. OpenAI reasoning
text becomes a ``thinking`` block (closed by a ``signature_delta``), text a
``text`` block and each tool call a ``tool_use`` block whose arguments stream
as ``input_json_delta`` fragments. ``ping`` events keep an idle client
connected while the upstream is silent (`AnthropicStream.ping`).
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Mapping
from typing import Any, Final

from .. import wire_json
from ..tools import ToolCallAssembler, decode_arguments, slot_for_fragment
from .anthropic_terms import anthropic_usage, error_type_for_status, stop_reason_for
from .chunk_fields import reasoning_text, tool_call_list
from .translator import StreamTranslator
from .usage_counts import usage_counts

__all__ = [
    "AnthropicStream",
    "anthropic_usage",
    "error_type_for_status",
    "stop_reason_for",
    "thinking_signature",
]

_UNFINISHED_TOOL_CALL = "Upstream stream ended inside an unfinished tool call"

_SIGNATURE_PREFIX: Final = "llmchat-sha256:"

# The content_block_delta events, pre-encoded with the members in `wire_json.encode_data`'s
# (sorted) order, so a delta is one escaped string and the block's index spliced in:
# the same bytes as encoding the whole event, without building and encoding a dict per token.
_TEXT_DELTA: Final = (
    b'event: content_block_delta\ndata: {"delta":{"text":%b,"type":"text_delta"},'
    b'"index":%d,"type":"content_block_delta"}\n\n'
)
_THINKING_DELTA: Final = (
    b'event: content_block_delta\ndata: {"delta":{"thinking":%b,"type":"thinking_delta"},'
    b'"index":%d,"type":"content_block_delta"}\n\n'
)
_JSON_DELTA: Final = (
    b'event: content_block_delta\ndata: {"delta":{"partial_json":%b,"type":"input_json_delta"},'
    b'"index":%d,"type":"content_block_delta"}\n\n'
)
_json_string = wire_json.json_string


def thinking_signature(thinking: str) -> str:
    """The ``signature`` of a thinking block the proxy sends: opaque and deterministic.

    The proxy cannot sign as Anthropic does; this names the block's origin and
    hashes its text, so the same thinking always carries the same signature and
    a client that checks for a non-empty one (the SDK keeps it, Claude Code
    sends it back) is satisfied. Thinking sent back in history goes upstream as
    that turn's ``reasoning_content``; the signature is not read.
    """
    return _SIGNATURE_PREFIX + hashlib.sha256(thinking.encode("utf-8", "surrogatepass")).hexdigest()


class _ToolBlock:
    """One OpenAI tool call on its way to becoming one ``tool_use`` block."""

    __slots__ = ("block_index", "buffered", "closed", "id", "name", "sent")

    def __init__(self) -> None:
        self.id = ""
        self.name = ""
        self.block_index: int | None = None
        # Arguments that arrived before the name: a tool_use block cannot open
        # without one, so they wait.
        self.buffered: list[str] = []
        # Exactly what the client received, to check it is one JSON object.
        self.sent: list[str] = []
        self.closed = False


class AnthropicStream(StreamTranslator):
    """Translate one OpenAI stream into Anthropic Messages API server-sent events.

    `model` is named in ``message_start`` unless an upstream chunk named its
    own before it went out. Call `delta` per decoded OpenAI chunk, then
    `finish` once the upstream is done (after its usage frame), or
    `error_event` to end the stream with an error.
    """

    content_type = "text/event-stream"

    def __init__(self, model: str, *, max_tokens: int | None = None) -> None:
        super().__init__(model)
        self._max_tokens = max_tokens
        self._thinking_hash: Any = None  # the open thinking block's running sha256
        self._started = False
        self._next_index = 0
        self._open_index: int | None = None
        self._open_kind: str | None = None  # "text", "thinking" or "tool_use"
        self._tools = ToolCallAssembler()
        self._tool_blocks: list[_ToolBlock] = []
        self._tool_by_key: dict[Any, _ToolBlock] = {}
        self._used_tools = False
        self._cached_tokens: int | None = None

    # -- public API -------------------------------------------------------

    def start(self) -> bytes:
        """Nothing yet: ``message_start`` waits for output so it can name the upstream model."""
        return b""

    def ping(self) -> bytes:
        """A ``ping`` event (after ``message_start`` if none went out yet); ``b""`` once ended.

        For a stream whose upstream is silent (prefill, a tool call being
        generated): the client sees bytes and keeps its idle timer from firing.
        """
        if self._finished:
            return b""
        self._out = []
        self._ensure_started()
        self._out.append(b'event: ping\ndata: {"type": "ping"}\n\n')
        return self._take()

    def finish(
        self,
        stop_reason: str | None = None,
        input_tokens: int | None = None,
        output_tokens: int | None = None,
    ) -> bytes:
        """Close the open block and end the message; ``b""`` if the stream already ended.

        `stop_reason` is written verbatim (Anthropic vocabulary); without it
        the recorded OpenAI finish reason is mapped by `stop_reason_for`.
        Token arguments override the counts the upstream reported.
        """
        if self._finished:
            return b""
        if self._tools_unfinished():
            return self.error_event(502, _UNFINISHED_TOOL_CALL)

        def close() -> bytes:
            self._out = []
            self._override_counts(input_tokens, output_tokens)
            reason = stop_reason or stop_reason_for(
                self._finish_reason,
                self._used_tools,
                output_tokens=self._output_tokens,
                max_tokens=self._max_tokens,
            )
            self._ensure_started()
            self._close_block()
            # The real input count travels here: it is known only once the upstream is done.
            usage = anthropic_usage(self._input_tokens, self._cached_tokens, self._output_tokens)
            self._emit(
                "message_delta",
                {"delta": {"stop_reason": str(reason), "stop_sequence": None}, "usage": usage},
            )
            self._emit("message_stop", {})
            return self._take()

        return self._closing(close)

    def error_event(self, status: int, message: str) -> bytes:
        """End the stream with an Anthropic ``error`` event; ``b""`` if already finished."""
        if self._finished:
            return b""
        self._finished = True
        self._errored = True
        kind = error_type_for_status(status)
        try:
            return self._event("error", {"error": {"type": kind, "message": str(message)}})
        except Exception:
            # e.g. a lone surrogate in the message: UTF-8 cannot carry it.
            return self._event("error", {"error": {"type": kind, "message": "Upstream error"}})

    # -- chunk handling ---------------------------------------------------

    def _note_usage(self, usage: Mapping[str, Any]) -> None:
        super()._note_usage(usage)
        cached = usage_counts(usage).cached
        if cached is not None:
            self._cached_tokens = cached

    def _texts(self, content: str, reasoning: str) -> bytes:
        open_kind = self._open_kind
        if content and not reasoning and open_kind == "text":
            # The common frame: text into the open text block, one template.
            data = _TEXT_DELTA % (_json_string(content).encode("utf-8"), self._open_index)
            self._content_bytes += len(content) if content.isascii() else len(content.encode())
            return data
        if reasoning and not content and open_kind == "thinking":
            self._thinking_hash.update(reasoning.encode("utf-8", "surrogatepass"))
            return _THINKING_DELTA % (_json_string(reasoning).encode("utf-8"), self._open_index)
        self._out = []
        if reasoning:
            self._write_thinking(reasoning)
        if content:
            self._write_text(content)
        return self._take()

    def _choice(self, delta: Mapping[str, Any], finish_reason: str | None) -> bytes:
        self._out = []
        thinking = reasoning_text(delta)
        if thinking:
            self._write_thinking(thinking)
        content = delta.get("content")
        if isinstance(content, str) and content:
            self._write_text(content)
        tool_calls = tool_call_list(delta)
        if tool_calls is not None:
            self._tools.feed(tool_calls)
            for position, fragment in enumerate(tool_calls):
                if isinstance(fragment, Mapping):
                    self._write_tool_fragment(fragment, position)
        return self._take()

    def _write_thinking(self, thinking: str) -> None:
        if self._open_kind != "thinking":
            self._open_block({"type": "thinking", "thinking": "", "signature": ""}, "thinking")
            self._thinking_hash = hashlib.sha256()
        self._thinking_hash.update(thinking.encode("utf-8", "surrogatepass"))
        quoted = _json_string(thinking).encode("utf-8")
        self._out.append(_THINKING_DELTA % (quoted, self._open_index))

    def _write_text(self, text: str) -> None:
        if self._open_kind != "text":
            self._open_block({"type": "text", "text": ""}, "text")
        self._out.append(_TEXT_DELTA % (_json_string(text).encode("utf-8"), self._open_index))
        self._content_bytes += len(text.encode("utf-8"))

    def _write_tool_fragment(self, fragment: Mapping[str, Any], position: int) -> None:
        tool = self._tool_for(fragment, position)
        call_id = fragment.get("id")
        if isinstance(call_id, str) and call_id and not tool.id:
            tool.id = call_id
        function = fragment.get("function")
        function = function if isinstance(function, Mapping) else {}
        name = function.get("name")
        if isinstance(name, str) and name and not tool.name:
            tool.name = name
        arguments = function.get("arguments")
        if isinstance(arguments, Mapping):
            # A few servers send the whole object at once instead of text.
            arguments = wire_json.encode_data(arguments).decode("utf-8") if arguments else ""
        if not isinstance(arguments, str):
            arguments = ""
        if tool.closed:
            if arguments:
                raise ValueError("arguments for a tool call whose block is closed")
            return
        if tool.block_index is None:
            if arguments:
                tool.buffered.append(arguments)
            if tool.name:
                self._open_tool(tool)
            return
        if arguments:
            self._send_arguments(tool, arguments)

    def _tool_for(self, fragment: Mapping[str, Any], position: int) -> _ToolBlock:
        # The assembler's own matching, so each block is one of its calls.
        return slot_for_fragment(
            fragment, position, self._tool_blocks, self._tool_by_key, _ToolBlock
        )

    def _open_tool(self, tool: _ToolBlock) -> None:
        index = self._next_index
        tool_id = tool.id or f"toolu_{index}"
        self._open_block(
            {"type": "tool_use", "id": tool_id, "name": tool.name, "input": {}}, "tool_use"
        )
        tool.block_index = index
        self._used_tools = True
        buffered, tool.buffered = tool.buffered, []
        for part in buffered:
            self._send_arguments(tool, part)

    def _send_arguments(self, tool: _ToolBlock, arguments: str) -> None:
        quoted = _json_string(arguments).encode("utf-8")
        self._out.append(_JSON_DELTA % (quoted, tool.block_index))
        tool.sent.append(arguments)

    def _tools_unfinished(self) -> bool:
        if not self._tool_blocks:
            return False
        calls = self._tools.finish()
        if any(call.arguments_undecodable or not call.name for call in calls):
            return True
        for tool in self._tool_blocks:
            if tool.block_index is None:
                return True  # never named, so never shown to the client
            _, _, undecodable = decode_arguments("".join(tool.sent))
            if undecodable:
                return True
        return False

    # -- blocks and framing -----------------------------------------------

    def _ensure_started(self) -> None:
        if self._started:
            return
        message: dict[str, Any] = {
            "id": "msg_" + (self._chunk_id or uuid.uuid4().hex),
            "type": "message",
            "role": "assistant",
            "model": self._model,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            # Known here only when the upstream counted before its first output
            # (rare); otherwise 0, and the final message_delta carries the count.
            "usage": anthropic_usage(self._input_tokens or 0, self._cached_tokens, 0),
        }
        self._emit("message_start", {"message": message})
        self._started = True

    def _open_block(self, block: dict[str, Any], kind: str) -> None:
        self._ensure_started()
        self._close_block()
        index = self._next_index
        self._emit("content_block_start", {"index": index, "content_block": block})
        self._next_index += 1
        self._open_index = index
        self._open_kind = kind

    def _close_block(self) -> None:
        if self._open_index is None:
            return
        if self._open_kind == "tool_use":
            for tool in self._tool_blocks:
                if tool.block_index == self._open_index:
                    tool.closed = True
        if self._open_kind == "thinking":
            signature = _SIGNATURE_PREFIX + self._thinking_hash.hexdigest()
            self._emit(
                "content_block_delta",
                {
                    "index": self._open_index,
                    "delta": {"type": "signature_delta", "signature": signature},
                },
            )
        self._emit("content_block_stop", {"index": self._open_index})
        self._open_index = None
        self._open_kind = None

    def _emit(self, name: str, fields: Mapping[str, Any]) -> None:
        self._out.append(self._event(name, fields))

    @staticmethod
    def _event(name: str, fields: Mapping[str, Any]) -> bytes:
        body = {"type": name, **fields}
        return (
            b"event: " + name.encode("ascii") + b"\ndata: " + wire_json.encode_data(body) + b"\n\n"
        )
