"""ChatResponder: canned OpenAI-compatible answers, shaped like llama-server's."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import KW_ONLY, dataclass
from typing import Any, Final

from .record import RecordedRequest
from .script import Reply

__all__ = ["ChatResponder"]

# Fixed so replies are byte-for-byte deterministic across runs.
CREATED: Final = 1_700_000_000
CHAT_ID: Final = "chatcmpl-loopback"
COMPLETION_ID: Final = "cmpl-loopback"


# eq=False: a responder is a callable with an identity (hashable), not a value.
@dataclass(eq=False)
class ChatResponder:
    """A script callable that answers like a small llama-server.

    Routes (the query string is ignored):

    - `POST .../chat/completions`: a `chat.completion` with `text` as the
      assistant message; with `"stream": true`, an SSE stream of
      `chat.completion.chunk` events: a role delta, `text` in
      `chunk_size`-character content deltas, a finish chunk (empty delta,
      `finish_reason`), a `choices: []` usage event only when the request set
      `stream_options.include_usage`, then `data: [DONE]`.
    - `POST .../completions`: a `text_completion` (`choices[0].text`); streamed
      as text deltas and a finish chunk that carries `usage`, as llama-server does.
    - `GET /props`: `default_generation_settings.n_ctx` and `total_slots`.
    - `GET .../models`: a list holding `model`.
    - anything else: llama-server's 404 JSON error.

    Usage counts are made up but consistent: `prompt_tokens` is the number of
    whitespace-separated words in the request's message contents (or prompt),
    `completion_tokens` the number of chunks. `usage=False` leaves usage out
    everywhere. `delay` is the pause between streamed events. `created` and
    `id` are constants, so equal requests get identical bytes.

    Example:

        with ScriptedServer(ChatResponder("Hi!", chunk_size=1)) as url:
            ...
    """

    text: str = "Hello from the loopback server."
    _: KW_ONLY
    model: str = "loopback"
    chunk_size: int = 4
    delay: float = 0.0
    finish_reason: str | None = "stop"
    usage: bool = True
    n_ctx: int = 4096
    total_slots: int = 2

    def __post_init__(self) -> None:
        if self.chunk_size < 1:
            raise ValueError(f"chunk_size must be at least 1, got {self.chunk_size}")

    def __call__(self, request: RecordedRequest) -> Reply:
        """Return the reply for `request` (the server calls this once per request)."""
        path = request.path.partition("?")[0]
        if request.method == "POST" and path.endswith("/chat/completions"):
            return self._completion(request, chat=True)
        if request.method == "POST" and path.endswith("/completions"):
            return self._completion(request, chat=False)
        if request.method == "GET" and path == "/props":
            settings = {"n_ctx": self.n_ctx}
            return Reply.json(
                {"default_generation_settings": settings, "total_slots": self.total_slots}
            )
        if request.method == "GET" and path.endswith("/models"):
            model = {"id": self.model, "object": "model", "created": CREATED, "owned_by": "llmchat"}
            return Reply.json({"object": "list", "data": [model]})
        return Reply.error(404, "File Not Found", "not_found_error")

    def _completion(self, request: RecordedRequest, *, chat: bool) -> Reply:
        body = request.json()
        field = "messages" if chat else "prompt"
        if not isinstance(body, Mapping) or field not in body:
            return Reply.error(400, f"'{field}' is required", "invalid_request_error")
        pieces = _pieces(self.text, self.chunk_size)
        prompt = _count_words(body[field])
        usage = {
            "prompt_tokens": prompt,
            "completion_tokens": len(pieces),
            "total_tokens": prompt + len(pieces),
        }
        if not body.get("stream"):
            return Reply.json(self._whole(usage, chat=chat))
        if chat:
            options = body.get("stream_options")
            include = isinstance(options, Mapping) and bool(options.get("include_usage"))
            events = self._chat_events(pieces, usage if include else None)
        else:
            events = self._text_events(pieces, usage)
        return Reply.sse(events, delay=self.delay)

    def _head(self, *, chat: bool, chunk: bool) -> dict[str, Any]:
        kind = (
            ("chat.completion.chunk" if chunk else "chat.completion") if chat else "text_completion"
        )
        ident = CHAT_ID if chat else COMPLETION_ID
        return {"id": ident, "object": kind, "created": CREATED, "model": self.model}

    def _whole(self, usage: dict[str, int], *, chat: bool) -> dict[str, Any]:
        choice: dict[str, Any] = {"index": 0}
        if chat:
            choice["message"] = {"role": "assistant", "content": self.text}
        else:
            choice.update(text=self.text, logprobs=None)
        choice["finish_reason"] = self.finish_reason
        reply = {**self._head(chat=chat, chunk=False), "choices": [choice]}
        if self.usage:
            reply["usage"] = usage
        return reply

    def _chat_events(self, pieces: list[str], usage: dict[str, int] | None) -> list[dict[str, Any]]:
        head = self._head(chat=True, chunk=True)

        def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
            return {**head, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

        events = [chunk({"role": "assistant", "content": None})]
        events += [chunk({"content": piece}) for piece in pieces]
        events.append(chunk({}, self.finish_reason))
        if usage is not None and self.usage:
            events.append({**head, "choices": [], "usage": usage})
        return events

    def _text_events(self, pieces: list[str], usage: dict[str, int]) -> list[dict[str, Any]]:
        head = self._head(chat=False, chunk=True)

        def chunk(text: str, finish: str | None = None) -> dict[str, Any]:
            choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": finish}
            return {**head, "choices": [choice]}

        events = [chunk(piece) for piece in pieces]
        events.append(chunk("", self.finish_reason))
        if self.usage:
            events[-1]["usage"] = usage
        return events

    def __repr__(self) -> str:
        return f"ChatResponder({self.text!r}, model={self.model!r}, chunk_size={self.chunk_size})"


def _pieces(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


def _count_words(value: Any) -> int:
    """Count whitespace-separated words in message contents, prompt strings or text parts."""
    if isinstance(value, str):
        return len(value.split())
    if isinstance(value, Mapping):
        if "content" in value:  # a message
            return _count_words(value["content"])
        return _count_words(value.get("text")) if value.get("type") == "text" else 0
    if isinstance(value, list):
        return sum(_count_words(item) for item in value)
    return 0
