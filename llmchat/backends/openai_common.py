"""OpenAICommon: the backend for any OpenAI-compatible chat server.

Requests are shaped by a pipeline of hooks, posted as exact bytes, and every
outcome lands on a `Response` (remote failures are states, not exceptions).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Final

import requests

from .. import wire_json
from .._version import __version__
from ..chunk import Chunk
from ..completion import (
    ErrorBody,
    error_message,
    json_error_message,
    judge_finish,
    parse_completion,
    usage_fields,
)
from ..errors import InvalidArgumentError, InvalidTypeError
from ..messages import Message, MessageLike, coerce_messages, normalize_messages
from ..redact import Redactor, check_secret
from ..response import Response
from ..settings import Settings
from ..sse import EventTooLarge, SSEDecoder, SSEEvent
from ..stream_parser import StreamParser
from ..transport import (
    DEFAULT_POOL_SIZE,
    BodyTooLarge,
    Exchange,
    RequestsTransport,
    Timeouts,
    Transport,
    TransportResponse,
    classify_exception,
    decode_body,
    parse_json,
    redact_headers,
)
from ..urls import join_url, server_root
from ..wirelog import WireLog
from . import _clone

log = logging.getLogger("llmchat")

__all__ = ["OpenAICommon", "WireRequest"]


class _Keep:
    """Sentinel for `clone()`: keep the backend's value (distinct from None)."""

    def __repr__(self) -> str:
        return "KEEP"


KEEP: Final = _Keep()


@dataclass(frozen=True, slots=True)
class WireRequest:
    """One request exactly as it would go on the wire.

    `body` is the finished body after every hook; `data` are the bytes posted.
    The repr redacts credentials, so a WireRequest is safe to log.
    """

    method: str
    url: str
    headers: Mapping[str, str] = field(repr=False)
    body: Mapping[str, Any] = field(repr=False)
    data: bytes = field(repr=False)

    def __repr__(self) -> str:
        return (
            f"WireRequest({self.method} {self.url}, headers={redact_headers(self.headers)}, "
            f"{len(self.data)} bytes)"
        )


