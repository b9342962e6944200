"""Every wire dialect through llmchat's one pipeline, on loopback, against each dialect's peers.

llmchat speaks five wires with one pipeline (framing → dialect decoder →
accumulator → judge): the OpenAI chat stream (`OpenAICommon`, the reference),
Anthropic's ``/v1/messages`` SSE (`Anthropic`), Ollama's ``/api/chat`` NDJSON
(`Ollama`), Gemini's ``streamGenerateContent?alt=sse`` (`Gemini`) and, when this
tree has it, OpenAI's ``/v1/responses`` SSE (`OpenAIResponses`). One server in
its own process (`_stream_server.py`, playing `llmchat.testing` Replies) serves
every wire, routed by path; each synthetic stream is shaped like that dialect's real captures
(``shared/captures/<dialect>/``), and every event is its own HTTP chunk, as real
servers write.

1. Streaming throughput: a 2,000-delta answer per dialect; frames/s, the median
   of interleaved rounds, for llmchat (`chat_completion_stream`, every chunk
   consumed), the dialect's official SDK where installed, litellm pointed at
   the loopback URL, and a raw floor (`requests` + ``read1`` + split +
   `json.loads`, extracting the text). Every client's text is checked against
   the expected text on every stream; a mismatch or an exception is counted in
   the table's errors column.
2. Blocking per-request overhead: a short answer ("ok"), µs per call over the raw
   floor (`requests.post` + `json.loads`), interleaved best-of rounds.
3. The pure stages: µs per event of framing + dialect decode + accumulate on
   pre-framed bytes, no sockets.

    python bench/bench_dialects.py [--rounds N] [--blocking-rounds M] [--frames F] [--quick]
                                   [--no-write]
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import statistics
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from _child_client import ChildContender, StreamServer
from _report import (
    BENCHMARKS_MD,
    NOT_INSTALLED,
    STDLIB_ONLY,
    Elapsed,
    best_of,
    best_of_interleaved,
    blocked,
    calls_for,
    close_litellm,
    interleaved_rounds,
    json_parsers_differ,
    litellm_stream,
    loopback_only,
    median_ratios,
    package_versions,
    stamp,
    table,
    write_section,
)
from bench_stream import _drain_litellm, deltas, raw_content, stream_frames

SECTION = "Dialects: one pipeline for every wire"

MODEL = "loopback"
SYSTEM = "You are a terse assistant."
PROMPT = "Tell me a long story."
SHORT_PROMPT = "Say ok."
MESSAGES: list[dict[str, Any]] = [
    {"role": "system", "content": SYSTEM},
    {"role": "user", "content": PROMPT},
]
SHORT_MESSAGES: list[dict[str, Any]] = [
    {"role": "system", "content": SYSTEM},
    {"role": "user", "content": SHORT_PROMPT},
]
FRAMES = 2_000
"""Text deltas in every stream (each dialect adds its own opening and closing events)."""
SHORT = "ok"
"""The blocking answer."""
MAX_TOKENS = 4_096
"""Sent by the clients that need a `max_tokens` (Anthropic's); above the stream's length."""
SHORT_MAX_TOKENS = 8
PROMPT_TOKENS = 22
LITELLM_RESPONSES_MODEL = "gpt-4o"
"""The model litellm's Responses route is given. For a model missing from its model map
(``openai/responses/loopback``) litellm 1.110.2 posts without ``stream: true`` and fakes
the stream from the blocking answer; a name in the map makes it stream for real (the
server ignores the name)."""
RAW_READ = 65_536
WAIT = 10.0
DRAIN = "(litellm logging backlog)"
CHECK = "(checks)"

# -- the wires: one per dialect, shaped like its captures --------------------------------


def _dumps(obj: Any, *, google: bool = False) -> bytes:
    """Compact JSON as the servers write it (Google's has a space after each colon)."""
    separators = (",", ": ") if google else (",", ":")
    return json.dumps(obj, separators=separators, ensure_ascii=False).encode()


def _event(kind: str, payload: dict[str, Any]) -> bytes:
    """One named SSE event (Anthropic's and the Responses API's ``event:`` + ``data:``)."""
    return b"event: " + kind.encode() + b"\ndata: " + _dumps(payload) + b"\n\n"


# Anthropic: as captures/anthropic/llmanthropic_prefill_stop_sequence.sse.txt.
_A_MODEL = "claude-haiku-4-5-20251001"
_A_ID = "msg_01KozUDYHvRtgs3NLgG7jzN9"


def _anthropic_usage(output: int) -> dict[str, Any]:
    return {
        "input_tokens": PROMPT_TOKENS,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
        "output_tokens": output,
    }


def anthropic_frames(texts: list[str]) -> list[bytes]:
    """message_start, content_block_start, ping, the text_deltas, content_block_stop,
    message_delta (stop_reason, usage), message_stop."""
    start = {
        "model": _A_MODEL,
        "id": _A_ID,
        "type": "message",
        "role": "assistant",
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {**_anthropic_usage(1), "service_tier": "standard"},
    }
    return [
        _event("message_start", {"type": "message_start", "message": start}),
        _event(
            "content_block_start",
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "text", "text": ""},
            },
        ),
        _event("ping", {"type": "ping"}),
        *(
            _event(
                "content_block_delta",
                {
                    "type": "content_block_delta",
                    "index": 0,
                    "delta": {"type": "text_delta", "text": text},
                },
            )
            for text in texts
        ),
        _event("content_block_stop", {"type": "content_block_stop", "index": 0}),
        _event(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                "usage": _anthropic_usage(len(texts)),
            },
        ),
        _event("message_stop", {"type": "message_stop"}),
    ]


def anthropic_body(text: str) -> bytes:
    return _dumps(
        {
            "model": _A_MODEL,
            "id": _A_ID,
            "type": "message",
            "role": "assistant",
            "content": [{"type": "text", "text": text}],
            "stop_reason": "end_turn",
            "stop_sequence": None,
            "usage": {**_anthropic_usage(1), "service_tier": "standard"},
        }
    )


# Ollama: as captures/ollama/sk_chat_stream_phi3.ndjson (Go's encoder: one line, LF).


def _created_at(index: int) -> str:
    return f"2024-07-02T11:45:{16.216898458 + index * 0.009634:012.9f}Z"


def _ollama_done(count: int, text: str = "") -> dict[str, Any]:
    return {
        "model": MODEL,
        "created_at": _created_at(count),
        "message": {"role": "assistant", "content": text},
        "done_reason": "stop",
        "done": True,
        "total_duration": 2_562_123_571,
        "load_duration": 55_676_662,
        "prompt_eval_count": PROMPT_TOKENS,
        "prompt_eval_duration": 34_847_000,
        "eval_count": count,
        "eval_duration": count * 9_634_000,
    }


