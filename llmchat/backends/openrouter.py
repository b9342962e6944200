"""OpenRouter: the OpenAICommon backend for https://openrouter.ai.

What differs from a plain OpenAI-compatible server: attribution headers,
routing members in the body (`provider`, `models`, `transforms`),
``reasoning: {"effort": ...}`` instead of the top-level ``reasoning_effort``,
``cache_control`` breakpoints on chat bodies, no ``stream_options`` (OpenRouter
reports usage on its own), and an `OpenRouterResponse` carrying cost,
generation id, provider and BYOK flag, completed by a best-effort
``GET /generation`` lookup after a successful call.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Final
from urllib.parse import quote

from ..errors import InvalidArgumentError, InvalidTypeError
from ..response import Response
from ..settings import Settings
from .openai_common import OpenAICommon
from .options import CommonOptions

if TYPE_CHECKING:
    from typing_extensions import Unpack

log = logging.getLogger("llmchat")

__all__ = ["DEFAULT_API_URL", "OpenRouter", "OpenRouterResponse"]

DEFAULT_API_URL: Final = "https://openrouter.ai/api/v1"
EPHEMERAL: Final = {"type": "ephemeral"}
MAX_CACHE_BREAKPOINTS: Final = 4
"""Anthropic's limit on ``cache_control`` markers per request (OpenRouter passes them on)."""


class OpenRouterResponse(Response):
    """A `Response` with OpenRouter's accounting: cost, generation id, provider, BYOK."""

    def __init__(self, request: Mapping[str, Any] | None = None, *, secrets: tuple[str, ...] = ()):
        super().__init__(request, secrets=secrets)
        self.cost: float | None = None
        """Credits charged (``usage.cost``, else the lookup's ``total_cost``); None = not
        reported (0 is a real value: a free model)."""
        self.generation_id: str | None = None
        """OpenRouter's generation id (the body's top-level ``id``); None when none came."""
        self.provider_name: str | None = None
        """The upstream provider that served the call (``provider``); None = not reported."""
        self.is_byok: bool | None = None
        """True when your own provider key was used (``usage.is_byok``); None = not reported."""


class OpenRouter(OpenAICommon):
    """The OpenRouter backend: OpenAICommon plus routing, attribution and cost.

        backend = OpenRouter(model="openai/gpt-4o-mini", x_title="My app",
                             provider={"sort": "price"}, models=["mistralai/mistral-small"])
        r = backend.chat_completion([{"role": "user", "content": "Hi"}])
        print(r.msg, r.cost, r.provider_name)

    `api_key` defaults to env ``OPENROUTER_API_KEY``; `api_url` (in `common`,
    with every other OpenAICommon keyword) to ``https://openrouter.ai/api/v1``.
    `cache_breakpoints=False` sends messages unmarked; `generation_lookup=False`
    skips the ``GET /generation`` call after a completion.
    """

    response_class: ClassVar[type[Response]] = OpenRouterResponse
    send_include_usage: ClassVar[bool] = False  # stream_options has hung the header phase
    probe_source: ClassVar[str] = "openrouter"
    default_api_url: ClassVar[str | None] = DEFAULT_API_URL
    api_key_env: ClassVar[tuple[str, ...]] = ("OPENROUTER_API_KEY",)

    def __init__(
        self,
        api_key: str | None = None,
        model: str | None = None,
        settings: Settings | None = None,
        *,
        http_referer: str | None = None,
        x_title: str | None = None,
        provider: Mapping[str, Any] | None = None,
        models: Sequence[str] | None = None,
        transforms: Sequence[str] | None = None,
        cache_breakpoints: bool = True,
        generation_lookup: bool = True,
        api_url: str | None = None,
        **common: Unpack[CommonOptions],
    ) -> None:
        self.http_referer = _header_value("http_referer", http_referer)
        self.x_title = _header_value("x_title", x_title)
        self.provider = _checked_provider(provider)
        self.models = _str_list("models", models)
        self.transforms = _str_list("transforms", transforms)
        self.cache_breakpoints = _flag("cache_breakpoints", cache_breakpoints)
        self.generation_lookup = _flag("generation_lookup", generation_lookup)
        super().__init__(api_url, api_key, model, settings, **common)

    def _get_api_headers(self) -> dict[str, str]:
        headers = super()._get_api_headers()
        if self.http_referer:
            headers["HTTP-Referer"] = self.http_referer
        if self.x_title:
            headers["X-Title"] = self.x_title
        return headers

    def _finalize_request_body(self, body: dict[str, Any]) -> dict[str, Any]:
        """Add routing and ``reasoning``, then mark chat messages with ``cache_control``.

        Members already in `body` (from ``extra_body``) win. llmchat calls
        this; user code does not; override it in a subclass.
        """
        body = with_openrouter_members(super()._finalize_request_body(body), self._routing())
        if not self.cache_breakpoints or not isinstance(body.get("messages"), list):
            return body  # a text body (``prompt``) is sent as it is
        return {**body, "messages": with_cache_breakpoints(body["messages"])}

    def _lift_usage(self, response: Response, payload: Mapping[str, Any]) -> None:
        super()._lift_usage(response, payload)
        for name, value in openrouter_fields(payload).items():
            setattr(response, name, value)

    def _on_complete(self, response: Response) -> None:
        super()._on_complete(response)
        self._lookup_generation(response)

    def _routing(self) -> dict[str, Any]:
        return {
            name: value
            for name in ("provider", "models", "transforms")
            if (value := getattr(self, name)) is not None
        }

    def _lookup_generation(self, response: Response) -> None:
        """Best effort: fill what the body left unset from ``GET /generation``; never raises."""
        generation_id = getattr(response, "generation_id", None)
        if not self.generation_lookup or not generation_id or not _missing_fields(response):
            return
        url = self._url(f"/generation?id={quote(generation_id, safe='')}")
        payload, note = self._request_json("GET", url, label="GET /generation")
        data = payload.get("data") if note is None else None
        if not isinstance(data, Mapping):
            log.info("OpenRouter generation lookup gave nothing: %s", note or "no data object")
            return
        for name, value in generation_fields(data).items():
            if getattr(response, name, None) is None:
                setattr(response, name, value)


