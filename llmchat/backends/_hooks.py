"""The override points of `OpenAICommon` and what each does by default.

Each hook takes a value and returns a new one (or sets fields on the Response
it is given); the base class docstring lists them in call order. `Hooks` is
a mixin: `OpenAICommon` supplies the attributes it reads. Besides the
defaults, the two places that call the hooks: the request flow
(`_chat_request`, `_text_request`, `_wire_request`: the request hooks in
order) and `_call`, which binds the hooks the runners run, with the values
they read, into one `Call` (the runners never see the backend).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, ClassVar

from .. import probe, wire_json
from ..dialects.base import Dialect
from ..errors import InvalidArgumentError, InvalidTypeError
from ..messages import Message, MessageLike
from ..pipeline.think_tags import ThinkTags
from ..redact import Redactor
from ..response import Response, writer_of
from ..settings import Settings
from ..urls import join_url
from ._bodies import BodyHost, ChatBodyBuilder, ChatParts
from ._context import added_headers
from ._request import (
    USER_AGENT,
    WireRequest,
    checked_tools,
    message_list,
    openai_chat_body,
)
from .call import Call

__all__ = ["Hooks"]


def _openai_body(backend: BodyHost, parts: ChatParts) -> dict[str, Any]:
    """The OpenAI chat-completions body, the default `body_builder` (`llmchat.backends._bodies`)."""
    history, members, tools, tool_choice, stream = parts
    include_usage = backend.send_include_usage
    return openai_chat_body(
        history, members, tools, tool_choice, stream=stream, include_usage=include_usage
    )


class Hooks(probe.SideRequests):
    """The default of every override point; `OpenAICommon` is the class to subclass."""

    settings: Settings
    model: str | None
    template: Any
    max_event_bytes: int | None
    keep_raw: bool
    think_tags: ThinkTags | None
    _api_key: str | None
    setting_field_names: ClassVar[Mapping[str, str | None]]
    response_class: ClassVar[type[Response]]
    dialect: ClassVar[type[Dialect]]
    text_dialect: ClassVar[type[Dialect] | None]
    chat_path: ClassVar[str]
    text_path: ClassVar[str]
    send_include_usage: ClassVar[bool]
    body_builder: ClassVar[ChatBodyBuilder] = staticmethod(_openai_body)
    """Builds the chat body (`_build_chat_body`'s default); a dialect backend names its own."""

    def normalized_messages(self, messages: Iterable[MessageLike]) -> list[Message]:
        raise NotImplementedError  # `OpenAICommon`'s

    # -- the request ------------------------------------------------------------

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

    def _chat_route(self, members: Mapping[str, Any], *, stream: bool) -> str:
        """Return the path (after `api_url`) a chat request is posted to.

        Gets the members `_get_api_settings` returned (the model among them).
        Default: the class attribute `chat_path`. llmchat calls this; user
        code does not; override it where the route depends on the model or
        the mode (Gemini's ``models/{model}:streamGenerateContent``).
        """
        return self.chat_path

    def _build_chat_body(
        self,
        history: list[Message],
        members: dict[str, Any],
        tools: list[Mapping[str, Any]] | None,
        tool_choice: str | Mapping[str, Any] | None,
        *,
        stream: bool,
    ) -> dict[str, Any]:
        """Return the chat body in the backend's wire dialect, as a new dict.

        Gets the normalized conversation (OpenAI-shaped `Message`s), the
        members `_get_api_settings` returned (a fresh dict, the builder's to
        use), the checked tools (OpenAI-shaped) and `tool_choice`. Default:
        the class attribute `body_builder` (`llmchat.backends._bodies`; the
        OpenAI chat-completions body unless a dialect backend names its own);
        it must raise `ValueError`/`TypeError` naming the field for input it
        cannot send. llmchat calls this; user code does not.
        """
        return self.body_builder(self, ChatParts(history, members, tools, tool_choice, stream))

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

    # -- the request flow: the hooks above, in order --------------------------

    def _chat_request(
        self,
        messages: Iterable[MessageLike],
        tools: Sequence[Mapping[str, Any]] | None,
        tool_choice: str | Mapping[str, Any] | None,
        settings: Settings | None,
        *,
        stream: bool,
    ) -> WireRequest:
        """The chat request for `prepare_chat_request`, in every dialect.

        The checks every dialect shares come first (messages, tools, tool_choice),
        then `_chat_route` and `_build_chat_body` make the dialect's path and
        body, then the usual hooks. Not an override point.
        """
        members = self._get_api_settings(settings)
        history = self.normalized_messages(message_list(messages))
        checked = None if tools is None else checked_tools(tools)
        if tool_choice is not None and not isinstance(tool_choice, (str, Mapping)):
            raise InvalidTypeError("tool_choice must be a str, a mapping or None")
        path = self._chat_route(members, stream=stream)
        body = self._build_chat_body(history, members, checked, tool_choice, stream=stream)
        return self._wire_request(path, body, stream=stream)

    def _text_request(
        self,
        messages: Iterable[MessageLike],
        continuation: bool,
        settings: Settings | None,
        *,
        stream: bool,
    ) -> WireRequest:
        """The text-completion request for `prepare_text_request`."""
        if self.text_dialect is None:
            raise InvalidArgumentError(
                f"{type(self).__name__} has no text completions; use chat_completion"
            )
        if self.template is None:
            raise InvalidArgumentError(
                "text completions need a prompt template: pass template=… to the backend "
                "(e.g. llmchat.templates.ChatML())"
            )
        body = self._get_api_settings(settings)
        body["prompt"] = self.template.render(
            self.normalized_messages(message_list(messages)), continuation=continuation
        )
        if stream:
            body["stream"] = True
            if self.send_include_usage:
                body["stream_options"] = {"include_usage": True}
        return self._wire_request(self.text_path, body, stream=stream)

    def _wire_request(self, path: str, body: dict[str, Any], *, stream: bool) -> WireRequest:
        """The finished body (after `_finalize_request_body`), its bytes and headers."""
        body = self._finalize_request_body(body)
        data = self._encode_request_body(body)
        headers = self._get_api_headers()
        headers.update(added_headers())  # the proxy's x-request-id, when it set one
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

    # -- the response -----------------------------------------------------------

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
            writer_of(response).add_cancel_hook(
                lambda: threading.Thread(
                    target=self._post_abort, name="llmchat-abort", daemon=True
                ).start()
            )
        return response

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
        fields = self.dialect.usage_fields(payload)
        for name, value in fields.items():
            setattr(response, name, value)
        if (
            self.dialect.derives_total
            and "total_tokens" not in fields
            and response.prompt_tokens is not None
            and response.completion_tokens is not None
        ):
            response.total_tokens = response.prompt_tokens + response.completion_tokens

    def _dialect(self, kind: str) -> Dialect:
        """A fresh decoder for one completion of `kind` (``chat`` or ``text``).

        Default: the class attribute `dialect` (or `text_dialect`). llmchat
        calls this; user code does not; override it only when the decoder
        depends on the request.
        """
        if kind == "text" and self.text_dialect is not None:
            return self.text_dialect()
        return self.dialect()

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

    # -- one call ----------------------------------------------------------------

    def _call(self, request: WireRequest, kind: str, *, stream: bool) -> Call:
        """What the runners read for one completion: values, and the hooks bound now.

        Taken per call, so an override on the class or on the instance runs.
        """
        return Call(
            request=request,
            kind=kind,
            dialect=self._dialect,
            transport=self._transport,
            timeouts=self.timeouts,
            max_response_bytes=self.max_response_bytes,
            max_event_bytes=self.max_event_bytes,
            keep_raw=self.keep_raw,
            think_tags=self.think_tags,
            secrets=self._secrets(),
            redactor=self._redactor,
            lift_usage=self._lift_usage,
            reconcile_finish_reason=self._reconcile_finish_reason,
            on_complete=self._on_stream_complete if stream else self._on_blocking_complete,
            lifts_model_only=getattr(self._lift_usage, "__func__", None) is Hooks._lift_usage,
        )