def ollama_frames(texts: list[str]) -> list[bytes]:
    """A ``done: false`` line per delta, then the ``done: true`` line (counts, durations)."""
    lines = [
        {
            "model": MODEL,
            "created_at": _created_at(index),
            "message": {"role": "assistant", "content": text},
            "done": False,
        }
        for index, text in enumerate(texts)
    ]
    return [_dumps(line) + b"\n" for line in [*lines, _ollama_done(len(texts))]]


def ollama_body(text: str) -> bytes:
    return _dumps(_ollama_done(1, text)) + b"\n"


# Gemini: as captures/gemini/fb_citations.sse.txt (googleai, alt=sse): CRLF line ends,
# and the last text rides on the chunk that carries finishReason and usageMetadata.
_G_MODEL = "gemini-2.5-flash"
_G_ID = "ftnJaMmAMcm-qtsPwvCCoAo"


def _gemini_chunk(text: str, finish: int | None = None) -> dict[str, Any]:
    candidate: dict[str, Any] = {"content": {"parts": [{"text": text}], "role": "model"}}
    if finish is not None:
        candidate["finishReason"] = "STOP"
    candidate["index"] = 0
    chunk: dict[str, Any] = {"candidates": [candidate]}
    if finish is not None:
        chunk["usageMetadata"] = {
            "promptTokenCount": PROMPT_TOKENS,
            "candidatesTokenCount": finish,
            "totalTokenCount": PROMPT_TOKENS + finish,
            "promptTokensDetails": [{"modality": "TEXT", "tokenCount": PROMPT_TOKENS}],
        }
    chunk["modelVersion"] = _G_MODEL
    chunk["responseId"] = _G_ID
    return chunk


def gemini_frames(texts: list[str]) -> list[bytes]:
    """One ``data:`` event per delta; the last also has finishReason STOP and usageMetadata."""
    chunks = [_gemini_chunk(text) for text in texts[:-1]]
    chunks.append(_gemini_chunk(texts[-1], finish=len(texts)))
    return [b"data: " + _dumps(chunk, google=True) + b"\r\n\r\n" for chunk in chunks]


def gemini_body(text: str) -> bytes:
    return _dumps(_gemini_chunk(text, finish=1), google=True)


# Responses: as captures/responses/pyai_text_stream_after_tool.sse.txt (event names,
# ids) with the sequence numbers and logprobs of vercel_lmstudio_open_responses_basic.
_R_ID = "resp_67e554a21aa88191b65876ac5e5bbe0406c52f0e511c76ed"
_R_MSG = "msg_67e554a28bec8191b56d3e2331eff88006c52f0e511c76ed"
_R_MODEL = "gpt-4o-2024-08-06"


def _response(status: str, output: list[Any], usage: dict[str, Any] | None) -> dict[str, Any]:
    return {
        "id": _R_ID,
        "object": "response",
        "created_at": 1743082658,
        "status": status,
        "error": None,
        "incomplete_details": None,
        "instructions": None,
        "max_output_tokens": None,
        "model": _R_MODEL,
        "output": output,
        "parallel_tool_calls": True,
        "previous_response_id": None,
        "reasoning": {"effort": None, "summary": None},
        "store": False,
        "temperature": 1.0,
        "text": {"format": {"type": "text"}},
        "tool_choice": "auto",
        "tools": [],
        "top_p": 1.0,
        "truncation": "disabled",
        "usage": usage,
        "user": None,
        "metadata": {},
    }


def _responses_usage(output: int) -> dict[str, Any]:
    return {
        "input_tokens": PROMPT_TOKENS,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": output,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": PROMPT_TOKENS + output,
    }


def _message_item(text: str, status: str) -> dict[str, Any]:
    content = [] if text is None else [_output_text(text)]
    return {
        "type": "message",
        "id": _R_MSG,
        "status": status,
        "role": "assistant",
        "content": content,
    }


def _output_text(text: str) -> dict[str, Any]:
    return {"type": "output_text", "text": text, "annotations": [], "logprobs": []}


def responses_frames(texts: list[str]) -> list[bytes]:
    """response.created, in_progress, output_item.added, content_part.added, the
    output_text deltas, the done events, response.completed with usage."""
    whole = "".join(texts)
    where = {"item_id": _R_MSG, "output_index": 0, "content_index": 0}
    empty_item = {"type": "message", "id": _R_MSG, "status": "in_progress", "role": "assistant"}
    events: list[tuple[str, dict[str, Any]]] = [
        ("response.created", {"response": _response("in_progress", [], None)}),
        ("response.in_progress", {"response": _response("in_progress", [], None)}),
        ("response.output_item.added", {"output_index": 0, "item": {**empty_item, "content": []}}),
        ("response.content_part.added", {**where, "part": _output_text("")}),
        *(
            ("response.output_text.delta", {**where, "delta": text, "logprobs": []})
            for text in texts
        ),
        ("response.output_text.done", {**where, "text": whole, "logprobs": []}),
        ("response.content_part.done", {**where, "part": _output_text(whole)}),
        (
            "response.output_item.done",
            {"output_index": 0, "item": _message_item(whole, "completed")},
        ),
        (
            "response.completed",
            {
                "response": _response(
                    "completed",
                    [_message_item(whole, "completed")],
                    _responses_usage(len(texts)),
                )
            },
        ),
    ]
    return [
        _event(kind, {"type": kind, **payload, "sequence_number": number})
        for number, (kind, payload) in enumerate(events)
    ]


def responses_body(text: str) -> bytes:
    return _dumps(_response("completed", [_message_item(text, "completed")], _responses_usage(1)))


# OpenAI chat: bench_stream's llama-server-shaped frames; a blocking body to match.


def chat_body(text: str) -> bytes:
    return _dumps(
        {
            "choices": [
                {
                    "finish_reason": "stop",
                    "index": 0,
                    "message": {"role": "assistant", "content": text},
                }
            ],
            "created": 1796027353,
            "model": "models/tiny-qwen2vocab-llama.gguf",
            "system_fingerprint": "b0-unknown",
            "object": "chat.completion",
            "usage": {"completion_tokens": 1, "prompt_tokens": PROMPT_TOKENS, "total_tokens": 23},
            "id": "chatcmpl-vNALU1NHT9RVhbQxM7yAFZBtvCaNhLbK",
        }
    )


# -- the raw floor's text extraction, one per dialect ---------------------------------------


def _chat_text(payload: bytes) -> str | None:
    return raw_content(payload)


def _anthropic_text(payload: bytes) -> str | None:
    event = json.loads(payload)
    if event.get("type") == "content_block_delta":
        delta = event["delta"]
        if delta.get("type") == "text_delta":
            return delta["text"]
    return None


def _ollama_text(line: bytes) -> str | None:
    return json.loads(line)["message"].get("content")


def _gemini_text(payload: bytes) -> str | None:
    candidates = json.loads(payload).get("candidates")
    if not candidates:
        return None
    parts = candidates[0].get("content", {}).get("parts", ())
    return "".join(part.get("text", "") for part in parts)


