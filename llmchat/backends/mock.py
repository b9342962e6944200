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
import threading
from collections import deque
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

from ..errors import InvalidArgumentError, InvalidTypeError
from ..messages import Message, MessageLike, coerce_messages
from ..response import Response
from ..settings import Settings
from ..transport.mock import MockTransport
from ..transport.mock_script import (
    MockRequest,
    MockResponse,
    Pause,
    Step,
)
from ._mock_replies import (
    Reply,
    completion,
    error_answer,
    parse_reply,
    reply_dict,
    stream_events,
)
from .openai_common import OpenAICommon, WireRequest
from .options import PositionalOptions

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = ["CALL_HEADER", "MockBackend", "RecordedCall"]

MOCK_API_URL: Final = "http://mock.invalid/v1"
CALL_HEADER: Final = "X-Llmchat-Mock-Call"
"""The request header that ties a request on the wire to its call and reply."""


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
      the wait): ``err`` is the scripted ``err``, else ``"No response headers within …"``;
    - ``connection``: the connection fails before a response: ``err`` is the
      scripted ``err``, else ``"Connection refused"``;
    - ``response``: an in-band error (``{"error": {"message": err}}``) in a
      200 body or as a stream event; ``err`` is kept;
    - ``unknown``: the transport raises ``RuntimeError(err)``
      (``err`` is ``"RuntimeError: <err>"``).

    Unknown keys or bad values raise `ValueError`/`TypeError`
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
        **common: Unpack[PositionalOptions],
    ) -> None:
        if isinstance(replies, (str, bytes, Mapping)):
            raise InvalidTypeError(
                f"replies must be a list of reply dicts, got {type(replies).__name__}"
            )
        for name, value in (("chunk_delay", chunk_delay), ("initial_delay", initial_delay)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
                raise InvalidArgumentError(f"{name} must be a number >= 0, got {value!r}")
        for name, given in (
            ("transport", common.pop("transport", None)),
            ("session", common.pop("session", None)),
        ):
            if given is not None:
                raise InvalidArgumentError(f"MockBackend brings its own transport: drop {name}=")
        parsed = [parse_reply(index, reply) for index, reply in enumerate(replies)]
        self.chunk_delay = float(chunk_delay)
        self.initial_delay = float(initial_delay)
        self._replies: deque[Reply] = deque(parsed)
        self._lock = threading.Lock()
        self._local = threading.local()
        self._tokens = itertools.count(1)
        self._pending: dict[str, tuple[int, Reply | None]] = {}
        self.recorded_calls: list[RecordedCall] = []
        """One `RecordedCall` per call, in call order."""
        common["transport"] = MockTransport(self._handle)
        super().__init__(MOCK_API_URL, model=model, **common)

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
            kwargs["replies"] = [reply_dict(reply) for reply in self._replies]
        kwargs["chunk_delay"] = self.chunk_delay
        kwargs["initial_delay"] = self.initial_delay
        return kwargs

    def probe_server_limits(self) -> dict[str, Any]:
        """A mock has no server: reports a note and never touches the network."""
        return {"source": self.probe_source, "note": "MockBackend has no server"}

    # -- the verbs are the real ones; preparing a request notes the call ----------

    def prepare_chat_request(
        self,
        messages: Iterable[MessageLike],
        tools: Sequence[Mapping[str, Any]] | None = None,
        tool_choice: str | Mapping[str, Any] | None = None,
        settings: Settings | None = None,
        *,
        stream: bool = False,
    ) -> WireRequest:
        """The real chat request; the call is noted for `recorded_calls` when it is sent."""
        method = "chat_completion_stream" if stream else "chat_completion"
        listed = self._note_call(method, messages, tools, tool_choice, settings)
        with self._forgetting_on_error():
            return super().prepare_chat_request(
                messages if listed is None else listed, tools, tool_choice, settings, stream=stream
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
        method = "text_completion_stream" if stream else "text_completion"
        listed = self._note_call(method, messages, settings=settings, continuation=continuation)
        if listed is not None:
            messages = listed
        with self._forgetting_on_error():
            if self.template is not None:
                return super().prepare_text_request(messages, continuation, settings, stream=stream)
            if messages is None:
                raise InvalidTypeError("messages must be a list of messages, got None")
            body = self._get_api_settings(settings)
            if stream:
                body["stream"] = True
                if self.send_include_usage:
                    body["stream_options"] = {"include_usage": True}
            return self._wire_request(self.text_path, body, stream=stream)

    def _note_call(
        self,
        method: str,
        messages: Any,
        tools: Sequence[Mapping[str, Any]] | None = None,
        tool_choice: str | Mapping[str, Any] | None = None,
        settings: Settings | None = None,
        continuation: bool = False,
    ) -> list[Message] | None:
        """Note the call on this thread until its Response is made (`_bind`).

        The messages are listed once, so an iterator is read once; a request
        prepared and never sent is replaced by the next one on this thread.
        """
        listed = coerce_messages(messages) if messages is not None else None
        self._local.call = _Call(method, listed, tools, tool_choice, settings, continuation)
        return listed

    @contextlib.contextmanager
    def _forgetting_on_error(self) -> Iterator[None]:
        """Forget the noted call when preparing its request raises (bad input)."""
        try:
            yield
        except BaseException:
            self._local.call = None
            raise

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
        self._local.call = None

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
            return error_answer(reply, before, body.get("stream") is True)
        if body.get("stream") is True:
            options = body.get("stream_options")
            include_usage = isinstance(options, Mapping) and options.get("include_usage") is True
            events = stream_events(reply, kind, model, number, include_usage)
            return MockResponse.sse(events, delay=self.chunk_delay, before_headers=before)
        return MockResponse.json(completion(reply, kind, model, number), before_headers=before)
