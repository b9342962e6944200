"""OpenAICommon: the backend for any OpenAI-compatible chat server.

Requests are shaped by a pipeline of hooks, posted as exact bytes, and every
outcome lands on a `Response` (remote failures are states, not exceptions).
This module holds the hook list, the constructor and the public verbs; the
hooks' defaults are `_hooks`', and the work is done by `_request` (request
building), `_runners` and `_settle` (the blocking and streamed runners over
`llmchat.pipeline`, which read one `call.Call` per completion, never the
backend) and `llmchat.probe` (side requests).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, ClassVar

from ..dialects.base import Dialect
from ..dialects.openai_chat import OpenAIChat, OpenAIText
from ..messages import (
    Message,
    MessageLike,
    NormalizationMode,
    SystemMessageMode,
    normalize_messages,
)
from ..pipeline.think_tags import ThinkTags
from ..response import Response
from ..settings import Settings
from ..transport import DEFAULT_POOL_SIZE, Exchange, RequestsTransport, Timeouts, Transport
from . import _runners
from ._clone import Cloneable
from ._hooks import Hooks
from ._options import KEEP, check_arguments, server_and_key
from ._request import USER_AGENT, WireRequest, openai_messages

log = logging.getLogger("llmchat")

__all__ = ["KEEP", "USER_AGENT", "OpenAICommon", "WireRequest"]


class OpenAICommon(Cloneable, Hooks):
    """A chat backend for any OpenAI-compatible server.

        backend = OpenAICommon("http://127.0.0.1:8080/v1", model="qwen")
        r = backend.chat_completion([{"role": "user", "content": "Hi"}])
        print(r.msg if r.is_success else r.err)

    Override points, in the order a completion meets them. Each returns a new
    value and never mutates its input; llmchat calls them, user code does not.
    Override one in a subclass: call `super()`, then adjust the returned copy.

    1. `_get_api_settings(settings) -> dict` — gets the per-call `Settings`
       (or None); returns the body members that say how to generate (model,
       samplers, response format). Runs before messages are attached, so it
       must not look at the conversation.
    2. `_chat_route(members, *, stream) -> str` — the path a chat request is
       posted to (default `chat_path`; Gemini's depends on the model).
    3. `_build_chat_body(history, members, tools, tool_choice, *, stream) ->
       dict` — the chat body in the backend's wire dialect, from the
       normalized OpenAI-shaped conversation, those members and the checked
       tools (default: the OpenAI chat body; each dialect backend has its own).
    4. `_finalize_request_body(body) -> dict` — gets the assembled body
       (``messages`` or ``prompt``, tools, stream flags); returns the body to
       send. Build new dicts; never reach back into the caller's messages.
    5. `_encode_request_body(body) -> bytes` — returns the exact bytes posted
       (default `wire_json.encode`). Must not change `body`.
    6. `_get_api_headers() -> dict` — returns the HTTP headers for every
       request (``Authorization`` only when an API key is set).
    7. `make_response(request)` / `make_stream_response(request)` — factories
       for the `Response` of a blocking / streamed call; get the finished body
       and must not change it. Both default to
       ``self.response_class(request, secrets=self._secrets())``: to get a
       Response subclass with provider fields, set `response_class` instead.
    8. `_lift_usage(response, payload)` — copies usage and model from every
       decoded body or stream event onto `response`; must not change `payload`.
    9. `_reconcile_finish_reason(response, reason, request) -> str` — gets the
       provider's finish reason (once per completion) and the sent body;
       returns the reason the Response acts on. If it raises, the provider's
       reason is kept.
    10. `_on_complete(response)` — runs once per successful completion, in
       both modes, before the Response is done (post-call metadata such as a
       cost lookup); never on a failure or a cancel. It may set fields on
       `response`, and must not change `response.request`. An exception here
       fails the Response (``unknown``). The per-mode
       `_on_blocking_complete(response)` / `_on_stream_complete(response)`
       call it by default; override those only to tell the modes apart.

    Static provider differences are class attributes: `dialect` and
    `text_dialect` (the wire decoders, `llmchat.dialects`), `body_builder`
    (the chat body, `llmchat.backends._bodies`), `response_class`,
    `send_include_usage`, `setting_field_names` (see `Settings.to_body`),
    `chat_path`, `text_path`, `probe_source`, `tokenize_route`, `abort_path`,
    `default_api_url` and `api_key_env` (read by the one constructor: a
    backend whose only difference is its server and key needs no `__init__`).
    `_dialect(kind)` builds the decoder of one completion from them. A
    subclass that does add constructor arguments takes the rest as
    ``**common: Unpack[CommonOptions]`` (`llmchat.backends.options`).

    A subclass's own HTTP calls (a probe, OpenRouter's ``GET /generation``)
    use the shared internals listed on `llmchat.probe.SideRequests`
    (`_server_root`, `_probe_json`, `_probe_json_array`, `_request_json`,
    `_decode_json_body`), never `requests`.

    `think_tags=True` (or an ``(open, close)`` pair, or a `ThinkTags`) moves
    text a model writes between ``<think>`` and ``</think>`` from `msg` to
    `reasoning_text`, in both modes and across any chunk split.

    `clone()` needs no override: a subclass's own constructor arguments are
    recorded when it is built (the outermost call, defaults applied) and the
    base's are read back from the backend; override `_init_kwargs()` only for
    an argument whose value changes after construction.
    """

    send_include_usage: ClassVar[bool] = True
    """Send ``stream_options: {"include_usage": true}`` on streams."""
    setting_field_names: ClassVar[Mapping[str, str | None]] = {}
    """Wire names for `Settings` fields that this provider spells differently."""
    chat_path: ClassVar[str] = "/chat/completions"
    text_path: ClassVar[str] = "/completions"
    probe_source: ClassVar[str] = "llama.cpp"
    """The `source` that `probe_server_limits()` reports."""
    tokenize_route: ClassVar[tuple[str, str]] = ("/tokenize", "content")
    """The server's tokenizer: path at the server root and the JSON text field
    (`llmchat.tokens.TokenCounter` uses it when given a backend)."""
    response_class: ClassVar[type[Response]] = Response
    """The `Response` class the default `make_response`/`make_stream_response` build."""
    dialect: ClassVar[type[Dialect]] = OpenAIChat
    """The wire dialect the chat verbs decode (`llmchat.dialects`)."""
    text_dialect: ClassVar[type[Dialect] | None] = OpenAIText
    """The wire dialect of text completions; None when the server has none."""
    abort_path: ClassVar[str | None] = None
    """A route at the server root POSTed (best effort, in the background) after a
    cancel, for servers that keep generating after a hang-up; None: no abort."""
    default_api_url: ClassVar[str | None] = None
    """The `api_url` when none is given; None: the caller must name the server."""
    api_key_env: ClassVar[tuple[str, ...]] = ()
    """Environment variables read, first set wins, for the key when `api_key` is None
    (an empty value counts as unset; a malformed one raises, naming the variable)."""

    def __init__(
        self,
        api_url: str | None = None,
        api_key: str | None = None,
        model: str | None = None,
        settings: Settings | None = None,
        *,
        message_normalization: NormalizationMode = "none",
        folded_system_marker: str = "[System message]\n",
        tool_result_acknowledgement: str = "Understood.",
        system_message_mode: SystemMessageMode = "as-is",
        template: Any = None,
        connect_timeout: float | None = 30.0,
        headers_timeout: float | None = 60.0,
        request_timeout: float | None = 1800.0,
        stream_finish_grace: float | None = 10.0,
        server_probe_timeout: float | None = 3.0,
        reuse_grace: float | None = 1.0,
        max_response_bytes: int | None = 64 * 2**20,
        max_event_bytes: int | None = 8 * 2**20,
        keep_raw: bool = False,
        think_tags: bool | tuple[str, str] | ThinkTags | None = False,
        session: Any = None,
        pool_size: int = DEFAULT_POOL_SIZE,
        transport: Transport | None = None,
    ) -> None:
        api_url, api_key = server_and_key(api_url, api_key, type(self))
        check_arguments(
            api_url=api_url,
            api_key=api_key,
            model=model,
            settings=settings,
            message_normalization=message_normalization,
            folded_system_marker=folded_system_marker,
            tool_result_acknowledgement=tool_result_acknowledgement,
            system_message_mode=system_message_mode,
            max_response_bytes=max_response_bytes,
            max_event_bytes=max_event_bytes,
            keep_raw=keep_raw,
            session=session,
            pool_size=pool_size,
            transport=transport,
        )
        self.api_url = api_url.rstrip("/")
        self._api_key = api_key or None
        self.model = model
        self.settings = settings or Settings()
        self.message_normalization = message_normalization
        self.folded_system_marker = folded_system_marker
        self.tool_result_acknowledgement = tool_result_acknowledgement
        self.system_message_mode = system_message_mode
        self.template = template
        self.timeouts = Timeouts(
            connect=connect_timeout,
            headers=headers_timeout,
            request=request_timeout,
            finish_grace=stream_finish_grace,
            probe=server_probe_timeout,
            reuse_grace=reuse_grace,
        )
        self.max_response_bytes = max_response_bytes
        """Decoded bytes one response body (or one whole stream) may have; None: no limit."""
        self.max_event_bytes = max_event_bytes
        """Bytes one SSE event (or one line being buffered) may have; None: no limit."""
        self.keep_raw = keep_raw
        """Whether streamed Chunks keep their decoded event as `Chunk.raw`."""
        self.think_tags: ThinkTags | None = ThinkTags.of(think_tags)
        """Inline think tags split out of the answer into `thinking`; None when off."""
        self.session = session
        self.pool_size = pool_size
        self.transport = transport
        """The transport given to the constructor, or None for the requests-based one."""
        self._transport: Transport = (
            transport if transport is not None else RequestsTransport(session, pool_size=pool_size)
        )

    # -- identity -----------------------------------------------------------

    @property
    def api_key(self) -> str | None:
        """The API key, or None. It never appears in a repr, log or error."""
        return self._api_key

    def __repr__(self) -> str:
        key = "set" if self._api_key else "none"
        return (
            f"{type(self).__name__}(api_url={self.api_url!r}, model={self.model!r}, api_key={key})"
        )

    # -- messages -----------------------------------------------------------

    def normalized_messages(self, messages: Iterable[MessageLike]) -> list[Message]:
        """Return the conversation as this backend sends it: a fresh list of Messages.

        Applies the backend's `message_normalization` and `system_message_mode`;
        the caller's messages are never modified.
        """
        return normalize_messages(
            messages,
            mode=self.message_normalization,
            folded_system_marker=self.folded_system_marker,
            tool_result_acknowledgement=self.tool_result_acknowledgement,
            system_message_mode=self.system_message_mode,
        )

    def wire_message_hashes(self, messages: Iterable[MessageLike]) -> list[dict[str, Any]]:
        """Return the `messages` member of a chat body: new dicts, normalized."""
        return openai_messages(self.normalized_messages(messages))

    # -- request assembly ---------------------------------------------------

    def prepare_chat_request(
        self,
        messages: Iterable[MessageLike],
        tools: Sequence[Mapping[str, Any]] | None = None,
        tool_choice: str | Mapping[str, Any] | None = None,
        settings: Settings | None = None,
        *,
        stream: bool = False,
    ) -> WireRequest:
        """Return the chat request exactly as it would be posted, without sending it.

        Runs every request hook in order; raises `ValueError`/`TypeError`
        naming the field for bad input.
        """
        return self._chat_request(messages, tools, tool_choice, settings, stream=stream)

    def prepare_text_request(
        self,
        messages: Iterable[MessageLike],
        continuation: bool = False,
        settings: Settings | None = None,
        *,
        stream: bool = False,
    ) -> WireRequest:
        """Return the text-completion request exactly as it would be posted.

        The prompt is `template` rendering `normalized_messages(messages)` (a
        fresh list each time); `continuation=True` leaves the last message open.
        """
        return self._text_request(messages, continuation, settings, stream=stream)

    # -- blocking completions -----------------------------------------------

    def chat_completion(
        self,
        messages: Iterable[MessageLike],
        tools: Sequence[Mapping[str, Any]] | None = None,
        tool_choice: str | Mapping[str, Any] | None = None,
        settings: Settings | None = None,
    ) -> Response:
        """Run one chat completion and return the settled `Response`.

        Bad input raises `ValueError`/`TypeError` before anything is sent;
        every remote failure is a state of the Response (`is_success`,
        `error_class`, `err`), with whatever arrived kept on it.
        """
        request = self.prepare_chat_request(messages, tools, tool_choice, settings)
        return self._run(request, "chat", stream=False)

    def text_completion(
        self,
        messages: Iterable[MessageLike],
        continuation: bool = False,
        settings: Settings | None = None,
    ) -> Response:
        """Render `messages` with the backend's `template`, POST ``/completions``, settle.

        The answer is ``choices[0].text``; the finish-reason rules are the
        chat path's (``length`` is a failure).
        """
        request = self.prepare_text_request(messages, continuation, settings)
        return self._run(request, "text", stream=False)

    def cancel(self, response: Response) -> None:
        """Cancel `response` (the same as `response.cancel()`)."""
        response.cancel()

    # -- the runners (`_runners`) ------------------------------------------

    def _run(self, request: WireRequest, kind: str, *, stream: bool) -> Response:
        """Make the Response of `request` and run it: to its end, or start its reader thread.

        The `Call` is taken after the Response is made (the documented hook order).
        """
        if stream:
            response = self.make_stream_response(request.body)
            _runners.start_stream(self._call(request, kind, stream=True), response)
        else:
            response = self.make_response(request.body)
            _runners.run_blocking(self._call(request, kind, stream=False), response)
        return response

    def _stream_worker(
        self, request: WireRequest, response: Response, exchange: Exchange, kind: str
    ) -> None:
        """The reader thread's body (benchmarks call it in their own thread)."""
        _runners.stream_worker(self._call(request, kind, stream=True), response, exchange)

    # -- streamed completions -----------------------------------------------

    def chat_completion_stream(
        self,
        messages: Iterable[MessageLike],
        tools: Sequence[Mapping[str, Any]] | None = None,
        tool_choice: str | Mapping[str, Any] | None = None,
        settings: Settings | None = None,
    ) -> Response:
        """Start a streamed chat completion and return its live `Response` at once.

        A reader thread owns the exchange and the Response settles on its own,
        even when nobody iterates it. Iterate it for `Chunk`s, `wait()` for
        the end, `cancel()` from any thread; ``with`` cancels on exit if live.

            with backend.chat_completion_stream(messages) as r:
                for text in r.iter_text():
                    print(text, end="", flush=True)
            print(r.is_success, r.err)
        """
        request = self.prepare_chat_request(messages, tools, tool_choice, settings, stream=True)
        return self._run(request, "chat", stream=True)

    def text_completion_stream(
        self,
        messages: Iterable[MessageLike],
        continuation: bool = False,
        settings: Settings | None = None,
    ) -> Response:
        """Start a streamed text completion (``choices[0].text`` deltas); live `Response`.

        Same termination contract and cancellation as `chat_completion_stream`.
        """
        request = self.prepare_text_request(messages, continuation, settings, stream=True)
        return self._run(request, "text", stream=True)

    def close(self) -> None:
        """Close the backend's pooled connections (only a session llmchat created)."""
        if self.session is None:
            self._transport.close()

    def __enter__(self) -> OpenAICommon:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
