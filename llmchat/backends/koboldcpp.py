"""KoboldCpp: the OpenAI-compatible backend for a KoboldCpp server.

What differs from `OpenAICommon`: the extended sampler surface goes on the
wire (with KoboldCpp's own duplicate names), a JSON Schema goes native as a
top-level grammar-enforced `json_schema`, a stop on a custom stop sequence
(which KoboldCpp reports as `length`) is reconciled to `stop`, the context
size comes from `/api/extra/true_max_context_length`, and a cancel also posts
`/api/extra/abort`, because KoboldCpp keeps generating after a hang-up.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar

from ..counts import is_positive_int
from ..response import Response
from ..settings import Settings
from .openai_common import OpenAICommon
from .options import OptionsBesideHeadersTimeout

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = ["KoboldCpp"]

# KoboldCpp's native names for two OpenAI fields; both spellings are sent.
_DUPLICATES: dict[str, str] = {"repetition_penalty": "rep_pen", "max_tokens": "max_length"}


class KoboldCpp(OpenAICommon):
    """A backend for KoboldCpp's OpenAI-compatible API (default port 5001).

        backend = KoboldCpp(settings=Settings(max_tokens=200, min_p=0.05, stop=["\\nUser:"]))
        r = backend.chat_completion([{"role": "user", "content": "Hi"}])

    The response headers may wait out a long prefill on CPU, so
    `headers_timeout` is unbounded unless given.
    """

    send_include_usage: ClassVar[bool] = False
    setting_field_names: ClassVar[Mapping[str, str | None]] = {
        "max_context": "max_context_length",
        "json_schema": "json_schema",  # native, grammar-enforced (not response_format)
    }
    probe_source: ClassVar[str] = "koboldcpp"
    tokenize_route: ClassVar[tuple[str, str]] = ("/api/extra/tokencount", "prompt")
    abort_path: ClassVar[str | None] = "/api/extra/abort"  # KoboldCpp keeps generating
    limits_path: ClassVar[str] = "/api/extra/true_max_context_length"
    default_api_url: ClassVar[str | None] = "http://localhost:5001/v1"

    def __init__(
        self,
        api_url: str | None = None,
        api_key: str | None = None,
        model: str | None = None,
        settings: Settings | None = None,
        *,
        headers_timeout: float | None = None,
        **common: Unpack[OptionsBesideHeadersTimeout],
    ) -> None:
        super().__init__(
            api_url, api_key, model, settings, headers_timeout=headers_timeout, **common
        )

    def _get_api_settings(self, settings: Settings | None) -> dict[str, Any]:
        """Add KoboldCpp's `rep_pen` and `max_length` beside their OpenAI names.

        llmchat calls this; user code does not; override it in a subclass.
        """
        body = super()._get_api_settings(settings)
        body.update({alias: body[name] for name, alias in _DUPLICATES.items() if name in body})
        return body

    def _reconcile_finish_reason(
        self, response: Response, reason: str, request: Mapping[str, Any]
    ) -> str:
        """Turn KoboldCpp's `length` into `stop` when the evidence shows a stop sequence.

        Evidence (recorded on `response.finish_reason_evidence`): fewer
        completion tokens than the request's `max_tokens`, or the text ending
        in a requested stop sequence. Otherwise `reason` is kept. llmchat calls
        this; user code does not; override it in a subclass.
        """
        if reason != "length":
            return reason
        evidence = _stop_evidence(response, request)
        if evidence is None:
            return reason
        response.finish_reason_evidence = evidence
        return "stop"

    def probe_server_limits(self) -> dict[str, Any]:
        """Ask `GET /api/extra/true_max_context_length` (`{"value": N}`); never raises."""
        payload, note = self._probe_json(self.limits_path)
        if note is not None:
            return {"source": self.probe_source, "note": note}
        value = payload.get("value")
        if not is_positive_int(value):
            return {"source": self.probe_source, "note": f"GET {self.limits_path} has no value"}
        return {"source": self.probe_source, "context_length": value}


def _stop_evidence(response: Response, request: Mapping[str, Any]) -> dict[str, Any] | None:
    """Why a `length` finish was really a stop, or None when nothing says so."""
    max_tokens = request.get("max_tokens", request.get("max_length"))
    used = response.completion_tokens
    if is_positive_int(max_tokens) and isinstance(used, int) and used < max_tokens:
        return {"rule": "completion_tokens", "completion_tokens": used, "max_tokens": max_tokens}
    stop = request.get("stop")
    stops = [stop] if isinstance(stop, str) else stop if isinstance(stop, list) else []
    text = response.latest
    for sequence in stops:
        if isinstance(sequence, str) and sequence and text.endswith(sequence):
            return {
                "rule": "stop_sequence",
                "stop": sequence,
                "completion_tokens": used,
                "max_tokens": max_tokens,
            }
    return None
