"""MockBackend: a scripted backend for tests of code built on llmchat, with no sockets.

    backend = MockBackend([
        {"text": "Hello there."},
        {"tool_calls": [{"id": "c1", "type": "function",
                         "function": {"name": "add", "arguments": '{"a": 1}'}}]},
        {"error_class": "http", "error_status": 503, "err": "overloaded"},
    ])
    r = backend.chat_completion([{"role": "user", "content": "Hi"}])
    assert r.msg == "Hello there."
    assert backend.recorded_calls[0].body["messages"][0]["content"] == "Hi"

It is an ordinary `OpenAICommon` over a `MockTransport`: each scripted reply
is rendered as the bytes a server would send (a ``chat.completion`` or
``text_completion`` body, or an SSE stream of deltas) and read back by the
real parser, settle, cancel and deadline rules. Only the socket is replaced.
"""

from __future__ import annotations

import contextlib
import itertools
import re
import threading
import time
from collections import deque
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from ..errors import ERROR_CLASSES, InvalidArgumentError, InvalidTypeError
from ..messages import Message, MessageLike, coerce_messages
from ..response import Response
from ..settings import Settings
from ..tools import ToolCall
from ..transport.mock import (
    MockRequest,
    MockResponse,
    MockTransport,
    Pause,
    Piece,
    Raise,
    Step,
    TimedOut,
)
from .openai_common import OpenAICommon, WireRequest

__all__ = ["CALL_HEADER", "MockBackend", "RecordedCall"]

MOCK_API_URL: Final = "http://mock.invalid/v1"
CALL_HEADER: Final = "X-Llmchat-Mock-Call"
"""The request header that ties a request on the wire to its call and reply."""

_REPLY_KEYS: Final = frozenset(
    {"text", "reasoning", "tool_calls", "finish_reason", "usage"}
    | {"error_class", "error_status", "err"}
)
_ERROR_KEYS: Final = frozenset({"error_class", "error_status", "err"})
_ERROR_CLASSES: Final = frozenset(ERROR_CLASSES)
_TOKEN: Final = re.compile(r"\s*\S+|\s+")
_ARGUMENT_PIECE: Final = 8
"""Characters of tool-call arguments per streamed fragment."""


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


@dataclass(slots=True)
class _Call:
    """One verb call in progress on the caller's thread."""

    method: str
    messages: list[Message] | None
    tools: Sequence[Mapping[str, Any]] | None = None
    tool_choice: str | Mapping[str, Any] | None = None
    settings: Settings | None = None
    continuation: bool = False
    token: str | None = None