# -- pure helpers (no I/O; each returns new values) ----------------------------


def with_openrouter_members(body: Mapping[str, Any], routing: Mapping[str, Any]) -> dict[str, Any]:
    """`body` with ``reasoning_effort`` as ``reasoning: {"effort": ...}`` and `routing` added.

    A ``reasoning`` object already in `body` keeps its keys (one that is not
    an object is left alone); a routing member already in `body` wins.
    Returns a new dict; `body` and `routing` are not changed.
    """
    new = {k: v for k, v in body.items() if k != "reasoning_effort"}
    effort = body.get("reasoning_effort")
    given = new.get("reasoning")
    if effort is not None and (given is None or isinstance(given, Mapping)):
        new["reasoning"] = {"effort": effort, **(given or {})}
    for name, value in routing.items():
        new.setdefault(name, copy.deepcopy(value))
    return new


def openrouter_fields(payload: Mapping[str, Any]) -> dict[str, Any]:
    """The `OpenRouterResponse` extras a body or stream event carries; absent ones left out."""
    fields: dict[str, Any] = {}
    if _is_text(payload.get("id")):
        fields["generation_id"] = payload["id"]
    if _is_text(payload.get("provider")):
        fields["provider_name"] = payload["provider"]
    usage = payload.get("usage")
    if isinstance(usage, Mapping):
        if _is_number(usage.get("cost")):
            fields["cost"] = usage["cost"]
        if isinstance(usage.get("is_byok"), bool):
            fields["is_byok"] = usage["is_byok"]
    return fields


# Response field <- the generation endpoint's ``data`` keys, first present wins.
_GENERATION_KEYS: Final = {
    "cost": ("total_cost",),
    "provider_name": ("provider_name",),
    "prompt_tokens": ("native_tokens_prompt", "tokens_prompt"),
    "completion_tokens": ("native_tokens_completion", "tokens_completion"),
    "reasoning_tokens": ("native_tokens_reasoning",),
    "cached_tokens": ("native_tokens_cached",),
    "is_byok": ("is_byok",),
}
_LOOKED_UP: Final = ("cost", "provider_name", "prompt_tokens", "completion_tokens", "cached_tokens")