class OpenAICommon:
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
    2. `_finalize_request_body(body) -> dict` — gets the assembled body
       (``messages`` or ``prompt``, tools, stream flags); returns the body to
       send. Build new dicts; never reach back into the caller's messages.
    3. `_encode_request_body(body) -> bytes` — returns the exact bytes posted
       (default `wire_json.encode`). Must not change `body`.
    4. `_get_api_headers() -> dict` — returns the HTTP headers for every
       request (``Authorization`` only when an API key is set).
    5. `make_response(request)` / `make_stream_response(request)` — factories
       for the `Response` of a blocking / streamed call; get the finished body
       and must not change it. Both default to
       ``self.response_class(request, secrets=self._secrets())``: to get a
       Response subclass with provider fields, set `response_class` instead.
    6. `_lift_usage(response, payload)` — copies usage and model from every
       decoded body or stream event onto `response`; must not change `payload`.
    7. `_reconcile_finish_reason(response, reason, request) -> str` — gets the
       provider's finish reason (once per completion) and the sent body;
       returns the reason the Response acts on. If it raises, the provider's
       reason is kept.
    8. `_on_complete(response)` — runs once per successful completion, in
       both modes, before the Response is done (post-call metadata such as a
       cost lookup); never on a failure or a cancel. It may set fields on
       `response`, and must not change `response.request`. An exception here
       fails the Response (``unknown``). The per-mode
       `_on_blocking_complete(response)` / `_on_stream_complete(response)`
       call it by default; override those only to tell the modes apart.

    Static provider differences are class attributes: `response_class`,
    `send_include_usage`, `setting_field_names` (see `Settings.to_body`),
    `chat_path`, `text_path`, `probe_source`, `tokenize_route`, `abort_path`.

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
    abort_path: ClassVar[str | None] = None
    """A route at the server root POSTed (best effort, in the background) after a
    cancel, for servers that keep generating after a hang-up; None: no abort."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """Wrap a subclass's own `__init__` so that `clone()` can rebuild it."""
        super().__init_subclass__(**kwargs)
        init = cls.__dict__.get("__init__")
        if init is not None:
            cls.__init__ = _clone.recording(init)  # type: ignore[method-assign]

    def __init__(
        self,
        api_url: str,
        api_key: str | None = None,
        model: str | None = None,
        settings: Settings | None = None,
        *,
        message_normalization: str = "none",
        folded_system_marker: str = "[System message]\n",
        tool_result_acknowledgement: str = "Understood.",
        system_message_mode: str = "as-is",
        template: Any = None,
        connect_timeout: float | None = 30.0,
        headers_timeout: float | None = 60.0,
        request_timeout: float | None = 1800.0,
        stream_finish_grace: float | None = 10.0,
        server_probe_timeout: float | None = 3.0,
        max_response_bytes: int | None = 64 * 2**20,
        max_event_bytes: int | None = 8 * 2**20,
        keep_raw: bool = False,
        session: Any = None,
        pool_size: int = DEFAULT_POOL_SIZE,
        transport: Transport | None = None,
    ) -> None:
        if not isinstance(api_url, str) or not api_url.strip():
            raise InvalidArgumentError(f"api_url must be a non-empty URL string, got {api_url!r}")
        if not api_url.startswith(("http://", "https://")):
            raise InvalidArgumentError(f"api_url must start with http:// or https://: {api_url!r}")
        check_secret("api_key", api_key)
        if model is not None and not isinstance(model, str):
            raise InvalidTypeError(f"model must be a str or None, got {type(model).__name__}")
        if session is not None and not isinstance(session, requests.Session):
            raise InvalidTypeError(
                f"session must be a requests.Session or None, got {type(session).__name__}"
            )
        _check_count("pool_size", pool_size, "connections", none_ok=False)
        _check_count("max_response_bytes", max_response_bytes, "bytes")
        _check_count("max_event_bytes", max_event_bytes, "bytes")
        if not isinstance(keep_raw, bool):
            raise InvalidTypeError(f"keep_raw must be a bool, got {type(keep_raw).__name__}")
        if transport is not None and not isinstance(transport, Transport):
            raise InvalidTypeError(
                f"transport must be a llmchat.transport.Transport or None, "
                f"got {type(transport).__name__}"
            )
        if transport is not None and session is not None:
            raise InvalidArgumentError("pass session or transport, not both")
        if settings is not None and not isinstance(settings, Settings):
            raise InvalidTypeError(
                f"settings must be a llmchat.Settings or None, got {type(settings).__name__}"
            )
        # Checked now, with the messages left empty, so a bad option fails at
        # construction rather than on the first request.
        normalize_messages(
            [],
            mode=message_normalization,  # type: ignore[arg-type]
            folded_system_marker=folded_system_marker,
            tool_result_acknowledgement=tool_result_acknowledgement,
            system_message_mode=system_message_mode,  # type: ignore[arg-type]
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
        )
        self.max_response_bytes = max_response_bytes
        """Decoded bytes one response body (or one whole stream) may have; None: no limit."""
        self.max_event_bytes = max_event_bytes
        """Bytes one SSE event (or one line being buffered) may have; None: no limit."""
        self.keep_raw = keep_raw
        """Whether streamed Chunks keep their decoded event as `Chunk.raw`."""
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

    def _init_kwargs(self) -> dict[str, Any]:
        """Return the constructor arguments that rebuild this backend, as a new dict.

        The subclass's own arguments as recorded when it was built, then the
        base's read back from the backend (so a changed `model` or `settings`
        is kept); only names the constructor accepts. `clone()` starts from
        this. llmchat calls this; user code does not; override it in a
        subclass only for an argument whose value changes after construction
        (call `super()`, then adjust the copy).
        """
        kwargs = {**_clone.recorded_args(self), **self._base_init_kwargs()}
        accepted = _clone.accepted_names(type(self))
        return kwargs if accepted is None else {k: v for k, v in kwargs.items() if k in accepted}

    def _base_init_kwargs(self) -> dict[str, Any]:
        timeouts = self.timeouts
        return {
            "api_url": self.api_url,
            "api_key": self._api_key,
            "model": self.model,
            "settings": self.settings,
            "message_normalization": self.message_normalization,
            "folded_system_marker": self.folded_system_marker,
            "tool_result_acknowledgement": self.tool_result_acknowledgement,
            "system_message_mode": self.system_message_mode,
            "template": self.template,
            "connect_timeout": timeouts.connect,
            "headers_timeout": timeouts.headers,
            "request_timeout": timeouts.request,
            "stream_finish_grace": timeouts.finish_grace,
            "server_probe_timeout": timeouts.probe,
            "max_response_bytes": self.max_response_bytes,
            "max_event_bytes": self.max_event_bytes,
            "keep_raw": self.keep_raw,
            "session": self.session,
            "pool_size": self.pool_size,
            "transport": self.transport,
        }

    def clone(self, **changes: Any) -> OpenAICommon:
        """Return a new backend like this one, with `changes` applied.

        Every constructor argument may be changed, a subclass's own ones
        too; one not named (or given as `KEEP`) is kept. Passing `None` sets
        that argument to None (for a timeout: no limit); an unknown name
        raises `TypeError`.
        """
        kwargs = self._init_kwargs()
        unknown = sorted(set(changes) - set(kwargs))
        if unknown:
            raise InvalidTypeError(f"clone() got unknown argument(s): {', '.join(unknown)}")
        kwargs.update({k: v for k, v in changes.items() if v is not KEEP})
        return type(self)(**kwargs)

    # -- messages -----------------------------------------------------------

    def normalized_messages(self, messages: Iterable[MessageLike]) -> list[Message]:
        """Return the conversation as this backend sends it: a fresh list of Messages.

        Applies the backend's `message_normalization` and `system_message_mode`;
        the caller's messages are never modified.
        """
        return normalize_messages(
            messages,
            mode=self.message_normalization,  # type: ignore[arg-type]
            folded_system_marker=self.folded_system_marker,
            tool_result_acknowledgement=self.tool_result_acknowledgement,
            system_message_mode=self.system_message_mode,  # type: ignore[arg-type]
        )

    def wire_message_hashes(self, messages: Iterable[MessageLike]) -> list[dict[str, Any]]:
        """Return the `messages` member of a chat body: new dicts, normalized."""
        return [message.to_dict() for message in self.normalized_messages(messages)]

    # -- hooks --------------------------------------------------------------

    def _get_api_settings(self, settings: Settings | None) -> dict[str, Any]:
        """Return the body members that say how to generate, as a new dict.

        Gets the per-call `settings` (None for none); the backend's own
        settings are merged under them. llmchat calls this; user code does
        not; override it in a subclass (call `super()`, then adjust the copy).
        """
        body = self.settings.merged(settings).to_body(self.setting_field_names)
        if self.model is not None:
            body.setdefault("model", self.model)
        return body

    def _get_api_headers(self) -> dict[str, str]:
        """Return the HTTP headers for every request, as a new dict.

        llmchat calls this; user code does not; override it in a subclass.
        """
        headers = {"Content-Type": "application/json", "User-Agent": USER_AGENT}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        return headers

    def _finalize_request_body(self, body: dict[str, Any]) -> dict[str, Any]:
        """Return the body to send, given the assembled one; default: unchanged.

        Called on every completion path just before encoding. Return a new
        dict rather than editing `body`; a chat body has ``messages``, a text
        body ``prompt``. llmchat calls this; user code does not; override it
        in a subclass.
        """
        return body

    def _encode_request_body(self, body: Mapping[str, Any]) -> bytes:
        """Return the exact bytes to post for `body` (default: `wire_json.encode`).

        llmchat calls this; user code does not; override it in a subclass.
        """
        return wire_json.encode(body)

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
        body = self._get_api_settings(settings)
        body["messages"] = self.wire_message_hashes(_message_list(messages))
        if tools is not None:
            body["tools"] = _checked_tools(tools)
        if tool_choice is not None:
            if not isinstance(tool_choice, (str, Mapping)):
                raise InvalidTypeError("tool_choice must be a str, a mapping or None")
            body["tool_choice"] = tool_choice
        if stream:  # a blocking body omits it: false is the API's default
            body["stream"] = True
            if self.send_include_usage:
                body["stream_options"] = {"include_usage": True}
        return self._wire_request(self.chat_path, body, stream=stream)

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
        if self.template is None:
            raise InvalidArgumentError(
                "text completions need a prompt template: pass template=… to the backend "
                "(e.g. llmchat.templates.ChatML())"
            )
        body = self._get_api_settings(settings)
        body["prompt"] = self.template.render(
            self.normalized_messages(_message_list(messages)), continuation=continuation
        )
        if stream:
            body["stream"] = True
            if self.send_include_usage:
                body["stream_options"] = {"include_usage": True}
        return self._wire_request(self.text_path, body, stream=stream)

    def _wire_request(self, path: str, body: dict[str, Any], *, stream: bool) -> WireRequest:
        body = self._finalize_request_body(body)
        data = self._encode_request_body(body)
        headers = self._get_api_headers()
        if stream and not any(name.lower() == "accept-encoding" for name in headers):
            # A compressed token stream saves little and makes intermediaries buffer;
            # the reader still decodes whatever a server sends. A hook's own header wins.
            headers["Accept-Encoding"] = "identity"
        return WireRequest(
            method="POST",
            url=join_url(self.api_url, path),
            headers=headers,
            body=body,
            data=data,
        )

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
        response = self.make_response(request.body)
        self._run_blocking(request, response, kind="chat")
        return response

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
        response = self.make_response(request.body)
        self._run_blocking(request, response, kind="text")
        return response

    def cancel(self, response: Response) -> None:
        """Cancel `response` (the same as `response.cancel()`)."""
        response.cancel()

    def make_response(self, request: Mapping[str, Any]) -> Response:
        """Return a new `Response` for a blocking call with the finished body `request`.

        Default: ``self.response_class(request, secrets=self._secrets())``,
        whose cancel also posts `abort_path` when it is set. Must not change
        `request`. llmchat calls this; user code does not; to get a Response
        subclass, set the class attribute `response_class` rather than
        overriding this (or call `super()` and adjust what it returns).
        """
        return self._with_abort(self.response_class(request, secrets=self._secrets()))

    def make_stream_response(self, request: Mapping[str, Any]) -> Response:
        """Return a new `Response` for a streamed call with the finished body `request`.

        The same default and rules as `make_response`. llmchat calls this;
        user code does not; override it in a subclass.
        """
        return self._with_abort(self.response_class(request, secrets=self._secrets()))

    def _with_abort(self, response: Response) -> Response:
        """`response`, whose cancel also posts `abort_path` in the background (when set)."""
        if self.abort_path is not None:
            response._add_cancel_hook(
                lambda: threading.Thread(
                    target=self._post_abort, name="llmchat-abort", daemon=True
                ).start()
            )
        return response

    def _post_abort(self) -> None:
        """Best effort: tell the server to stop generating; errors are logged, never raised."""
        path = self.abort_path or ""
        try:
            _, note = self._request_json(
                "POST", self._url(path, at_root=True), b"{}", label=f"POST {path}"
            )
        except Exception as exc:  # a headers hook; its text could quote the key
            log.debug("%s abort failed: %s", type(self).__name__, self._redactor().exception(exc))
            return
        if note is not None:
            log.debug("%s abort: %s", type(self).__name__, note)

    def _secrets(self) -> tuple[str, ...]:
        """The credentials to keep out of every error, log line and relayed body.

        llmchat calls this; user code does not; override it in a subclass that
        sends a credential of its own (call `super()`, then add to the tuple).
        """
        return (self._api_key,) if self._api_key else ()

    def _redactor(self) -> Redactor:
        """The `Redactor` for `_secrets()` (built once per distinct set, then cached)."""
        return Redactor.of(self._secrets())

    def _lift_usage(self, response: Response, payload: Mapping[str, Any]) -> None:
        """Copy usage counts and the model from `payload` onto `response`.

        Absent counts stay None; 0 stays 0. Must not change `payload`.
        llmchat calls this; user code does not; override it in a subclass.
        """
        for name, value in usage_fields(payload).items():
            setattr(response, name, value)

    def _reconcile_finish_reason(
        self, response: Response, reason: str, request: Mapping[str, Any]
    ) -> str:
        """Return the finish reason `response` should act on; default: `reason`.

        Sees every provider finish reason once (on a stream, at the settle
        point, after the usage frame). May set `response.finish_reason_evidence`.
        If it raises, the provider's reason is kept. llmchat calls this; user
        code does not; override it in a subclass.
        """
        return reason

    def _on_complete(self, response: Response) -> None:
        """Run once after a successful completion (blocking or streamed), before it is done.

        Never runs on a failure or a cancel. May set fields on `response`
        (post-call metadata); must not change `response.request`. An
        exception fails the Response (``unknown``). Default: nothing.
        llmchat calls this; user code does not; override it in a subclass
        (call `super()` first).
        """

    def _on_blocking_complete(self, response: Response) -> None:
        """Run after a successful blocking completion, before it is done.

        Default: `_on_complete(response)`; override that one unless the modes
        must differ. llmchat calls this; user code does not; override it in
        a subclass (call `super()` to keep `_on_complete`).
        """
        self._on_complete(response)

    def _on_stream_complete(self, response: Response) -> None:
        """Run after a successful stream ends, before it is done.

        Default: `_on_complete(response)`; override that one unless the modes
        must differ. llmchat calls this; user code does not; override it in
        a subclass (call `super()` to keep `_on_complete`).
        """
        self._on_complete(response)

    def _run_blocking(self, request: WireRequest, response: Response, *, kind: str) -> None:
        exchange = Exchange()
        exchange.arm_deadline(self.timeouts.request)
        response._attach_aborter(lambda: exchange.abort("cancel"))
        wirelog = WireLog(self._secrets())
        wirelog.request(request.method, request.url, request.headers, request.data)
        http = None
        try:
            http = self._open(request, exchange)
            wirelog.response(http.status_code, http.headers)
            response.retry_after = http.headers.get("Retry-After")
            response._content_type = http.headers.get("Content-Type")
            data = self._read_all(http, wirelog, self.max_response_bytes)
        except Exception as exc:
            if exchange.aborted != "cancel":
                error_class, message = classify_exception(
                    exc, exchange=exchange, after_headers=http is not None, timeouts=self.timeouts
                )
                response._settle(error_class=error_class, err=message)
            wirelog.end(f"failed: {response.err}")
            return
        finally:
            exchange.finish()
            if http is not None:
                http.close()
        self._complete_blocking(response, http.status_code, data, kind)
        wirelog.end("ok" if response.is_success else f"failed: {response.err}")

    def _open(self, request: WireRequest, exchange: Exchange) -> TransportResponse:
        """Send `request` on `exchange` with the backend's connect and headers timeouts."""
        return self._transport.open(
            request.method,
            request.url,
            request.headers,
            request.data,
            exchange,
            connect_timeout=self.timeouts.connect,
            read_timeout=self.timeouts.headers,
        )

    @staticmethod
    def _read_all(http: TransportResponse, wirelog: WireLog, limit: int | None) -> bytes:
        parts = []
        for data in http.iter_bytes(limit):
            wirelog.first_byte()
            parts.append(data)
        return b"".join(parts)

    def _complete_blocking(
        self, response: Response, status: int, data: bytes, kind: str, on_complete: Any = None
    ) -> None:
        if status >= 400:
            # Only for the message: an error body is read whatever its bytes are.
            text = data.decode("utf-8-sig", "replace")
            payload = parse_json(text)
            message = json_error_message(payload)
            response._error_body = ErrorBody(
                len(data),
                response._content_type,
                None if message is None else response._scrub(message),
            )
            response._settle(
                error_class="http", error_status=status, err=error_message(payload, text, status)
            )
            return
        try:
            text = data.decode("utf-8-sig")  # a leading BOM is dropped
        except UnicodeDecodeError:
            response._settle(error_class="response", err=ERR_NOT_UTF8)
            return
        payload = parse_json(text)
        if not text.strip():
            response._settle(error_class="response", err="Empty response body")
            return
        if not isinstance(payload, Mapping):
            response._settle(
                error_class="response", err=f"Response is not a JSON object: {_excerpt(text)}"
            )
            return
        self._lift_usage(response, payload)
        completion = parse_completion(payload, kind=kind)
        response.id = completion.id
        response.citations = completion.citations
        response._add_text(completion.text)
        response._add_reasoning(completion.reasoning or "")
        response._add_refusal(completion.refusal or "")
        response.tool_calls = list(completion.tool_calls)
        if completion.error is not None:
            response._settle(error_class="response", err=completion.error)
            return
        if not isinstance(payload.get("choices"), list) or not payload["choices"]:
            response._settle(
                error_class="response", err=f"Response has no choices: {_excerpt(text)}"
            )
            return
        response.finish_reason = self._decide_finish(response, completion.finish_reason)
        response._add_chunk(
            Chunk(
                content=completion.text,
                raw=dict(payload),
                is_final=True,
                model=completion.model,
                finish_reason=response.finish_reason,
                tool_calls=list(completion.tool_calls) or None,
                citations=completion.citations,
                thinking=completion.reasoning,
                refusal=completion.refusal,
                usage=response.usage,
                cached_tokens=response.cached_tokens,
            )
        )
        self._settle_decided(response, on_complete or self._on_blocking_complete)

    def _decide_finish(self, response: Response, reason: str | None) -> str | None:
        """Run `_reconcile_finish_reason` once; a hook that raises keeps `reason`."""
        response.provider_finish_reason = reason
        if reason is None:
            return None
        try:
            decided = self._reconcile_finish_reason(response, reason, response.request or {})
        except Exception as exc:
            log.warning(
                "_reconcile_finish_reason raised; keeping %r: %s",
                reason,
                self._redactor().exception(exc),
            )
            return reason
        if not isinstance(decided, str):
            log.warning("_reconcile_finish_reason returned %r; keeping %r", decided, reason)
            return reason
        return decided

    def _settle_decided(self, response: Response, on_complete: Any) -> None:
        """Apply the finish-reason rules to the decided reason, run the hook, settle."""
        error_class, err = judge_finish(response.finish_reason)
        if error_class is not None:
            response._settle(error_class=error_class, err=err)
            return
        try:
            on_complete(response)
        except Exception as exc:
            log.warning("completion hook raised: %s", self._redactor().exception(exc))
            response._settle(error_class="unknown", err=f"{type(exc).__name__}: {exc}")
            return
        response._settle()

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
        response = self.make_stream_response(request.body)
        self._start_stream(request, response, kind="chat")
        return response

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
        response = self.make_stream_response(request.body)
        self._start_stream(request, response, kind="text")
        return response

    def _start_stream(self, request: WireRequest, response: Response, *, kind: str) -> None:
        exchange = Exchange()
        exchange.arm_deadline(self.timeouts.request)
        response._attach_aborter(lambda: exchange.abort("cancel"))
        threading.Thread(
            target=self._stream_worker,
            args=(request, response, exchange, kind),
            name="llmchat-stream",
            daemon=True,
        ).start()

    def _stream_worker(
        self, request: WireRequest, response: Response, exchange: Exchange, kind: str
    ) -> None:
        """The reader thread: one exchange, then exactly one settle."""
        wirelog = WireLog(self._secrets())
        wirelog.request(request.method, request.url, request.headers, request.data)
        parser = StreamParser(kind, keep_raw=self.keep_raw)
        http = None
        ending: str | None = None
        try:
            http = self._open(request, exchange)
            wirelog.response(http.status_code, http.headers)
            response.retry_after = http.headers.get("Retry-After")
            response._content_type = http.headers.get("Content-Type")
            if _is_event_stream(http):
                ending = self._pump(http, response, parser, exchange, wirelog)
            else:
                # An error status, or a server that ignored "stream": a whole body.
                data = self._read_all(http, wirelog, self.max_response_bytes)
                self._complete_blocking(
                    response, http.status_code, data, kind, self._on_stream_complete
                )
                ending = None  # settled there
        except Exception as exc:
            ending = self._stream_failure(exc, response, parser, exchange, http is not None)
        finally:
            exchange.finish()
            if http is not None:
                http.close()
        try:
            if ending is not None:
                self._settle_stream(response, parser, ending)
        finally:
            if not response.is_done:  # a bug in a hook must not leave a Response live
                response._settle(error_class="unknown", err="The stream reader failed")
            wirelog.end("cancelled" if response.is_cancelled else response.err or "ok")

    def _pump(
        self,
        http: TransportResponse,
        response: Response,
        parser: StreamParser,
        exchange: Exchange,
        wirelog: WireLog,
    ) -> str:
        """Feed body bytes through the stages until ``[DONE]`` or the end of the body.

        The chunks of one read are published together: one lock and one
        wake-up per read rather than per frame.
        """
        decoder = SSEDecoder(self.max_event_bytes)
        for data in http.iter_bytes(self.max_response_bytes):
            wirelog.first_byte()
            response.last_activity_at = time.monotonic()
            chunks: list[Chunk] = []
            try:
                events = decoder.feed(data)
            except EventTooLarge as exc:  # publish what came before it, then fail
                for event in exc.events:
                    chunks += self._apply_event(event, response, parser, exchange)
                response._add_chunks(chunks)
                raise
            for event in events:
                chunks += self._apply_event(event, response, parser, exchange)
            response._add_chunks(chunks)
            if parser.done:
                return "done"
        chunks = []
        for event in decoder.flush():
            chunks += self._apply_event(event, response, parser, exchange)
        response._add_chunks(chunks)
        return "done" if parser.done else "eof"

    def _apply_event(
        self, event: SSEEvent, response: Response, parser: StreamParser, exchange: Exchange
    ) -> list[Chunk]:
        """One event's effect on the Response's aggregates; returns its chunks to publish."""
        finished_before = parser.wire_finish_reason is not None
        chunks = parser.feed(event)
        payload = parser.payload
        if payload is None:
            response.dropped_frames = parser.dropped
            return chunks
        if "usage" in payload or response.model is None:
            self._lift_usage(response, payload)
        if response.id is None and type(payload.get("id")) is str:
            response.id = payload["id"]
        for chunk in chunks:
            if chunk.content:
                response._add_text(chunk.content)
            if chunk.thinking:
                response._add_reasoning(chunk.thinking)
            if chunk.refusal:
                response._add_refusal(chunk.refusal)
            if chunk.tool_calls:
                response.tool_calls.extend(chunk.tool_calls)
        if not finished_before and parser.wire_finish_reason is not None:
            # Recorded, not acted on: read on for the usage frame, but not forever.
            response.finish_reason = parser.wire_finish_reason
            response.provider_finish_reason = parser.wire_finish_reason
            exchange.schedule_abort(self.timeouts.finish_grace, "grace")
        return chunks

    def _stream_failure(
        self,
        exc: Exception,
        response: Response,
        parser: StreamParser,
        exchange: Exchange,
        after_headers: bool,
    ) -> str | None:
        """Turn a read that raised into an ending, or settle it here; None if settled."""
        if exchange.aborted == "cancel":
            return None  # cancel() settled it already
        if isinstance(exc, (BodyTooLarge, EventTooLarge)):
            # Read no further, even after the finish chunk: what arrived stays on the Response.
            response._settle(error_class="response", err=str(exc))
            return None
        if exchange.aborted == "grace":
            return "grace"
        if parser.finished and exchange.aborted is None:
            return "eof"  # a connection lost after the finish chunk is a close
        error_class, message = classify_exception(
            exc, exchange=exchange, after_headers=after_headers, timeouts=self.timeouts
        )
        if error_class == "response" and message.startswith("Body cut off"):
            log.debug("stream cut off: %s", self._redactor().text(message))
            message = ERR_STREAM_CLOSED
        response._settle(error_class=error_class, err=message)
        return None

    def _settle_stream(self, response: Response, parser: StreamParser, ending: str) -> None:
        """The one place a stream's ending becomes its terminal state (spec contract)."""
        if parser.error is not None:
            response._settle(error_class="response", err=parser.error)
        elif parser.undecodable:
            response._settle(
                error_class="response",
                err=f"{parser.undecodable} stream frame(s) were not valid UTF-8; "
                "their text was lost",
            )
        elif parser.saw_tool_calls and parser.dropped:
            response._settle(
                error_class="response",
                err=f"{parser.dropped} stream frame(s) dropped while tool calls were "
                "streaming; the calls may be corrupt",
            )
        elif parser.assembler.pending:
            response._settle(
                error_class="response", err="Stream ended inside an unfinished tool call"
            )
        elif parser.finished or ending == "done":
            response.finish_reason = self._decide_finish(response, parser.finish_reason)
            response.provider_finish_reason = parser.wire_finish_reason
            self._settle_decided(response, self._on_stream_complete)
        else:
            response._settle(error_class="response", err=ERR_STREAM_CLOSED)

    # -- server limits ------------------------------------------------------

    def probe_server_limits(self) -> dict[str, Any]:
        """Ask the server for its context size and slot count; never raises.

        llama.cpp answers ``GET /props`` (``default_generation_settings.n_ctx``
        per slot, ``total_slots``). Returns ``{"source", "context_length",
        "slots"}``, or ``{"source", "note"}`` saying why nothing was learnt.
        Takes at most `server_probe_timeout` seconds in total.
        """
        payload, note = self._probe_json("/props")
        if note is not None:
            return {"source": self.probe_source, "note": note}
        settings = (
            payload.get("default_generation_settings") if isinstance(payload, Mapping) else None
        )
        n_ctx = settings.get("n_ctx") if isinstance(settings, Mapping) else None
        if not _is_positive_int(n_ctx):
            return {
                "source": self.probe_source,
                "note": "GET /props has no default_generation_settings.n_ctx",
            }
        result: dict[str, Any] = {"source": self.probe_source, "context_length": n_ctx}
        slots = payload.get("total_slots")
        if _is_positive_int(slots):
            result["slots"] = slots
        return result

    def _server_root(self) -> str:
        """The api_url without its trailing ``/v1``: where a server's own routes live."""
        return server_root(self.api_url)

    def _url(self, route: str, *, at_root: bool = False) -> str:
        """The URL of `route` under `api_url` (or the server root), before any query.

        A shared internal for a subclass's own side requests.
        """
        return join_url(self._server_root() if at_root else self.api_url, route)

    def _probe_json(self, path: str) -> tuple[Any, str | None]:
        """One bounded GET of JSON at the server root: `(payload, None)` or `(None, note)`.

        Never raises, and never takes longer than the probe timeout in total,
        even against a server that accepts and never answers, or trickles.
        A shared internal for a subclass's own probe.
        """
        return self._request_json("GET", self._url(path, at_root=True), label=f"GET {path}")

    def _request_json(
        self,
        method: str,
        url: str,
        data: bytes | None = None,
        *,
        label: str,
        limit: float | None = None,
    ) -> tuple[Any, str | None]:
        """One bounded side request answering JSON: `(payload, None)` or `(None, note)`.

        Sent with the backend's headers; bounded in total by `limit` (default:
        the probe timeout); never raises. For a subclass's own calls beside the
        completion (a cost lookup, an abort).
        """
        _, payload, note = self._side_request(method, url, data, label=label, limit=limit)
        return payload, note

    def _side_request(
        self,
        method: str,
        url: str,
        data: bytes | None = None,
        *,
        label: str,
        limit: float | None = None,
    ) -> tuple[int | None, Any, str | None]:
        """`_request_json` with the HTTP status too: `(status, payload, note)`.

        `status` is None when no HTTP answer came (refused, timed out, cut off),
        which tells an unreachable server from one without the route.
        """
        limit = self.timeouts.probe if limit is None else limit
        exchange = Exchange()
        exchange.arm_deadline(limit)
        headers = self._get_api_headers()
        if data is None:
            headers = {k: v for k, v in headers.items() if k != "Content-Type"}
        http = None
        try:
            http = self._transport.open(
                method,
                url,
                headers,
                data,
                exchange,
                connect_timeout=_min_limit(self.timeouts.connect, limit),
                read_timeout=_min_limit(self.timeouts.headers, limit),
            )
            body = http.read(self.max_response_bytes)
        except Exception as exc:
            _, message = classify_exception(
                exc, exchange=exchange, after_headers=http is not None, timeouts=self.timeouts
            )
            return None, None, self._redactor().text(f"{label} failed: {message}")
        finally:
            exchange.finish()
            if http is not None:
                http.close()
        status = http.status_code
        if status != 200:
            return status, None, f"{label} answered HTTP {status}"
        payload = parse_json(decode_body(body))
        if not isinstance(payload, Mapping):
            return status, None, f"{label} did not answer a JSON object"
        return status, payload, None

    def close(self) -> None:
        """Close the backend's pooled connections (only a session llmchat created)."""
        if self.session is None:
            self._transport.close()

    def __enter__(self) -> OpenAICommon:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


