"""Anthropic: the backend for the Messages API (``POST /v1/messages``).

Speaks Anthropic's own wire dialect (`llmchat.dialects.anthropic`) through the
one pipeline: the request is built by `llmchat.dialects.anthropic_request`
from OpenAI-shaped messages, tools and `Settings`; streamed events and
blocking bodies are decoded into the same `Response` and `Chunk`s as every
other backend. Works against api.anthropic.com and against llama.cpp's
llama-server, which serves ``/v1/messages`` too (point `api_url` at its
``/v1``; it accepts the key as ``x-api-key`` or as a bearer token).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar, Final, Literal, TypeAlias

from ..dialects.anthropic import AnthropicMessages
from ..dialects.anthropic_request import DEFAULT_MAX_TOKENS, messages_body
from ..dialects.base import LLAMA_CPP_SETTINGS, OPENAI_ONLY_SAMPLERS, Dialect
from ..errors import InvalidArgumentError, InvalidTypeError
from ..settings import Settings
from ._bodies import BodyHost, ChatBodyBuilder, ChatParts
from .openai_common import OpenAICommon
from .options import CommonOptions

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = ["DEFAULT_API_URL", "DEFAULT_VERSION", "Anthropic", "AuthStyle"]

DEFAULT_API_URL: Final = "https://api.anthropic.com/v1"
DEFAULT_VERSION: Final = "2023-06-01"
AuthStyle: TypeAlias = Literal["x-api-key", "bearer"]

_DROPPED: Final = (
    *OPENAI_ONLY_SAMPLERS,
    "logprobs",
    "top_logprobs",
    *LLAMA_CPP_SETTINGS,
)
"""`Settings` fields the Messages API has no member for: not sent (it refuses
unknown members; llama-server's ``/v1/messages`` ignores them). `extra_body`
still sends anything."""


def _messages_body(backend: BodyHost, parts: ChatParts) -> dict[str, Any]:
    """The ``/messages`` body (`messages_body`), with the class's `default_max_tokens`."""
    limit = backend.default_max_tokens if isinstance(backend, Anthropic) else DEFAULT_MAX_TOKENS
    history, members, tools, tool_choice, stream = parts
    return messages_body(
        history, members, tools, tool_choice, stream=stream, default_max_tokens=limit
    )


class Anthropic(OpenAICommon):
    """The Anthropic Messages API backend (api.anthropic.com, or llama-server's ``/v1``).

        backend = Anthropic(model="claude-sonnet-4-5")      # key: env ANTHROPIC_API_KEY
        r = backend.chat_completion([{"role": "user", "content": "Hi"}])
        print(r.msg if r.is_success else r.err)
        messages.append(r.to_message())                      # thinking blocks kept

    `api_key` defaults to env ``ANTHROPIC_API_KEY``; it goes out as
    ``x-api-key`` (``auth="bearer"``: as ``Authorization: Bearer``, for
    gateways that want that), with ``anthropic-version: {anthropic_version}``.
    Every other keyword is `OpenAICommon`'s. ``max_tokens`` is required by the
    API: without one in the settings `default_max_tokens` is sent (plus the
    thinking budget when thinking is on). There are no text completions.
    """

    dialect: ClassVar[type[Dialect]] = AnthropicMessages
    text_dialect: ClassVar[type[Dialect] | None] = None
    chat_path: ClassVar[str] = "/messages"
    send_include_usage: ClassVar[bool] = False
    setting_field_names: ClassVar[Mapping[str, str | None]] = dict.fromkeys(_DROPPED)
    default_max_tokens: ClassVar[int] = DEFAULT_MAX_TOKENS
    """``max_tokens`` when the settings have none (the API requires it)."""
    body_builder: ClassVar[ChatBodyBuilder] = staticmethod(_messages_body)
    default_api_url: ClassVar[str | None] = DEFAULT_API_URL
    api_key_env: ClassVar[tuple[str, ...]] = ("ANTHROPIC_API_KEY",)

    def __init__(
        self,
        api_url: str | None = None,
        api_key: str | None = None,
        model: str | None = None,
        settings: Settings | None = None,
        *,
        anthropic_version: str = DEFAULT_VERSION,
        auth: AuthStyle = "x-api-key",
        **common: Unpack[CommonOptions],
    ) -> None:
        if not isinstance(anthropic_version, str) or not anthropic_version:
            raise InvalidTypeError("anthropic_version must be a non-empty str, e.g. '2023-06-01'")
        if any(c in anthropic_version for c in "\r\n"):
            raise InvalidArgumentError("anthropic_version must not hold a line break")
        if auth not in ("x-api-key", "bearer"):
            raise InvalidArgumentError(f"auth must be 'x-api-key' or 'bearer', got {auth!r}")
        self.anthropic_version = anthropic_version
        """The ``anthropic-version`` header sent with every request."""
        self.auth: AuthStyle = auth
        """How the key is sent: ``x-api-key`` (Anthropic's) or ``bearer``."""
        super().__init__(api_url, api_key, model, settings, **common)

    def _get_api_headers(self) -> dict[str, str]:
        """The base headers with the key as ``x-api-key`` (unless bearer) and the version.

        llmchat calls this; user code does not; override it in a subclass.
        """
        headers = super()._get_api_headers()
        if self.auth == "x-api-key" and "Authorization" in headers:
            del headers["Authorization"]
            headers["x-api-key"] = self._api_key or ""
        headers["anthropic-version"] = self.anthropic_version
        return headers
