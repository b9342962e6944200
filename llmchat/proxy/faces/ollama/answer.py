"""Ollama's answer to a proxied Response: NDJSON lines, or one JSON body (`OllamaAnswer`)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timezone
from typing import Any

from ....protocols.ollama import OllamaStream
from ....protocols.usage_counts import usage_counts
from ....response import Response
from ...answers import Answer
from .shapes import final_body

__all__ = ["OllamaAnswer"]


class OllamaAnswer(Answer):
    """`/api/chat` and `/api/generate`: NDJSON lines, or one JSON body."""

    def __init__(self, body: Mapping[str, Any], shape: str) -> None:
        model = body.get("model")
        self.model = model if isinstance(model, str) else ""
        self.shape = shape
        # "think": false asks for no reasoning; a server may reason anyway, so hide it.
        self.thinking = body.get("think") is not False

    def translator(self) -> OllamaStream:
        return OllamaStream(self.model, shape=self.shape)

    def loaded(self, unload: bool = False) -> dict[str, Any]:
        common: dict[str, Any] = dict(
            model=self.model,
            text="",
            thinking=None,
            done_reason="unload" if unload else "load",
            input_tokens=None,
            output_tokens=None,
            created_at=_now(),
        )
        return final_body(self.shape, **common)

    def body(self, response: Response) -> dict[str, Any]:
        # Raises UndecodableArguments (an AnswerRejected) for a tool call it must not pass on.
        counts = usage_counts(response.usage)  # for an upstream spelling input_tokens
        common: dict[str, Any] = dict(
            model=response.model or self.model,
            text=response.msg,
            thinking=response.reasoning_text if self.thinking else None,
            done_reason=response.finish_reason or "stop",
            input_tokens=_given(response.prompt_tokens, counts.prompt),
            output_tokens=_given(response.completion_tokens, counts.completion),
            total_duration_ns=_nanoseconds(response.timing.total_seconds),
            created_at=_now(),
            cached_tokens=_given(response.cached_tokens, counts.cached),
        )
        return final_body(self.shape, tool_calls=list(response.tool_calls), **common)


def _now() -> str:
    now = datetime.now(timezone.utc)
    return now.strftime("%Y-%m-%dT%H:%M:%S.") + f"{now.microsecond:06d}Z"


def _given(value: int | None, fallback: int | None) -> int | None:
    return value if value is not None else fallback


def _nanoseconds(seconds: float | None) -> int | None:
    return None if seconds is None else int(seconds * 1e9)