class MockBackend(OpenAICommon):
    """A drop-in backend that answers from a script, over a `MockTransport`.

    `replies` is a queue consumed in call order, one reply per completion
    (blocking or streamed, chat or text). Each reply is a dict with any of

    - ``text`` (str), ``reasoning`` (str),
    - ``tool_calls`` (OpenAI-shaped dicts or `ToolCall`s),
    - ``finish_reason`` (default ``"stop"``; ``"tool_calls"`` when tool calls
      are given), ``usage`` (an OpenAI usage dict),

    or an error, ``error_class`` / ``error_status`` / ``err``, played as the
    failure a server or network would produce, so the real classifier names it:

    - ``http`` (the default when ``error_status`` is given): that status
      (default 500) with a JSON error body whose message is ``err``
      (without ``err``, an empty body: ``err`` is ``"HTTP <status>"``);
    - ``timeout``: no headers within ``headers_timeout`` (at once, without
      the wait): ``err`` is ``"No response headers within …"``;
    - ``connection``: the connection is refused (``"Connection refused"``);
    - ``response``: an in-band error (``{"error": {"message": err}}``) in a
      200 body or as a stream event; ``err`` is kept;
    - ``unknown``: the transport raises ``RuntimeError(err)``
      (``err`` is ``"RuntimeError: <err>"``).

    A scripted ``err`` for ``timeout`` or ``connection`` is not on the wire
    and is ignored. Unknown keys or bad values raise `ValueError`/`TypeError`
    at construction.

    When the script runs out, the call is still recorded and the mock server
    answers HTTP 500 ``MockBackend has no scripted reply for call N`` (N
    counts from 1), as `llmchat.testing.ScriptedServer` does.

    Every reply waits `initial_delay` before its headers (the prefill); a
    stream sends reasoning then text as small token-like deltas, `chunk_delay`
    seconds apart, then tool calls as fragments, the finish chunk, a usage
    event (when the request asked for ``stream_options.include_usage``;
    otherwise usage rides on the finish chunk) and ``[DONE]``. Both delays
    count against ``headers_timeout`` like a real server's silences.
    `Response.cancel()` stops a stream at once, in the delay too.

    `recorded_calls` lists a `RecordedCall` per call; `transport.requests`
    has the requests as they went on the wire. Text completions use the
    backend's `template` when one is given; without one the body has no
    ``prompt``.
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
        for name in ("transport", "session"):
            if common.get(name) is not None:
                raise InvalidArgumentError(f"MockBackend brings its own transport: drop {name}=")
            common.pop(name, None)
        parsed = [_parse_reply(index, reply) for index, reply in enumerate(replies)]
        self.chunk_delay = float(chunk_delay)
        self.initial_delay = float(initial_delay)
        self._replies: deque[_Reply] = deque(parsed)
        self._lock = threading.Lock()
        self._local = threading.local()
        self._tokens = itertools.count(1)
        self._pending: dict[str, tuple[int, _Reply | None]] = {}
        self.recorded_calls: list[RecordedCall] = []
        """One `RecordedCall` per call, in call order."""
        super().__init__(MOCK_API_URL, model=model, transport=MockTransport(self._handle), **common)

    @property
    def remaining_replies(self) -> int:
        """How many scripted replies have not been used yet."""
        with self._lock:
            return len(self._replies)

    def _init_kwargs(self) -> dict[str, Any]:
        kwargs = super()._init_kwargs()
        for name in ("api_url", "transport", "session"):
            del kwargs[name]  # a clone has its own MockTransport
        with self._lock:
            # A clone gets the replies not used yet, in their original form.
            kwargs["replies"] = [_reply_dict(reply) for reply in self._replies]
        kwargs["chunk_delay"] = self.chunk_delay
        kwargs["initial_delay"] = self.initial_delay
        return kwargs

    def probe_server_limits(self) -> dict[str, Any]:
        """A mock has no server: reports a note and never touches the network."""
        return {"source": self.probe_source, "note": "MockBackend has no server"}

    # -- the verbs: the real ones, with the call noted for `recorded_calls` -----

    def chat_completion(
        self,
        messages: Iterable[MessageLike],
        tools: Sequence[Mapping[str, Any]] | None = None,
        tool_choice: str | Mapping[str, Any] | None = None,
        settings: Settings | None = None,
    ) -> Response:
        with self._calling("chat_completion", messages, tools, tool_choice, settings) as listed:
            return super().chat_completion(
                messages if listed is None else listed, tools, tool_choice, settings
            )

    def chat_completion_stream(
        self,
        messages: Iterable[MessageLike],
        tools: Sequence[Mapping[str, Any]] | None = None,
        tool_choice: str | Mapping[str, Any] | None = None,
        settings: Settings | None = None,
    ) -> Response:
        with self._calling(
            "chat_completion_stream", messages, tools, tool_choice, settings
        ) as listed:
            return super().chat_completion_stream(
                messages if listed is None else listed, tools, tool_choice, settings
            )

    def text_completion(
        self,
        messages: Iterable[MessageLike],
        continuation: bool = False,
        settings: Settings | None = None,
    ) -> Response:
        with self._calling(
            "text_completion", messages, settings=settings, continuation=continuation
        ) as listed:
            return super().text_completion(
                messages if listed is None else listed, continuation, settings
            )

    def text_completion_stream(
        self,
        messages: Iterable[MessageLike],
        continuation: bool = False,
        settings: Settings | None = None,
    ) -> Response:
        with self._calling(
            "text_completion_stream", messages, settings=settings, continuation=continuation
        ) as listed:
            return super().text_completion_stream(
                messages if listed is None else listed, continuation, settings
            )

    def prepare_text_request(
        self,
        messages: Iterable[MessageLike],
        continuation: bool = False,
        settings: Settings | None = None,
        *,
        stream: bool = False,
    ) -> WireRequest:
        """The real text request with a `template`; without one, a body with no ``prompt``."""
        if self.template is not None:
            return super().prepare_text_request(messages, continuation, settings, stream=stream)
        if messages is None:
            raise InvalidTypeError("messages must be a list of messages, got None")
        coerce_messages(messages)
        body = self._get_api_settings(settings)
        if stream:
            body["stream"] = True
            if self.send_include_usage:
                body["stream_options"] = {"include_usage": True}
        return self._wire_request(self.text_path, body, stream=stream)

    @contextlib.contextmanager
    def _calling(
        self,
        method: str,
        messages: Any,
        tools: Sequence[Mapping[str, Any]] | None = None,
        tool_choice: str | Mapping[str, Any] | None = None,
        settings: Settings | None = None,
        continuation: bool = False,
    ) -> Iterator[list[Message] | None]:
        """Note the call on this thread while the real verb prepares and starts it."""
        listed = coerce_messages(messages) if messages is not None else None
        outer = getattr(self._local, "call", None)
        self._local.call = _Call(method, listed, tools, tool_choice, settings, continuation)
        try:
            yield listed
        finally:
            self._local.call = outer

    def _get_api_headers(self) -> dict[str, str]:
        headers = super()._get_api_headers()
        call: _Call | None = getattr(self._local, "call", None)
        if call is not None:
            call.token = str(next(self._tokens))
            headers[CALL_HEADER] = call.token
        return headers

    def make_response(self, request: Mapping[str, Any]) -> Response:
        response = super().make_response(request)
        self._bind(request)
        return response

    def make_stream_response(self, request: Mapping[str, Any]) -> Response:
        response = super().make_stream_response(request)
        self._bind(request)
        return response

    def _bind(self, body: Mapping[str, Any]) -> None:
        """The request is valid and about to be sent: record the call, take its reply."""
        call: _Call | None = getattr(self._local, "call", None)
        if call is None or call.token is None:
            return
        with self._lock:
            self.recorded_calls.append(
                RecordedCall(
                    method=call.method,
                    body=dict(body),
                    messages=list(call.messages or ()),
                    tools=list(call.tools) if call.tools is not None else None,
                    tool_choice=call.tool_choice,
                    settings=call.settings,
                    continuation=call.continuation,
                )
            )
            reply = self._replies.popleft() if self._replies else None
            self._pending[call.token] = (len(self.recorded_calls), reply)
        call.token = None

    # -- the mock server ------------------------------------------------------

    def _handle(self, request: MockRequest) -> MockResponse:
        """The MockTransport's handler: the scripted reply of this request, as wire bytes."""
        token = request.headers.get(CALL_HEADER)
        with self._lock:
            entry = self._pending.pop(token, None) if token else None
        if entry is None:
            return MockResponse.error(
                404, f"MockBackend did not expect {request.method} {request.path}"
            )
        number, reply = entry
        before: list[Step] = [Pause(self.initial_delay)] if self.initial_delay > 0 else []
        if reply is None:
            return MockResponse.error(
                500, f"MockBackend has no scripted reply for call {number}", before_headers=before
            )
        body = request.json if isinstance(request.json, Mapping) else {}
        model = body.get("model")
        if not isinstance(model, str) or not model:
            model = self.model
        kind = "chat" if request.path.endswith(self.chat_path) else "text"
        if reply.error_class is not None:
            return _error_answer(reply, before, body.get("stream") is True)
        if body.get("stream") is True:
            options = body.get("stream_options")
            include_usage = isinstance(options, Mapping) and options.get("include_usage") is True
            events = _stream_events(reply, kind, model, number, include_usage)
            return MockResponse.sse(events, delay=self.chunk_delay, before_headers=before)
        return MockResponse.json(_completion(reply, kind, model, number), before_headers=before)


