"""OpenAICommon: the backend for any OpenAI-compatible chat server.

Step 1 of the plan builds the request side: configuration, the hooks that
shape a request, and the exact bytes it posts (see `prepare_chat_request`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Final

from .. import wire_json
from ..errors import InvalidArgumentError, InvalidTypeError
from ..messages import Message, MessageLike, coerce_messages, normalize_messages
from ..settings import Settings
from ..transport import Timeouts, redact_headers

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

    Override points, in the order a request meets them (each returns a new
    value and never mutates its input; llmchat calls them, user code does not):

    1. `_get_api_settings(settings) -> dict` — body members describing *how*
       to generate (model, samplers, response format), before the payload.
    2. `_get_api_headers() -> dict` — HTTP headers for every request.
    3. `_finalize_request_body(body) -> dict` — last look at the assembled body
       (messages or prompt, tools, stream flags attached); build new dicts,
       never reach back into the caller's messages.
    4. `_encode_request_body(body) -> bytes` — the exact bytes posted
       (default: `wire_json.encode`).

    The response-side hooks (`_lift_usage`, `_reconcile_finish_reason`,
    `make_response`, `make_stream_response`, `_on_blocking_complete`,
    `_on_stream_complete`) arrive with the network layer.

    Static provider differences are class attributes: `send_include_usage`
    (ask a stream for its usage frame) and `setting_field_names` (rename or
    drop `Settings` fields on the wire, see `Settings.to_body`).
    """

    send_include_usage: ClassVar[bool] = True
    """Send ``stream_options: {"include_usage": true}`` on streams."""
    setting_field_names: ClassVar[Mapping[str, str | None]] = {}
    """Wire names for `Settings` fields that this provider spells differently."""
    chat_path: ClassVar[str] = "/chat/completions"
    text_path: ClassVar[str] = "/completions"

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
        session: Any = None,
    ) -> None:
        if not isinstance(api_url, str) or not api_url.strip():
            raise InvalidArgumentError(f"api_url must be a non-empty URL string, got {api_url!r}")
        if not api_url.startswith(("http://", "https://")):
            raise InvalidArgumentError(f"api_url must start with http:// or https://: {api_url!r}")
        if api_key is not None and not isinstance(api_key, str):
            raise InvalidTypeError("api_key must be a str or None")
        if model is not None and not isinstance(model, str):
            raise InvalidTypeError(f"model must be a str or None, got {type(model).__name__}")
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
        self.session = session

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
            "session": self.session,
        }

    def clone(self, **changes: Any) -> OpenAICommon:
        """Return a new backend like this one, with `changes` applied.

        Every constructor argument may be changed; one not named is kept.
        Passing `None` sets that argument to None (for a timeout: no limit).
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
        headers = {"Content-Type": "application/json"}
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
        return self._wire_request(self.chat_path, body)

    def _wire_request(self, path: str, body: dict[str, Any]) -> WireRequest:
        body = self._finalize_request_body(body)
        return WireRequest(
            method="POST",
            url=self.api_url + path,
            headers=self._get_api_headers(),
            body=body,
            data=self._encode_request_body(body),
        )


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