def generation_fields(data: Mapping[str, Any]) -> dict[str, Any]:
    """Response fields from ``GET /generation``'s ``data`` object; absent or odd ones left out."""
    fields: dict[str, Any] = {}
    for name, keys in _GENERATION_KEYS.items():
        for key in keys:
            value = data.get(key)
            if _valid_generation_value(name, value):
                fields[name] = value
                break
    return fields


def _valid_generation_value(name: str, value: Any) -> bool:
    if name == "cost":
        return _is_number(value)
    if name == "provider_name":
        return _is_text(value)
    if name == "is_byok":
        return isinstance(value, bool)
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _missing_fields(response: Response) -> bool:
    return any(getattr(response, name, None) is None for name in _LOOKED_UP)


def with_cache_breakpoints(messages: list[Any]) -> list[Any]:
    """Return `messages` with ``cache_control`` on the head and the last two text turns.

    Walks back from the end over user/assistant messages with text, skipping
    tool results and tool-calling turns without text. Markers already in the
    messages count toward the limit of four. Marked messages are new dicts;
    `messages` and its dicts are not changed.
    """
    budget = MAX_CACHE_BREAKPOINTS - sum(_existing_markers(m) for m in messages)
    chosen: list[int] = []
    if messages and _has_text(messages[0]):
        chosen.append(0)
    turns = [
        i
        for i in range(len(messages) - 1, 0, -1)
        if isinstance(messages[i], Mapping)
        and messages[i].get("role") in ("user", "assistant")
        and _has_text(messages[i])
    ]
    chosen += turns[:2]
    marked = set(chosen[: max(budget, 0)])
    return [_marked(m) if i in marked else m for i, m in enumerate(messages)]


def _has_text(message: Any) -> bool:
    if not isinstance(message, Mapping):
        return False
    content = message.get("content")
    if isinstance(content, str):
        return bool(content)
    return isinstance(content, list) and _last_text_part(content) is not None


def _last_text_part(content: list[Any]) -> int | None:
    for i in range(len(content) - 1, -1, -1):
        part = content[i]
        if isinstance(part, Mapping) and part.get("type") == "text" and _is_text(part.get("text")):
            return i
    return None


def _marked(message: Mapping[str, Any]) -> dict[str, Any]:
    content = message["content"]
    if isinstance(content, str):
        part = {"type": "text", "text": content, "cache_control": dict(EPHEMERAL)}
        return {**message, "content": [part]}
    index = _last_text_part(content)
    parts = list(content)
    if index is None:  # not reached: _has_text chose this message
        return {**message, "content": parts}
    parts[index] = {**parts[index], "cache_control": dict(EPHEMERAL)}
    return {**message, "content": parts}


def _existing_markers(message: Any) -> int:
    if not isinstance(message, Mapping):
        return 0
    content = message.get("content")
    parts = content if isinstance(content, list) else []
    return int("cache_control" in message) + sum(
        1 for p in parts if isinstance(p, Mapping) and "cache_control" in p
    )


# -- constructor checks (raise before anything is sent) --------------------------


def _header_value(name: str, value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise InvalidTypeError(f"{name} must be a str or None, got {type(value).__name__}")
    if "\r" in value or "\n" in value:
        raise InvalidArgumentError(f"{name} must not contain line breaks: {value!r}")
    return value


def _checked_provider(value: Any) -> dict[str, Any] | None:
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise InvalidTypeError(
            f"provider must be a mapping of OpenRouter routing preferences or None, "
            f"got {type(value).__name__}"
        )
    if not all(isinstance(key, str) for key in value):
        raise InvalidTypeError("provider keys must be str")
    return copy.deepcopy(dict(value))


def _str_list(name: str, value: Any) -> list[str] | None:
    if value is None:
        return None
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise InvalidTypeError(f"{name} must be a list of str or None, got {type(value).__name__}")
    for index, item in enumerate(value):
        if not _is_text(item):
            raise InvalidArgumentError(f"{name}[{index}] must be a non-empty str, got {item!r}")
    return list(value)


def _flag(name: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise InvalidTypeError(f"{name} must be True or False, got {value!r}")
    return value


def _is_text(value: Any) -> bool:
    return isinstance(value, str) and bool(value)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)