def _responses_text(payload: bytes) -> str | None:
    event = json.loads(payload)
    return event["delta"] if event.get("type") == "response.output_text.delta" else None


def _chat_whole(body: Any) -> str:
    return body["choices"][0]["message"]["content"]


def _anthropic_whole(body: Any) -> str:
    return "".join(block["text"] for block in body["content"] if block["type"] == "text")


def _ollama_whole(body: Any) -> str:
    return body["message"]["content"]


def _gemini_whole(body: Any) -> str:
    return "".join(part.get("text", "") for part in body["candidates"][0]["content"]["parts"])


def _responses_whole(body: Any) -> str:
    return "".join(
        part["text"]
        for item in body["output"]
        if item["type"] == "message"
        for part in item["content"]
        if part["type"] == "output_text"
    )


@dataclass
class Wire:
    """One dialect: its synthetic stream, its blocking answer, and how the floor reads it."""

    key: str
    title: str
    backend: str
    """The llmchat backend's name in `llmchat`."""
    frames: list[bytes]
    content_type: str
    body: bytes
    separator: bytes
    """What ends one event on this wire (the raw floor splits on it)."""
    text_of: Callable[[bytes], str | None]
    whole_of: Callable[[Any], str]
    ndjson: bool = False
    notes: dict[str, str] = field(default_factory=dict)

    def payload(self, frame: bytes) -> bytes:
        """The JSON of one event: the line itself (NDJSON) or its ``data:`` field."""
        if self.ndjson:
            return frame
        return frame[frame.index(b"data: ") + 6 :].rstrip(b"\r\n")

    def stream_reply(self) -> Any:
        from llmchat.testing import Reply, Write

        headers = {"Content-Type": self.content_type}
        steps = [Write(frame) for frame in self.frames]
        return Reply(200, headers, framing="chunked", steps=steps)  # type: ignore[arg-type]

    def blocking_reply(self) -> Any:
        from llmchat.testing import Reply

        return Reply(200, {"Content-Type": "application/json"}, self.body)


def wires(texts: list[str], with_responses: bool) -> dict[str, Wire]:
    """Every dialect's wire, the OpenAI chat reference first."""
    out = {
        "chat": Wire(
            "chat",
            "OpenAI chat (reference)",
            "OpenAICommon",
            stream_frames(texts),
            "text/event-stream",
            chat_body(SHORT),
            b"\n\n",
            _chat_text,
            _chat_whole,
        ),
        "anthropic": Wire(
            "anthropic",
            "Anthropic Messages",
            "Anthropic",
            anthropic_frames(texts),
            "text/event-stream; charset=utf-8",
            anthropic_body(SHORT),
            b"\n\n",
            _anthropic_text,
            _anthropic_whole,
        ),
        "ollama": Wire(
            "ollama",
            "Ollama /api/chat",
            "Ollama",
            ollama_frames(texts),
            "application/x-ndjson",
            ollama_body(SHORT),
            b"\n",
            _ollama_text,
            _ollama_whole,
            ndjson=True,
        ),
        "gemini": Wire(
            "gemini",
            "Gemini streamGenerateContent",
            "Gemini",
            gemini_frames(texts),
            "text/event-stream",
            gemini_body(SHORT),
            b"\r\n\r\n",
            _gemini_text,
            _gemini_whole,
        ),
    }
    if with_responses:
        out["responses"] = Wire(
            "responses",
            "OpenAI Responses",
            "OpenAIResponses",
            responses_frames(texts),
            "text/event-stream; charset=utf-8",
            responses_body(SHORT),
            b"\n\n",
            _responses_text,
            _responses_whole,
        )
    return out


OLLAMA_SHOW: dict[str, Any] = {
    "license": "",
    "modelfile": f"FROM {MODEL}",
    "parameters": "",
    "template": "{{ .Prompt }}",
    "details": {
        "parent_model": "",
        "format": "gguf",
        "family": "llama",
        "families": ["llama"],
        "parameter_size": "1B",
        "quantization_level": "Q4_0",
    },
    "model_info": {"general.architecture": "llama", "llama.context_length": 8192},
    "capabilities": ["completion"],
}
"""What an Ollama answers on ``/api/show`` (litellm's ollama_chat asks once for model info)."""


class Router:
    """The server's script: picks each request's dialect by path, its mode by the body."""

    def __init__(self, all_wires: dict[str, Wire]) -> None:
        self.replies: dict[tuple[str, bool], Any] = {}
        for key, wire in all_wires.items():
            self.replies[(key, True)] = wire.stream_reply()
            self.replies[(key, False)] = wire.blocking_reply()
        self.paths = {
            "/v1/chat/completions": "chat",
            "/v1/messages": "anthropic",
            "/api/chat": "ollama",
            "/v1/responses": "responses",
        }

    def __call__(self, request: Any) -> Any:
        from llmchat.testing import Reply

        path = request.path.partition("?")[0]
        if path.endswith(":streamGenerateContent"):
            return self.replies[("gemini", True)]
        if path.endswith(":generateContent"):
            return self.replies[("gemini", False)]
        if path == "/api/show":
            return Reply.json(OLLAMA_SHOW)
        key = self.paths.get(path)
        if key is None or (key, True) not in self.replies:
            return Reply.error(404, f"no dialect serves {path}")
        body = request.json() or {}
        stream = body.get("stream", key == "ollama")  # Ollama streams unless told not to
        return self.replies[(key, bool(stream))]


def server_router(frames: int, with_responses: bool) -> Router:
    """The stream server's router (run in its own process by `_stream_server.py`)."""
    return Router(wires(deltas(frames), with_responses))


def expected_path(key: str) -> str:
    """The path every client of dialect `key` should post to (query left out)."""
    return {
        "chat": "/v1/chat/completions",
        "anthropic": "/v1/messages",
        "ollama": "/api/chat",
        "gemini": f"/v1beta/models/{MODEL}:",
        "responses": "/v1/responses",
    }[key]


# -- the clients ------------------------------------------------------------------------


def raw_events(response: Any, separator: bytes) -> Iterator[bytes]:
    """The raw floor's framing: ``read1``, split on the wire's event separator."""
    read1 = response.raw.read1
    rest = b""
    while data := read1(RAW_READ):
        *events, rest = (rest + data).split(separator)
        yield from events
    if rest.strip():
        yield rest