def _error_answer(reply: _Reply, before: list[Step], stream: bool) -> MockResponse:
    if reply.error_class == "http":
        status = reply.error_status if reply.error_status is not None else 500
        if reply.err is None:
            return MockResponse(status, before_headers=before)
        return MockResponse.error(status, reply.err, before_headers=before)
    if reply.error_class == "timeout":
        return MockResponse(before_headers=[*before, TimedOut()])
    if reply.error_class == "connection":
        refused = ConnectionRefusedError(111, "Connection refused")
        return MockResponse(before_headers=[*before, Raise(refused)])
    if reply.error_class == "response":
        error = {"error": {"message": reply.err or "Mock response error", "type": "server_error"}}
        if stream:
            return MockResponse.sse([error], done=False, before_headers=before)
        return MockResponse.json(error, before_headers=before)
    failure = RuntimeError(reply.err or "Mock unknown error")
    return MockResponse(before_headers=[*before, Raise(failure)])


def _wire_call(call: ToolCall) -> dict[str, Any]:
    """A tool call as it goes on the wire; arguments as text only when they came as text."""
    entry = call.to_openai()
    if call.arguments_json is None:
        entry["function"]["arguments"] = dict(call.arguments)
    return entry


def _head(kind: str, model: str | None, number: int, *, chunk: bool) -> dict[str, Any]:
    if kind == "chat":
        prefix, obj = "chatcmpl-mock", "chat.completion.chunk" if chunk else "chat.completion"
    else:
        prefix, obj = "cmpl-mock", "text_completion"
    head: dict[str, Any] = {"id": f"{prefix}-{number}", "object": obj, "created": int(time.time())}
    if model is not None:
        head["model"] = model
    return head


