"""MockBackend: a scripted, socket-free backend for tests of code built on llmchat.

    backend = MockBackend([
        {"text": "Hello there."},
        {"tool_calls": [{"id": "c1", "type": "function",
                         "function": {"name": "add", "arguments": '{"a": 1}'}}]},
        {"error_class": "http", "error_status": 503, "err": "overloaded"},
    ])
    r = backend.chat_completion([{"role": "user", "content": "Hi"}])
    assert r.msg == "Hello there."
    assert backend.recorded_calls[0].body["messages"][0]["content"] == "Hi"

Every request goes through the real request pipeline (`prepare_chat_request`,
normalization, settings, hooks), and every reply settles through the real
finish-reason rules; only the network is replaced by the script.
"""

from __future__ import annotations

import re
import threading
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from ..chunk import Chunk
from ..errors import InvalidArgumentError, InvalidTypeError
from ..messages import Message, MessageLike, coerce_messages
from ..response import Response
from ..settings import Settings
from ..tools import ToolCall
from .openai_common import OpenAICommon

__all__ = ["MockBackend", "RecordedCall"]

MOCK_API_URL: Final = "http://mock.invalid/v1"

_REPLY_KEYS: Final = frozenset(
    {"text", "reasoning", "tool_calls", "finish_reason", "usage"}
    | {"error_class", "error_status", "err"}
)
_ERROR_KEYS: Final = frozenset({"error_class", "error_status", "err"})
_ERROR_CLASSES: Final = frozenset({"http", "timeout", "connection", "response", "unknown"})
_TOKEN: Final = re.compile(r"\s*\S+|\s+")


@dataclass(frozen=True, slots=True)
class RecordedCall:
    """What one call to a `MockBackend` received."""

    method: str
    """``chat_completion``, ``chat_completion_stream``, ``text_completion`` or
    ``text_completion_stream``."""
    body: dict[str, Any]
    """The finished request body, after normalization, settings and every hook."""
    messages: list[Message] = field(default_factory=list)
    """The caller's messages as `Message`s (before normalization; see `body`)."""
    tools: list[Mapping[str, Any]] | None = None
    tool_choice: str | Mapping[str, Any] | None = None
    settings: Settings | None = None
    continuation: bool = False


@dataclass(frozen=True, slots=True)
class _Reply:
    text: str = ""
    reasoning: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    finish_reason: str = "stop"
    usage: dict[str, Any] | None = None
    error_class: str | None = None
    error_status: int | None = None
    err: str | None = None


