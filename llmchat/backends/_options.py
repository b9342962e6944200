"""The checks on `OpenAICommon`'s constructor arguments, and `clone()`'s `KEEP`.

Caller mistakes raise here, naming the argument, before any I/O.
"""

from __future__ import annotations

import os
from typing import Any, ClassVar, Final, Protocol

import requests

from ..errors import InvalidArgumentError, InvalidTypeError
from ..messages import NormalizationMode, SystemMessageMode, normalize_messages
from ..redact import check_secret
from ..settings import Settings
from ..transport import Transport

__all__ = [
    "KEEP",
    "base_init_kwargs",
    "check_arguments",
    "check_count",
    "key_from_env",
    "server_and_key",
]


class _Keep:
    """Sentinel for `clone()`: keep the backend's value (distinct from None)."""

    def __repr__(self) -> str:
        return "KEEP"


KEEP: Final = _Keep()


def check_arguments(
    *,
    api_url: Any,
    api_key: Any,
    model: Any,
    settings: Any,
    message_normalization: NormalizationMode,
    folded_system_marker: str,
    tool_result_acknowledgement: str,
    system_message_mode: SystemMessageMode,
    max_response_bytes: Any,
    max_event_bytes: Any,
    keep_raw: Any,
    session: Any,
    pool_size: Any,
    transport: Any,
) -> None:
    """Raise `InvalidArgumentError`/`InvalidTypeError` naming the first bad argument."""
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
    check_count("pool_size", pool_size, "connections", none_ok=False)
    check_count("max_response_bytes", max_response_bytes, "bytes")
    check_count("max_event_bytes", max_event_bytes, "bytes")
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
        mode=message_normalization,
        folded_system_marker=folded_system_marker,
        tool_result_acknowledgement=tool_result_acknowledgement,
        system_message_mode=system_message_mode,
    )


def server_and_key(
    api_url: str | None, api_key: str | None, backend: type[ServerDefaults]
) -> tuple[str, str | None]:
    """`api_url` and `api_key`, else the backend class's `default_api_url` and env key.

    No URL given and no default raises `TypeError` (as a missing argument
    would); the environment (`api_key_env`) is read only when `api_key` is None.
    """
    if api_url is None:
        api_url = backend.default_api_url
        if api_url is None:
            name = backend.__name__
            raise InvalidTypeError(f"{name}() needs api_url: it has no default server")
    if api_key is None:
        api_key = key_from_env(*backend.api_key_env)
    return api_url, api_key


class ServerDefaults(Protocol):
    """The class attributes `server_and_key` reads (`OpenAICommon` has both)."""

    default_api_url: ClassVar[str | None]
    api_key_env: ClassVar[tuple[str, ...]]


def key_from_env(*names: str) -> str | None:
    """The first of the environment variables `names` that is set, checked as a credential.

    None when none is set (an empty value counts as unset); a value with a
    control character or surrounding whitespace raises, naming the variable.
    """
    for name in names:
        value = os.environ.get(name) or None
        if value is not None:
            return check_secret(f"the {name} environment variable", value)
    return None


def check_count(name: str, value: Any, what: str, *, none_ok: bool = True) -> None:
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


def base_init_kwargs(backend: Any) -> dict[str, Any]:
    """The base constructor's arguments as `backend` holds them now (for `clone()`)."""
    timeouts = backend.timeouts
    return {
        "api_url": backend.api_url,
        "api_key": backend.api_key,
        "model": backend.model,
        "settings": backend.settings,
        "message_normalization": backend.message_normalization,
        "folded_system_marker": backend.folded_system_marker,
        "tool_result_acknowledgement": backend.tool_result_acknowledgement,
        "system_message_mode": backend.system_message_mode,
        "template": backend.template,
        "connect_timeout": timeouts.connect,
        "headers_timeout": timeouts.headers,
        "request_timeout": timeouts.request,
        "stream_finish_grace": timeouts.finish_grace,
        "server_probe_timeout": timeouts.probe,
        "reuse_grace": timeouts.reuse_grace,
        "max_response_bytes": backend.max_response_bytes,
        "max_event_bytes": backend.max_event_bytes,
        "keep_raw": backend.keep_raw,
        "think_tags": backend.think_tags,
        "session": backend.session,
        "pool_size": backend.pool_size,
        "transport": backend.transport,
    }