def _completion(reply: _Reply, kind: str, model: str | None, number: int) -> dict[str, Any]:
    """A blocking ``chat.completion`` or ``text_completion`` body."""
    choice: dict[str, Any] = {"index": 0}
    if kind == "chat":
        message: dict[str, Any] = {"role": "assistant"}
        message["content"] = reply.text if reply.text or not reply.tool_calls else None
        if reply.reasoning:
            message["reasoning_content"] = reply.reasoning
        if reply.tool_calls:
            message["tool_calls"] = [_wire_call(call) for call in reply.tool_calls]
        choice["message"] = message
    else:
        choice["text"] = reply.text
    choice["finish_reason"] = reply.finish_reason
    payload = _head(kind, model, number, chunk=False)
    payload["choices"] = [choice]
    if reply.usage is not None:
        payload["usage"] = reply.usage
    return payload


def _stream_events(
    reply: _Reply, kind: str, model: str | None, number: int, include_usage: bool
) -> list[Mapping[str, Any] | Piece]:
    """The SSE events of a streamed reply, in the order a server sends them."""
    head = _head(kind, model, number, chunk=True)

    def event(choice: dict[str, Any], **extra: Any) -> dict[str, Any]:
        return {**head, "choices": [{"index": 0, **choice}], **extra}

    events: list[Mapping[str, Any] | Piece] = []
    if kind == "chat":
        first = True
        for name, text in (("reasoning_content", reply.reasoning), ("content", reply.text)):
            for piece in _TOKEN.findall(text):
                delta = {"role": "assistant", name: piece} if first else {name: piece}
                first = False
                events.append(event({"delta": delta, "finish_reason": None}))
        for index, call in enumerate(reply.tool_calls):
            for fragment in _fragments(index, call):
                events.append(event({"delta": {"tool_calls": [fragment]}, "finish_reason": None}))
        finish = event({"delta": {}, "finish_reason": reply.finish_reason})
    else:
        for piece in _TOKEN.findall(reply.text):
            events.append(event({"text": piece, "finish_reason": None}))
        finish = event({"text": "", "finish_reason": reply.finish_reason})
    if reply.usage is not None and not include_usage:
        finish["usage"] = reply.usage  # a server not asked for the usage event
    events.append(finish)
    if reply.usage is not None and include_usage:
        events.append({**head, "choices": [], "usage": reply.usage})
    return events


def _fragments(index: int, call: ToolCall) -> list[dict[str, Any]]:
    """One tool call as streamed fragments: id and name first, then the arguments in pieces."""
    start: dict[str, Any] = {"index": index, "id": call.id, "type": call.type}
    text = call.arguments_json
    if text is None:  # arguments as an object, whole, as some servers send them
        start["function"] = {"name": call.name, "arguments": dict(call.arguments)}
        return [start]
    start["function"] = {"name": call.name, "arguments": ""}
    pieces = [text[i : i + _ARGUMENT_PIECE] for i in range(0, len(text), _ARGUMENT_PIECE)]
    return [start] + [{"index": index, "function": {"arguments": piece}} for piece in pieces]


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
    status = reply.get("error_status")
    if status is not None and (isinstance(status, bool) or not isinstance(status, int)):
        raise InvalidTypeError(f"{where}.error_status must be an int or None")
    if status is not None and not 400 <= status <= 599:
        raise InvalidArgumentError(f"{where}.error_status must be an HTTP error status (400-599)")
    error_class = reply.get("error_class")
    if error_class is None:
        error_class = "http" if status is not None else "unknown"
    if error_class not in _ERROR_CLASSES:
        raise InvalidArgumentError(
            f"{where}.error_class must be one of {', '.join(sorted(_ERROR_CLASSES))}, "
            f"got {error_class!r}"
        )
    if status is not None and error_class != "http":
        raise InvalidArgumentError(
            f"{where}.error_status goes with error_class 'http' only, got {error_class!r}"
        )
    err = reply.get("err")
    if err is not None and not isinstance(err, str):
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