class Clients:
    """Every client of every dialect, built once against one server; `close()` closes them.

    `stream[(dialect, client)]` consumes one whole 2,000-delta stream and
    `short[(dialect, client)]` makes one blocking call; each returns what it read
    (llmchat: the Response; others: the text). `notes[(dialect, client)]` says why
    a client is missing.
    """

    def __init__(self, root: str, all_wires: dict[str, Wire], frames: int) -> None:
        import requests

        self.stream: dict[tuple[str, str], Callable[[], Any]] = {}
        self.short: dict[tuple[str, str], Callable[[], Any]] = {}
        self.notes: dict[tuple[str, str], str] = {}
        self._closers: list[Callable[[], Any]] = []
        url = root + "/v1"

        # -- llmchat: one backend per dialect; with the stdlib parser in a child -------
        self.children: dict[tuple[str, str], ChildContender] = {}
        from llmchat import Settings

        short_settings = Settings(max_tokens=SHORT_MAX_TOKENS)
        for key in all_wires:
            backend = make_backend(key, root)
            self._closers.append(backend.close)
            self.stream[(key, "llmchat")] = _llmchat_stream(backend)
            if json_parsers_differ():
                child = ChildContender(
                    "bench_dialects:llmchat_child",
                    {"key": key, "root": root, "frames": frames},
                    {"LLMCHAT_JSON": "stdlib"},
                )
                assert child.info["parser"] == "stdlib", child.info
                self._closers.append(child.close)
                self.children[(key, "llmchat stdlib")] = child
                self.stream[(key, "llmchat stdlib")] = child
            else:
                self.notes[(key, "llmchat stdlib")] = STDLIB_ONLY
            self.short[(key, "llmchat")] = _llmchat_short(backend, short_settings)

        # -- the raw floor ---------------------------------------------------------------
        session = requests.Session()
        self._closers.append(session.close)
        for key, wire in all_wires.items():
            self.stream[(key, "raw")], self.short[(key, "raw")] = _raw(session, root, wire)

        # -- the official SDKs -----------------------------------------------------------
        try:
            import openai
        except ImportError:
            self.notes[("chat", "sdk")] = self.notes[("responses", "sdk")] = NOT_INSTALLED
        else:
            client = openai.OpenAI(base_url=url, api_key="x", max_retries=0, timeout=WAIT)
            self._closers.append(client.close)
            self.stream[("chat", "sdk")], self.short[("chat", "sdk")] = _openai_chat(client)
            if "responses" in all_wires:
                self.stream[("responses", "sdk")], self.short[("responses", "sdk")] = (
                    _openai_responses(client)
                )
        try:
            import anthropic
        except ImportError:
            self.notes[("anthropic", "sdk")] = NOT_INSTALLED
        else:
            claude = anthropic.Anthropic(base_url=root, api_key="x", max_retries=0, timeout=WAIT)
            self._closers.append(claude.close)
            self.stream[("anthropic", "sdk")], self.short[("anthropic", "sdk")] = _anthropic(claude)
        try:
            import ollama
        except ImportError:
            self.notes[("ollama", "sdk")] = NOT_INSTALLED
        else:
            olla = ollama.Client(host=root, timeout=WAIT)
            with contextlib.suppress(Exception):
                self._closers.append(olla._client.close)  # its httpx.Client (private)
            self.stream[("ollama", "sdk")], self.short[("ollama", "sdk")] = _ollama(olla)
        try:
            from google import genai  # type: ignore[import-not-found,attr-defined] # noqa: F401
        except ImportError:
            self.notes[("gemini", "sdk")] = "google-genai not installed (not in the bench extra)"
        else:
            self.notes[("gemini", "sdk")] = "google-genai installed but not wired in this script"

        # -- litellm ---------------------------------------------------------------------
        lite = litellm_stream(url, MODEL, MESSAGES)
        if lite is None:
            for key in all_wires:
                self.notes[(key, "litellm")] = NOT_INSTALLED
        else:
            self._closers.append(close_litellm)
            self.stream[("chat", "litellm")] = lite
            routes = {
                "chat": ("openai/", url),
                "anthropic": ("anthropic/", root),
                "ollama": ("ollama_chat/", root),
                "gemini": ("gemini/", root + "/v1beta"),
                "responses": ("openai/responses/", url),
            }
            for key in all_wires:
                prefix, base = routes[key]
                model = prefix + (LITELLM_RESPONSES_MODEL if key == "responses" else MODEL)
                if key != "chat":
                    self.stream[(key, "litellm")] = _litellm(model, base, stream=True)
                self.short[(key, "litellm")] = _litellm(model, base, stream=False)

    def close(self) -> None:
        for close in reversed(self._closers):
            with contextlib.suppress(Exception):
                close()


def make_backend(key: str, root: str) -> Any:
    """llmchat's backend for dialect `key`, on the server at `root`."""
    import llmchat

    url = root + "/v1"
    if key == "chat":
        return llmchat.OpenAICommon(url, model=MODEL)
    if key == "anthropic":
        return llmchat.Anthropic(url, api_key="x", model=MODEL)
    if key == "ollama":
        return llmchat.Ollama(root, model=MODEL)
    if key == "gemini":
        return llmchat.Gemini(root + "/v1beta", api_key="x", model=MODEL)
    return llmchat.OpenAIResponses(url, api_key="x", model=MODEL)  # type: ignore[attr-defined]


def llmchat_child(
    key: str, root: str, frames: int
) -> tuple[Callable[[], Any], Callable[[Any], str | None]]:
    """In a child process: llmchat's stream of dialect `key`, and its check."""
    return _llmchat_stream(make_backend(key, root)), Ledger("".join(deltas(frames)), frames).problem


def _llmchat_stream(backend: Any) -> Callable[[], Any]:
    start = backend.chat_completion_stream

    def stream() -> Any:
        response = start(MESSAGES)
        for _chunk in response:
            pass
        return response

    return stream


def _llmchat_short(backend: Any, settings: Any) -> Callable[[], Any]:
    call = backend.chat_completion

    def short() -> Any:
        return call(SHORT_MESSAGES, settings=settings)

    return short


def _raw(session: Any, root: str, wire: Wire) -> tuple[Callable[[], str], Callable[[], str]]:
    """The raw floor for one dialect: what its request looks like, read with `requests`."""
    headers = {"Content-Type": "application/json"}
    if wire.key == "gemini":
        base = f"{root}/v1beta/models/{MODEL}"
        stream_url, short_url = base + ":streamGenerateContent?alt=sse", base + ":generateContent"

        def body(prompt: str, stream: bool) -> dict[str, Any]:
            return {
                "contents": [{"role": "user", "parts": [{"text": prompt}]}],
                "systemInstruction": {"parts": [{"text": SYSTEM}]},
            }

    else:
        stream_url = short_url = root + expected_path(wire.key)
        turn = {"chat": "messages", "anthropic": "messages", "ollama": "messages"}

        def body(prompt: str, stream: bool) -> dict[str, Any]:
            user = [{"role": "user", "content": prompt}]
            if wire.key == "anthropic":
                out: dict[str, Any] = {"system": SYSTEM, "messages": user}
                out["max_tokens"] = MAX_TOKENS if stream else SHORT_MAX_TOKENS
            elif wire.key == "responses":
                out = {"instructions": SYSTEM, "input": user}
            else:
                out = {turn[wire.key]: [{"role": "system", "content": SYSTEM}, *user]}
            return {"model": MODEL, **out, "stream": stream}

    stream_body = json.dumps(body(PROMPT, True)).encode()
    short_body = json.dumps(body(SHORT_PROMPT, False)).encode()
    separator, text_of, whole_of = wire.separator, wire.text_of, wire.whole_of
    payload = wire.payload
    post = session.post

    def stream() -> str:
        with post(stream_url, data=stream_body, headers=headers, stream=True) as response:
            texts = [text_of(payload(event)) for event in raw_events(response, separator)]
        return "".join(text for text in texts if text)

    def short() -> str:
        response = post(short_url, data=short_body, headers=headers)
        return whole_of(json.loads(response.content))

    return stream, short