USER_AGENT: Final = f"llmchat/{__version__}"
"""Servers and gateways log clients by it; requests' own would name requests."""

ERR_STREAM_CLOSED: Final = "Stream closed without [DONE] or a finish reason"
ERR_NOT_UTF8: Final = "Response body is not valid UTF-8"


def _check_count(name: str, value: Any, what: str, *, none_ok: bool = True) -> None:
    """A positive int of `what` (None allowed when `none_ok`), else an error naming `name`."""
    if value is None and none_ok:
        return
    if isinstance(value, bool) or not isinstance(value, int):
        alternative = " or None" if none_ok else ""
        raise InvalidTypeError(
            f"{name} must be a number of {what} (int){alternative}, got {value!r}"
        )
    if value <= 0:
        raise InvalidArgumentError(f"{name} must be a positive number of {what}, got {value!r}")


def _is_event_stream(http: TransportResponse) -> bool:
    content_type = http.headers.get("Content-Type", "").lower()
    if http.status_code >= 400:
        return False
    return "json" not in content_type or "event-stream" in content_type


def _excerpt(text: str, limit: int = 200) -> str:
    text = text.strip()
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _is_positive_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def _min_limit(a: float | None, b: float | None) -> float | None:
    if a is None:
        return b
    return a if b is None else min(a, b)


def _message_list(messages: Iterable[MessageLike]) -> list[Message]:
    if messages is None:
        raise InvalidTypeError("messages must be a list of messages, got None")
    return coerce_messages(messages)


def _checked_tools(tools: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    if isinstance(tools, (str, bytes, Mapping)) or not isinstance(tools, Sequence):
        raise InvalidTypeError(
            f"tools must be a list of tool definitions, got {type(tools).__name__}"
        )
    for index, tool in enumerate(tools):
        if not isinstance(tool, Mapping):
            raise InvalidTypeError(f"tools[{index}] must be a mapping, got {type(tool).__name__}")
    return list(tools)