class MockBackend(OpenAICommon):
    """A drop-in backend that answers from a script, with no sockets.

    `replies` is a queue consumed in call order, one reply per completion
    (blocking or streamed, chat or text). Each reply is a dict with any of

    - ``text`` (str), ``reasoning`` (str),
    - ``tool_calls`` (OpenAI-shaped dicts or `ToolCall`s),
    - ``finish_reason`` (default ``"stop"``; ``"tool_calls"`` when tool calls
      are given), ``usage`` (an OpenAI usage dict),

    or an error: ``error_class`` (``http``, ``timeout``, ``connection``,
    ``response``, ``unknown``), ``error_status`` (int), ``err`` (str). Unknown
    keys or bad values raise `ValueError`/`TypeError` at construction.

    When the script runs out, the call is still recorded and its Response
    fails with ``error_class="unknown"`` and
    ``err="MockBackend has no scripted reply for call N"`` (N counts from 1).

    Streams wait `initial_delay` seconds, then emit reasoning then text as
    small token-like chunks, `chunk_delay` seconds apart; tool calls land whole
    on the final chunk, then a usage chunk. `Response.cancel()` stops a stream
    at once. Blocking calls wait `initial_delay` only.

    `recorded_calls` lists a `RecordedCall` per call. Text completions use the
    backend's `template` when one is given; without one the call is recorded
    with a body that has no ``prompt``.
    """

    probe_source = "mock"

    def __init__(
        self,
        replies: Iterable[Mapping[str, Any]] = (),
        chunk_delay: float = 0.0,
        initial_delay: float = 0.0,
        *,
        model: str | None = "mock",
        **common: Any,
    ) -> None:
        if isinstance(replies, (str, bytes, Mapping)):
            raise InvalidTypeError(
                f"replies must be a list of reply dicts, got {type(replies).__name__}"
            )
        for name, value in (("chunk_delay", chunk_delay), ("initial_delay", initial_delay)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
                raise InvalidArgumentError(f"{name} must be a number >= 0, got {value!r}")
        parsed = [_parse_reply(index, reply) for index, reply in enumerate(replies)]
        super().__init__(MOCK_API_URL, model=model, **common)
        self.chunk_delay = float(chunk_delay)
        self.initial_delay = float(initial_delay)
        self._replies: deque[_Reply] = deque(parsed)
        self._lock = threading.Lock()
        self.recorded_calls: list[RecordedCall] = []
        """One `RecordedCall` per call, in call order."""

    @property
    def remaining_replies(self) -> int:
        """How many scripted replies have not been used yet."""
        with self._lock:
            return len(self._replies)

    def _init_kwargs(self) -> dict[str, Any]:
        kwargs = super()._init_kwargs()
        del kwargs["api_url"]
        with self._lock:
            # A clone gets the replies not used yet, in their original form.
            kwargs["replies"] = [_reply_dict(reply) for reply in self._replies]
        kwargs["chunk_delay"] = self.chunk_delay
        kwargs["initial_delay"] = self.initial_delay
        return kwargs

    def probe_server_limits(self) -> dict[str, Any]:
        """A mock has no server: reports a note and never touches the network."""
        return {"source": self.probe_source, "note": "MockBackend has no server"}

    # -- completions --------------------------------------------------------

    def chat_completion(
        self,
        messages: Iterable[MessageLike],
        tools: Sequence[Mapping[str, Any]] | None = None,
        tool_choice: str | Mapping[str, Any] | None = None,
        settings: Settings | None = None,
    ) -> Response:
        return self._mock_chat("chat_completion", messages, tools, tool_choice, settings)

    def text_completion(
        self,
        messages: Iterable[MessageLike],
        continuation: bool = False,
        settings: Settings | None = None,
    ) -> Response:
        return self._mock_text("text_completion", messages, continuation, settings)

    def chat_completion_stream(
        self,
        messages: Iterable[MessageLike],
        tools: Sequence[Mapping[str, Any]] | None = None,
        tool_choice: str | Mapping[str, Any] | None = None,
        settings: Settings | None = None,
    ) -> Response:
        return self._mock_chat("chat_completion_stream", messages, tools, tool_choice, settings)

    def text_completion_stream(
        self,
        messages: Iterable[MessageLike],
        continuation: bool = False,
        settings: Settings | None = None,
    ) -> Response:
        return self._mock_text("text_completion_stream", messages, continuation, settings)

    # -- internals ----------------------------------------------------------

    def _mock_chat(
        self,
        method: str,
        messages: Any,
        tools: Any,
        tool_choice: Any,
        settings: Settings | None,
    ) -> Response:
        """One chat call: the real request pipeline, then a scripted answer."""
        stream = method.endswith("_stream")
        messages = coerce_messages(messages) if messages is not None else messages
        request = self.prepare_chat_request(messages, tools, tool_choice, settings, stream=stream)
        body = request.body
        response = self.make_stream_response(body) if stream else self.make_response(body)
        reply = self._take(method, body, messages, tools, tool_choice, settings, False)
        self._answer(response, reply, stream)
        return response

    def _mock_text(
        self, method: str, messages: Any, continuation: bool, settings: Settings | None
    ) -> Response:
        """One text call: the template's prompt when there is one, then a scripted answer."""
        stream = method.endswith("_stream")
        messages = coerce_messages(messages) if messages is not None else messages
        body = self._text_body(messages, continuation, settings, stream=stream)
        response = self.make_stream_response(body) if stream else self.make_response(body)
        reply = self._take(method, body, messages, None, None, settings, continuation)
        self._answer(response, reply, stream)
        return response

    def _answer(self, response: Response, reply: _Reply, stream: bool) -> None:
        if stream:
            self._start_mock_stream(response, reply)
        else:
            self._answer_blocking(response, reply)

    def _text_body(
        self,
        messages: Any,
        continuation: bool,
        settings: Settings | None,
        *,
        stream: bool,
    ) -> dict[str, Any]:
        if self.template is not None:
            request = self.prepare_text_request(messages, continuation, settings, stream=stream)
            return dict(request.body)
        if messages is None:
            raise InvalidTypeError("messages must be a list of messages, got None")
        body = self._get_api_settings(settings)
        if stream:
            body["stream"] = True
            if self.send_include_usage:
                body["stream_options"] = {"include_usage": True}
        return self._finalize_request_body(body)

    def _take(
        self,
        method: str,
        body: Mapping[str, Any],
        messages: Any,
        tools: Any,
        tool_choice: Any,
        settings: Settings | None,
        continuation: bool,
    ) -> _Reply:
        with self._lock:
            self.recorded_calls.append(
                RecordedCall(
                    method=method,
                    body=dict(body),
                    messages=list(messages),
                    tools=list(tools) if tools is not None else None,
                    tool_choice=tool_choice,
                    settings=settings,
                    continuation=continuation,
                )
            )
            if self._replies:
                return self._replies.popleft()
            number = len(self.recorded_calls)
        return _Reply(
            error_class="unknown", err=f"MockBackend has no scripted reply for call {number}"
        )

    def _model_for(self, response: Response) -> str | None:
        model = (response.request or {}).get("model")
        return model if isinstance(model, str) and model else self.model

    def _answer_blocking(self, response: Response, reply: _Reply) -> None:
        if self.initial_delay > 0:
            threading.Event().wait(self.initial_delay)
        if reply.error_class is not None:
            response._settle(
                error_class=reply.error_class, err=reply.err, error_status=reply.error_status
            )
            return
        model = self._model_for(response)
        self._lift_usage(response, _payload(reply, model))
        response._add_text(reply.text)
        response._add_reasoning(reply.reasoning)
        response.tool_calls = list(reply.tool_calls)
        response.finish_reason = self._decide_finish(response, reply.finish_reason)
        response._add_chunk(
            Chunk(
                content=reply.text,
                is_final=True,
                model=model,
                finish_reason=response.finish_reason,
                tool_calls=list(reply.tool_calls) or None,
                thinking=reply.reasoning or None,
                usage=response.usage,
                cached_tokens=response.cached_tokens,
            )
        )
        self._settle_decided(response, self._on_blocking_complete)

    def _start_mock_stream(self, response: Response, reply: _Reply) -> None:
        stop = threading.Event()
        response._attach_aborter(stop.set)
        threading.Thread(
            target=self._mock_stream_worker,
            args=(response, reply, stop),
            name="llmchat-mock-stream",
            daemon=True,
        ).start()

    def _mock_stream_worker(self, response: Response, reply: _Reply, stop: threading.Event) -> None:
        try:
            self._emit(response, reply, stop)
        finally:
            if not response.is_done:  # a bug in a hook must not leave a Response live
                response._settle(error_class="unknown", err="The mock stream failed")

    def _emit(self, response: Response, reply: _Reply, stop: threading.Event) -> None:
        if stop.wait(self.initial_delay) or response.is_done:
            return
        if reply.error_class is not None:
            response._settle(
                error_class=reply.error_class, err=reply.err, error_status=reply.error_status
            )
            return
        model = self._model_for(response)
        if model is not None:
            response.model = model
        pieces = [("thinking", p) for p in _TOKEN.findall(reply.reasoning)]
        pieces += [("content", p) for p in _TOKEN.findall(reply.text)]
        for kind, piece in pieces:
            if stop.wait(self.chunk_delay):
                return
            with response._cond:  # no text lands after a cancel has settled the Response
                if response.is_done:
                    return
                if kind == "thinking":
                    response._add_reasoning(piece)
                else:
                    response._add_text(piece)
            if kind == "thinking":
                response._add_chunk(Chunk(content="", model=model, thinking=piece))
            else:
                response._add_chunk(Chunk(content=piece, model=model))
        if stop.wait(self.chunk_delay) or response.is_done:
            return
        response.tool_calls.extend(reply.tool_calls)
        response.finish_reason = reply.finish_reason
        response.provider_finish_reason = reply.finish_reason
        response._add_chunk(
            Chunk(
                content="",
                is_final=True,
                model=model,
                finish_reason=reply.finish_reason,
                tool_calls=list(reply.tool_calls) or None,
            )
        )
        if reply.usage is not None:
            self._lift_usage(response, _payload(reply, model))
            response._add_chunk(
                Chunk(
                    content="",
                    model=model,
                    usage=response.usage,
                    cached_tokens=response.cached_tokens,
                )
            )
        if stop.is_set() or response.is_done:
            return
        response.finish_reason = self._decide_finish(response, reply.finish_reason)
        self._settle_decided(response, self._on_stream_complete)


def _payload(reply: _Reply, model: str | None) -> dict[str, Any]:
    payload: dict[str, Any] = {}
    if reply.usage is not None:
        payload["usage"] = reply.usage
    if model is not None:
        payload["model"] = model
    return payload


def _parse_reply(index: int, reply: Any) -> _Reply:
    where = f"replies[{index}]"
    if not isinstance(reply, Mapping):
        raise InvalidTypeError(f"{where} must be a dict, got {type(reply).__name__}")
    unknown = sorted(set(reply) - _REPLY_KEYS, key=str)
    if unknown:
        raise InvalidArgumentError(
            f"{where} has unknown key(s): {', '.join(map(str, unknown))} "
            f"(allowed: {', '.join(sorted(_REPLY_KEYS))})"
        )
    if _ERROR_KEYS & set(reply):
        return _parse_error(where, reply)
    for name in ("text", "reasoning"):
        if not isinstance(reply.get(name, ""), str):
            raise InvalidTypeError(f"{where}.{name} must be a str")
    calls = reply.get("tool_calls") or []
    if isinstance(calls, (str, bytes, Mapping)) or not isinstance(calls, Sequence):
        raise InvalidTypeError(f"{where}.tool_calls must be a list")
    tool_calls: list[ToolCall] = []
    for position, call in enumerate(calls):
        if isinstance(call, ToolCall):
            tool_calls.append(call)
        elif isinstance(call, Mapping):
            tool_calls.append(ToolCall.from_openai(call))
        else:
            raise InvalidTypeError(
                f"{where}.tool_calls[{position}] must be a dict or a ToolCall, "
                f"got {type(call).__name__}"
            )
    finish = reply.get("finish_reason")
    if finish is None:
        finish = "tool_calls" if tool_calls else "stop"
    if not isinstance(finish, str) or not finish:
        raise InvalidTypeError(f"{where}.finish_reason must be a non-empty str")
    usage = reply.get("usage")
    if usage is not None and not isinstance(usage, Mapping):
        raise InvalidTypeError(f"{where}.usage must be a dict")
    return _Reply(
        text=reply.get("text", ""),
        reasoning=reply.get("reasoning", ""),
        tool_calls=tuple(tool_calls),
        finish_reason=finish,
        usage=dict(usage) if usage is not None else None,
    )


def _parse_error(where: str, reply: Mapping[str, Any]) -> _Reply:
    others = sorted(set(reply) - _ERROR_KEYS)
    if others:
        raise InvalidArgumentError(
            f"{where} is an error reply and cannot also have: {', '.join(others)}"
        )
    error_class = reply.get("error_class", "unknown")
    if error_class not in _ERROR_CLASSES:
        raise InvalidArgumentError(
            f"{where}.error_class must be one of {', '.join(sorted(_ERROR_CLASSES))}, "
            f"got {error_class!r}"
        )
    status = reply.get("error_status")
    if status is not None and (isinstance(status, bool) or not isinstance(status, int)):
        raise InvalidTypeError(f"{where}.error_status must be an int or None")
    err = reply.get("err")
    if err is None:
        err = f"HTTP {status}" if status is not None else f"Mock {error_class} error"
    if not isinstance(err, str):
        raise InvalidTypeError(f"{where}.err must be a str")
    return _Reply(error_class=error_class, error_status=status, err=err)


def _reply_dict(reply: _Reply) -> dict[str, Any]:
    if reply.error_class is not None:
        return {
            "error_class": reply.error_class,
            "error_status": reply.error_status,
            "err": reply.err,
        }
    out: dict[str, Any] = {
        "text": reply.text,
        "reasoning": reply.reasoning,
        "tool_calls": list(reply.tool_calls),
        "finish_reason": reply.finish_reason,
    }
    if reply.usage is not None:
        out["usage"] = reply.usage
    return out