def _openai_chat(client: Any) -> tuple[Callable[[], str], Callable[[], str]]:
    create = client.chat.completions.create

    def stream() -> str:
        texts = []
        for chunk in create(model=MODEL, messages=MESSAGES, stream=True):
            if chunk.choices and chunk.choices[0].delta.content:
                texts.append(chunk.choices[0].delta.content)
        return "".join(texts)

    def short() -> str:
        answer = create(model=MODEL, messages=SHORT_MESSAGES, max_tokens=SHORT_MAX_TOKENS)
        return answer.choices[0].message.content or ""

    return stream, short


def _openai_responses(client: Any) -> tuple[Callable[[], str], Callable[[], str]]:
    create = client.responses.create

    def stream() -> str:
        texts = []
        events = create(
            model=MODEL,
            instructions=SYSTEM,
            input=[{"role": "user", "content": PROMPT}],
            stream=True,
        )
        for event in events:
            if event.type == "response.output_text.delta":
                texts.append(event.delta)
        return "".join(texts)

    def short() -> str:
        answer = create(
            model=MODEL,
            instructions=SYSTEM,
            input=[{"role": "user", "content": SHORT_PROMPT}],
            max_output_tokens=SHORT_MAX_TOKENS,
        )
        return answer.output_text

    return stream, short


def _anthropic(claude: Any) -> tuple[Callable[[], str], Callable[[], str]]:
    turn = [{"role": "user", "content": PROMPT}]
    short_turn = [{"role": "user", "content": SHORT_PROMPT}]

    def stream() -> str:
        with claude.messages.stream(
            model=MODEL, max_tokens=MAX_TOKENS, system=SYSTEM, messages=turn
        ) as events:
            return "".join(events.text_stream)

    def short() -> str:
        message = claude.messages.create(
            model=MODEL, max_tokens=SHORT_MAX_TOKENS, system=SYSTEM, messages=short_turn
        )
        return "".join(block.text for block in message.content if block.type == "text")

    return stream, short


def _ollama(client: Any) -> tuple[Callable[[], str], Callable[[], str]]:
    def stream() -> str:
        parts = client.chat(model=MODEL, messages=MESSAGES, stream=True)
        return "".join(part.message.content or "" for part in parts)

    def short() -> str:
        return client.chat(model=MODEL, messages=SHORT_MESSAGES, stream=False).message.content

    return stream, short


def _litellm(model: str, api_base: str, *, stream: bool) -> Callable[[], str]:
    import litellm

    litellm.telemetry = False
    litellm.suppress_debug_info = True
    litellm.REPEATED_STREAMING_CHUNK_LIMIT = 10**9  # as _report.litellm_stream does
    completion = litellm.completion
    call: dict[str, Any] = {"model": model, "api_base": api_base, "api_key": "x"}
    if stream:
        call |= {"messages": MESSAGES, "stream": True, "max_tokens": MAX_TOKENS}

        def streamed() -> str:
            texts = []
            for chunk in completion(**call):
                if chunk.choices and chunk.choices[0].delta.content:
                    texts.append(chunk.choices[0].delta.content)
            return "".join(texts)

        return streamed
    call |= {"messages": SHORT_MESSAGES, "max_tokens": SHORT_MAX_TOKENS}

    def blocking() -> str:
        return completion(**call).choices[0].message.content or ""

    return blocking


# -- checks: every result, every round, counted, never hidden --------------------------------


class Ledger:
    """What every client returned: kept by the timed calls, checked untimed between rounds."""

    def __init__(self, expected: str, tokens: int) -> None:
        self.expected, self.tokens = expected, tokens
        self.results: dict[str, list[Any]] = {}
        self.checked: dict[str, int] = {}
        self.errors: dict[str, int] = {}
        self.first_error: dict[str, str] = {}
        self.durations: dict[str, list[float]] = {}
        """Seconds of every call, timed inside the wrapper (for the spread column)."""

    def keep(self, name: str, fn: Callable[[], Any]) -> Callable[[], None]:
        kept = self.results.setdefault(name, [])
        took = self.durations.setdefault(name, [])
        self.checked.setdefault(name, 0)
        self.errors.setdefault(name, 0)
        clock = time.perf_counter

        def call() -> None:
            start = clock()
            try:
                kept.append(fn())
            except Exception as exc:  # counted as an error, reported in the table
                kept.append(exc)
            took.append(clock() - start)

        return call

    def keep_child(self, name: str, child: ChildContender) -> Callable[[], Elapsed]:
        """`keep` for a contender in a child process: it times and checks its own streams."""
        took = self.durations.setdefault(name, [])
        self.checked.setdefault(name, 0)
        self.errors.setdefault(name, 0)

        def call() -> Elapsed:
            seen = len(child.errors)
            elapsed = child()
            took.append(elapsed)
            self.checked[name] += 1
            for trouble in child.errors[seen:]:
                self.errors[name] += 1
                self.first_error.setdefault(name, trouble)
            return elapsed

        return call

    def problem(self, result: Any) -> str | None:
        if isinstance(result, Exception):
            return f"{type(result).__name__}: {str(result)[:160]}"
        if hasattr(result, "is_success"):  # an llmchat Response
            if not result.is_success:
                return f"not a success: {result.err}"
            if result.msg != self.expected:
                return f"text differs ({len(result.msg)} vs {len(self.expected)} characters)"
            if result.completion_tokens != self.tokens:
                return f"completion_tokens {result.completion_tokens} != {self.tokens}"
            return None
        if result != self.expected:
            got = result if isinstance(result, str) else repr(result)
            return f"text differs ({len(got)} vs {len(self.expected)} characters)"
        return None

    def check(self) -> None:
        """Untimed, unreported, last in each round: check and drop every result."""
        for name, results in self.results.items():
            for result in results:
                trouble = self.problem(result)
                if trouble is not None:
                    self.errors[name] += 1
                    self.first_error.setdefault(name, trouble)
            self.checked[name] += len(results)
            results.clear()
        gc.collect()  # every round starts from the same heap


def _name(key: tuple[str, str]) -> str:
    return f"{key[0]} / {key[1]}"


# -- 3. the pure stages -------------------------------------------------------------------


