"""`CommonOptions`: the keyword arguments every backend passes on to `OpenAICommon`.

A subclass that adds arguments of its own takes the base's as
``**common: Unpack[CommonOptions]``, so a misspelt keyword fails
``mypy --strict`` (and, at run time, `OpenAICommon.__init__` raises
`TypeError` naming it). A type only: nothing here runs on a request.
"""

from __future__ import annotations

from typing import Any, TypedDict

from ..messages import NormalizationMode, SystemMessageMode
from ..pipeline.think_tags import ThinkTags
from ..settings import Settings
from ..transport import Transport

__all__ = ["BackendOptions", "CommonOptions", "OptionsBesideHeadersTimeout", "PositionalOptions"]


class OptionsBesideHeadersTimeout(TypedDict, total=False):
    """`CommonOptions` but `headers_timeout`, for a subclass with its own default for it."""

    message_normalization: NormalizationMode
    folded_system_marker: str
    tool_result_acknowledgement: str
    system_message_mode: SystemMessageMode
    template: Any
    connect_timeout: float | None
    request_timeout: float | None
    stream_finish_grace: float | None
    server_probe_timeout: float | None
    reuse_grace: float | None
    max_response_bytes: int | None
    max_event_bytes: int | None
    keep_raw: bool
    think_tags: bool | tuple[str, str] | ThinkTags | None
    session: Any
    pool_size: int
    transport: Transport | None


class CommonOptions(OptionsBesideHeadersTimeout, total=False):
    """`OpenAICommon`'s keyword-only arguments (its positional ones are named by each subclass)."""

    headers_timeout: float | None


class PositionalOptions(CommonOptions, total=False):
    """`CommonOptions` plus `api_key` and `settings`, for a subclass that fixes the server."""

    api_key: str | None
    settings: Settings | None


class BackendOptions(PositionalOptions, total=False):
    """Every argument of `OpenAICommon` but `api_url`, as keywords: for a subclass
    that adds arguments of its own and passes the rest on (``**common:
    Unpack[BackendOptions]``), `model` included."""

    model: str | None