def stage_costs(
    wire: Wire, dialect: type[Any], expected: str, budget: float = 0.2
) -> dict[str, float]:
    """µs per event of each stage on `wire`'s stream, one thread, no sockets.

    The frames are fed one at a time (one read per event, as on the wire).
    """
    from llmchat.ndjson import NDJSONDecoder
    from llmchat.pipeline.accumulate import Accumulator
    from llmchat.sse import SSEDecoder

    frames = wire.frames
    count = len(frames)

    def decoder() -> Any:
        if dialect.framing == "ndjson":
            return NDJSONDecoder()
        return SSEDecoder(stray_json=dialect.stray_json)

    def all_events() -> list[Any]:
        d = decoder()
        return [event for frame in frames for event in d.feed(frame)]

    events = all_events()
    texts: list[str] = []
    acc = Accumulator(dialect(), keep_raw=False)
    for event in events:
        texts.extend(chunk.content for chunk in acc.feed_event(event))
    assert "".join(texts) == expected, f"{wire.key}: the stages' text differs"
    text_of, payload = wire.text_of, wire.payload

    def floor() -> None:
        for frame in frames:
            text_of(payload(frame))

    def framing() -> None:
        feed = decoder().feed
        for frame in frames:
            feed(frame)

    def accumulate() -> None:
        feed = Accumulator(dialect(), keep_raw=False).feed_event
        for event in events:
            feed(event)

    def both() -> None:
        feed = decoder().feed
        apply = Accumulator(dialect(), keep_raw=False).feed_event
        for frame in frames:
            for event in feed(frame):
                apply(event)

    fns = {"floor": floor, "framing": framing, "accumulate": accumulate, "both": both}
    repeat = 9 if budget >= 0.2 else 3
    return {
        name: best_of(fn, repeat, calls_for(fn, budget)) / count * 1e6 for name, fn in fns.items()
    }


# -- the run ------------------------------------------------------------------------------

CLIENTS = ("llmchat", "raw", "sdk", "litellm")
STREAM_CLIENTS = ("llmchat", "llmchat stdlib", "raw", "sdk", "litellm")
STREAM_LABELS = {
    "llmchat": "llmchat `{backend}.chat_completion_stream`, every chunk",
    "llmchat stdlib": "the same llmchat in a child process with `LLMCHAT_JSON=stdlib`",
    "raw": "raw floor: `requests` + `read1` + split + `json.loads`",
    "sdk": {
        "chat": "openai {openai} `chat.completions.create(stream=True)`",
        "anthropic": "anthropic {anthropic} `messages.stream(...)` `text_stream`",
        "ollama": "ollama {ollama} `Client(host=...).chat(stream=True)`",
        "gemini": "google-genai",
        "responses": "openai {openai} `responses.create(stream=True)`",
    },
    "litellm": {
        "chat": 'litellm {litellm} `completion("openai/…", stream=True)`',
        "anthropic": 'litellm {litellm} `completion("anthropic/…", stream=True)`',
        "ollama": 'litellm {litellm} `completion("ollama_chat/…", stream=True)`',
        "gemini": 'litellm {litellm} `completion("gemini/…", stream=True)`',
        "responses": 'litellm {litellm} `completion("openai/responses/gpt-4o", stream=True)`',
    },
}
SHORT_LABELS = {
    "llmchat": "llmchat `{backend}.chat_completion`",
    "raw": "raw floor: `requests.post` + `json.loads`",
    "sdk": {
        "chat": "openai {openai} `chat.completions.create`",
        "anthropic": "anthropic {anthropic} `messages.create`",
        "ollama": "ollama {ollama} `Client.chat(stream=False)`",
        "gemini": "google-genai",
        "responses": "openai {openai} `responses.create`",
    },
    "litellm": {
        "chat": 'litellm {litellm} `completion("openai/…")`',
        "anthropic": 'litellm {litellm} `completion("anthropic/…")`',
        "ollama": 'litellm {litellm} `completion("ollama_chat/…")`',
        "gemini": 'litellm {litellm} `completion("gemini/…")`',
        "responses": 'litellm {litellm} `completion("openai/responses/gpt-4o")`',
    },
}


def _label(labels: dict[str, Any], wire: Wire, client: str, versions: dict[str, str]) -> str:
    label = labels[client]
    if isinstance(label, dict):
        label = label[wire.key]
    return label.format(backend=wire.backend, **versions)


def _parser_note(versions: dict[str, str]) -> str:
    """Which JSON parser the llmchat rows (and the pure stages) used."""
    if not json_parsers_differ():
        return "llmchat parsed JSON with the stdlib (orjson, the `fast` extra, is not installed)."
    return (
        f"llmchat parsed JSON with orjson {versions.get('orjson', '')} (the `fast` extra, "
        "used when installed; the pure stages below too); the `LLMCHAT_JSON=stdlib` rows are "
        "the same client with the stdlib parser, in a child process started with that "
        "variable (it times and checks its own streams), in the same rounds."
    )


def _ratio(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f}x"


def main(argv: list[str] | None = None) -> int:
    """Time every dialect's stream and short call, side by side; print and record them."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=9, help="stream rounds (median of)")
    parser.add_argument("--blocking-rounds", type=int, default=20, help="blocking rounds (best of)")
    parser.add_argument("--calls", type=int, default=10, help="blocking calls per client per round")
    parser.add_argument(
        "--frames", type=int, default=FRAMES, help=f"text deltas per stream ({FRAMES:,})"
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="a smoke run: 300 deltas, 5 rounds, few blocking calls; prints, never writes",
    )
    parser.add_argument("--no-write", action="store_true", help="do not update BENCHMARKS.md")
    args = parser.parse_args(argv)
    if args.quick:
        args.frames, args.rounds, args.blocking_rounds, args.calls = 300, 5, 3, 2
        args.no_write = True
    if args.rounds < 5:
        parser.error("--rounds must be at least 5")
    frames: int = args.frames

    import llmchat

    versions = package_versions("openai", "litellm", "anthropic", "ollama", "orjson")
    with_responses = hasattr(llmchat, "OpenAIResponses")
    texts = deltas(frames)
    expected = "".join(texts)
    all_wires = wires(texts, with_responses)
    dialects = {key: getattr(llmchat, wire.backend).dialect for key, wire in all_wires.items()}

    # The server runs in its own process: no client shares its interpreter or GIL.
    server = StreamServer(
        "bench_dialects:server_router", {"frames": frames, "with_responses": with_responses}
    )
    stream_ledger = Ledger(expected, frames)
    short_ledger = Ledger(SHORT, 1)
    with loopback_only(), server:
        clients = Clients(server.url, all_wires, frames)

        def kept(key: tuple[str, str], fn: Callable[[], Any]) -> Callable[[], Any]:
            child = clients.children.get(key)
            if child is not None:
                return stream_ledger.keep_child(_name(key), child)
            return stream_ledger.keep(_name(key), fn)

        try:
            # Where each client posted, from one call each (untimed; checked, then dropped).
            routes: dict[tuple[str, str], str] = {}
            for key, fn in clients.stream.items():
                start = len(server.log())
                kept(key, fn)()
                if key[1] == "litellm":
                    _drain_litellm()
                routes[key] = " ".join(entry["path"] for entry in server.log(start))
            stream_ledger.check()

            # -- 1. streaming: one round = every client of every dialect, in turn --------
            timed: dict[str, Callable[[], Any]] = {}
            for key, fn in clients.stream.items():
                timed[_name(key)] = kept(key, fn)
                if key[1] == "litellm":
                    timed[f"{DRAIN} {_name(key)}"] = _drain_litellm
            timed[CHECK] = stream_ledger.check
            print(f"streaming: {len(clients.stream)} clients, {args.rounds} rounds ...", flush=True)
            stream_rounds = interleaved_rounds(timed, args.rounds)
            seconds = {name: statistics.median(values) for name, values in stream_rounds.items()}

            # -- 2. blocking ------------------------------------------------------------
            short_timed = {
                _name(key): short_ledger.keep(_name(key), fn) for key, fn in clients.short.items()
            }
            short_timed[CHECK] = short_ledger.check
            print(
                f"blocking: {len(clients.short)} clients, {args.blocking_rounds} rounds ...",
                flush=True,
            )
            short_seconds = best_of_interleaved(short_timed, args.blocking_rounds, args.calls)
            short_ledger.check()
            requests_served = len(server.log())
        finally:
            clients.close()

    # -- 3. pure stages ---------------------------------------------------------------
    budget = 0.01 if args.quick else 0.2
    stages = {
        key: stage_costs(wire, dialects[key], expected, budget) for key, wire in all_wires.items()
    }

    for thread in threading.enumerate():  # readers end on their own once settled
        if thread.name == "llmchat-stream":
            thread.join(WAIT)
    leftover = sorted(t.name for t in threading.enumerate() if t is not threading.current_thread())
    assert not blocked, f"network access attempted: {blocked}"

    # -- the tables ----------------------------------------------------------------------
    def errors(ledger: Ledger, key: tuple[str, str]) -> str:
        name = _name(key)
        return f"{ledger.errors.get(name, 0)} / {ledger.checked.get(name, 0)}"

    def spread(values: list[float]) -> str:
        return f"{min(values) * 1e3:,.0f}-{max(values) * 1e3:,.0f}"

    def per_round(slow: tuple[str, str], fast: tuple[str, str]) -> float | None:
        """The median over rounds of `slow`'s seconds over `fast`'s (None if one did not run)."""
        names = (_name(slow), _name(fast))
        if not all(name in stream_rounds for name in names):
            return None
        pair = {name: stream_rounds[name] for name in names}
        return median_ratios(pair, names[0])[names[1]]

    stream_rows: list[list[str]] = []
    summary: list[list[str]] = []
    for dkey, wire in all_wires.items():
        count = len(wire.frames)
        floor = seconds.get(_name((dkey, "raw")))
        mine = seconds.get(_name((dkey, "llmchat")))
        for client in STREAM_CLIENTS:
            key = (dkey, client)
            label = f"{wire.title}: " + _label(STREAM_LABELS, wire, client, versions)
            if key not in clients.stream:
                note = clients.notes.get(key, "not run")
                stream_rows.append([f"{label}: {note}", f"{count:,}", *["—"] * 6])
                continue
            secs = seconds[_name(key)]
            stream_rows.append(
                [
                    label,
                    f"{count:,}",
                    f"{secs * 1e3:,.1f}",
                    spread(stream_ledger.durations[_name(key)][-args.rounds :]),
                    f"{count / secs:,.0f}",
                    _ratio(per_round((dkey, "raw"), key)),
                    _ratio(per_round(key, (dkey, "llmchat"))),
                    errors(stream_ledger, key),
                ]
            )
        summary.append(
            [
                wire.title,
                f"{count / mine:,.0f}" if mine else "—",
                _ratio(per_round((dkey, "raw"), (dkey, "llmchat"))),
                _ratio(per_round((dkey, "raw"), (dkey, "llmchat stdlib"))),
                _ratio(per_round((dkey, "sdk"), (dkey, "llmchat"))),
                _ratio(per_round((dkey, "litellm"), (dkey, "llmchat"))),
            ]
        )
    stream_header = [
        "dialect: client",
        "events",
        "ms / stream",
        "rounds' range ms",
        "frames / s",
        "x floor speed",
        "llmchat x this",
        "errors",
    ]

    short_rows: list[list[str]] = []
    for dkey, wire in all_wires.items():
        floor = short_seconds.get(_name((dkey, "raw")))
        mine = short_seconds.get(_name((dkey, "llmchat")))
        for client in CLIENTS:
            key = (dkey, client)
            label = f"{wire.title}: " + _label(SHORT_LABELS, wire, client, versions)
            if key not in clients.short:
                note = clients.notes.get(key, "not run")
                short_rows.append([f"{label}: {note}", "—", "—", "—", "—", "—"])
                continue
            secs = short_seconds[_name(key)]
            short_rows.append(
                [
                    label,
                    f"{secs * 1e6:,.0f}",
                    f"{(secs - floor) * 1e6:+,.0f}" if floor else "—",
                    _ratio(secs / floor if floor else None),
                    _ratio(secs / mine if mine else None),
                    errors(short_ledger, key),
                ]
            )
    short_header = [
        "dialect: client",
        "µs / request",
        "vs floor µs",
        "x floor",
        "x llmchat",
        "errors",
    ]

    stage_rows = []
    for dkey, wire in all_wires.items():
        cost = stages[dkey]
        cls = dialects[dkey]
        decoder = "NDJSONDecoder" if cls.framing == "ndjson" else "SSEDecoder"
        stage_rows.append(
            [
                f"{wire.title}: `{cls.__module__}.{cls.__name__}`, `{decoder}`",
                f"{len(wire.frames):,}",
                f"{cost['framing']:.2f}",
                f"{cost['accumulate']:.2f}",
                f"{cost['both']:.2f}",
                f"{cost['floor']:.2f}",
                f"{cost['both'] / cost['floor']:.2f}x",
            ]
        )
    stage_header = [
        "dialect: decoder, framing",
        "events",
        "framing µs",
        "decode + accumulate µs",
        "both µs",
        "floor µs",
        "x floor",
    ]

    # -- print ------------------------------------------------------------------------------
    for header, rows in ((stream_header, stream_rows), (short_header, short_rows)):
        width = max(len(cells[0]) for cells in rows)
        for cells in [header, *rows]:
            print(f"  {cells[0]:<{width}} " + " ".join(f"{c:>14}" for c in cells[1:]))
        print()
    for cells in [stage_header, *stage_rows]:
        print(f"  {cells[0]:<90} " + " ".join(f"{c:>10}" for c in cells[1:]))
    print("routes:", {_name(k): v for k, v in routes.items()})
    failing = {n: e for n, e in stream_ledger.first_error.items()}
    failing |= {f"{n} (blocking)": e for n, e in short_ledger.first_error.items()}
    print("errors:", failing or "none")
    print(f"threads left after closing everything: {leftover or 'none'}")

    # -- the section --------------------------------------------------------------------------
    lite_routes = [
        f"{all_wires[k[0]].title} → `{path}`" for k, path in routes.items() if k[1] == "litellm"
    ]
    wrong_routes = [
        f"{_name(k)} posted to `{path or 'nothing'}`"
        for k, path in routes.items()
        if not path.startswith(expected_path(k[0]))
    ]
    total_streams = sum(stream_ledger.checked.values())
    total_errors = sum(stream_ledger.errors.values()) + sum(short_ledger.errors.values())
    markdown = [
        stamp(),
        "",
        "One server in its own process (`bench/_stream_server.py`, playing `llmchat.testing` "
        "Replies) serves every wire on loopback, routed by path "
        "(`/v1/chat/completions`, `/v1/messages`, `/api/chat`, "
        "`/v1beta/models/{m}:streamGenerateContent?alt=sse`"
        + (", `/v1/responses`" if with_responses else "")
        + "). Each stream answers the same "
        f"{FRAMES:,} text deltas (`bench_stream.deltas`, mean {len(expected) / FRAMES:.1f} "
        "characters, a few non-ASCII) in that dialect's own events, shaped like its captures: "
        "OpenAI chat as in `bench_stream` (llama-server's frames); Anthropic `message_start`, "
        "`content_block_start`, `ping`, one `content_block_delta` `text_delta` per delta, "
        "`content_block_stop`, `message_delta` with `stop_reason` and usage, `message_stop`; "
        "Ollama one `done: false` NDJSON line per delta, then the `done: true` line with "
        "counts and durations; Gemini one `data:` event per delta (CRLF line ends, as the "
        "googleai captures), the last one also carrying `finishReason: STOP` and "
        "`usageMetadata`"
        + (
            "; Responses `response.created`, `response.in_progress`, `output_item.added`, "
            "`content_part.added`, one `response.output_text.delta` per delta, the three "
            "`.done` events and `response.completed` with usage (every event with its "
            "`sequence_number`)"
            if with_responses
            else ""
        )
        + ". **Every event is its own HTTP chunk** (one `Write` per event, as real servers "
        "write), so every event is its own read for every client.",
        "",
        "### Streaming throughput",
        "",
        f"Median of {args.rounds} interleaved rounds; one round streams once through every "
        "client of every dialect in turn, after one warm-up stream each. Every stream's result "
        "was checked untimed at the end of its round (the text equals the expected text; for "
        "llmchat also `is_success` and `completion_tokens` = "
        f"{frames:,} from the dialect's usage) and dropped, then `gc.collect()` ran "
        f"({total_streams:,} streams checked). A failed check or an exception is counted in "
        "`errors` (failed / checked), never dropped. `x floor speed` is the median over "
        "rounds of the raw floor's time for the same dialect over the client's in that round "
        "(its speed over the floor's); `llmchat x this` is the median over rounds of the "
        "client's time over llmchat's. Each round's contenders run back to back, so a burst "
        "of load elsewhere moves a round's figures together and its ratios much less. "
        "`rounds' range` is the fastest and slowest of the timed rounds. The server runs in "
        "its own process (`bench/_stream_server.py`), so no client shares its interpreter "
        "or GIL. " + _parser_note(versions),
        "",
        table(stream_header, stream_rows),
        "",
        "Summary, llmchat per dialect (frames/s, and its speed over each peer's):",
        "",
        table(
            [
                "dialect",
                "llmchat frames / s",
                "x floor",
                "stdlib parser: x floor",
                "x SDK",
                "x litellm",
            ],
            summary,
        ),
        "",
        "The raw floor does the least a client can: `requests` with `stream=True`, "
        "`raw.read1`, split on the wire's event separator (`\\n\\n`, Gemini's `\\r\\n\\r\\n`, "
        "NDJSON's `\\n`), `json.loads` of each event's `data:` (or line) and the text picked "
        "out by hand; it keeps nothing and judges nothing. litellm was pointed at the "
        "loopback server with `api_base` and posted to it for every dialect: "
        + "; ".join(lite_routes)
        + (f". Wrong routes: {'; '.join(wrong_routes)}." if wrong_routes else ".")
        + (
            " For the Responses dialect litellm is given the model `gpt-4o`: with a model "
            "its model map lacks (`openai/responses/loopback`, and `litellm.responses` alike) "
            "it posts without `stream: true` and fakes the stream from the blocking answer "
            "(in a trial run every such stream came back as the 2-character blocking answer); "
            "the server ignores the name."
            if with_responses
            else ""
        )
        + " Its `ollama_chat` route also asks `/api/show` for model info on its first call; "
        "the server answers it as an Ollama would. litellm ran with "
        "`REPEATED_STREAMING_CHUNK_LIMIT` lifted, and its per-chunk "
        "logging backlog was waited out, untimed, after each of its streams (as in "
        "`bench_stream`). Gemini has no SDK row: google-genai is not installed here (it is not "
        "in the bench extra).",
        "",
        "### Blocking: per-request overhead",
        "",
        f'A short answer ("{SHORT}") in each dialect\'s blocking body, '
        f"`max_tokens={SHORT_MAX_TOKENS}`; every client built once and reused. Best of "
        f"{args.blocking_rounds} interleaved rounds of {args.calls} calls per client, after one "
        "warm-up call each; every answer checked, as above. The server runs in this "
        "interpreter, so every row includes its work; the floor is `requests.Session().post` "
        "of the dialect's JSON body and `json.loads` of the answer.",
        "",
        table(short_header, short_rows),
        "",
        "### The pure stages: framing, decode, accumulate",
        "",
        "Each dialect's stream as pre-framed bytes, one event per `feed` (one read per "
        "event, as on the wire), in one thread with no sockets; µs per event, best of 9. "
        "The dialect is the backend's own `dialect` class, decoded by an "
        "`llmchat.pipeline.Accumulator(<dialect>(), keep_raw=False)` (the backends' "
        "default); framing is `llmchat.sse.SSEDecoder` (Gemini's with `stray_json`) or "
        "`llmchat.ndjson.NDJSONDecoder`. The floor is the raw floor's per-event work: "
        "find `data:`, `json.loads`, pick the text. Each dialect's accumulated text was "
        "checked equal to the expected one.",
        "",
        table(stage_header, stage_rows),
        "",
        f"Checks: {requests_served:,} requests served; "
        + (f"**{total_errors} errors** (see the tables)" if total_errors else "no errors")
        + "; no connect or DNS lookup left the loopback host."
        + (
            ""
            if with_responses
            else " `llmchat.OpenAIResponses` is not in this tree, so the Responses dialect "
            "was not measured."
        ),
    ]
    if not args.no_write:
        write_section(BENCHMARKS_MD, SECTION, "\n".join(markdown))
    return 0


if __name__ == "__main__":
    sys.exit(main())
