"""Gemini: the backend for Google's Gemini API (``generateContent``), same verbs as OpenAICommon.

What differs from an OpenAI-compatible server: the request is built by
`llmchat.dialects.gemini_request` (``contents``/``parts``, ``systemInstruction``,
``functionDeclarations``, ``generationConfig``); the model is in the URL
(``/models/{model}:generateContent``, streamed ``:streamGenerateContent?alt=sse``);
the key goes in the ``x-goog-api-key`` header, never the URL; answers are read
by the `llmchat.dialects.gemini.Gemini` dialect; there are no text
completions; and `probe_server_limits` asks ``GET /models/{model}``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Final

from ..counts import is_positive_int
from ..dialects.base import Dialect
from ..dialects.gemini import GeminiContent as GeminiDialect
from ..dialects.gemini_request import build_request
from ..errors import InvalidArgumentError, InvalidTypeError
from ._bodies import BodyHost, ChatBodyBuilder, ChatParts
from ._request import USER_AGENT
from .openai_common import OpenAICommon

__all__ = ["DEFAULT_API_URL", "Gemini", "model_resource"]

DEFAULT_API_URL: Final = "https://generativelanguage.googleapis.com/v1beta"
_RESOURCE_PREFIXES: Final = ("models/", "tunedModels/")


def model_resource(model: Any) -> str:
    """The model's resource name (``models/gemini-2.5-flash``); raises naming `model`.

    ``gemini-2.5-flash`` and ``models/gemini-2.5-flash`` are the same model;
    ``tunedModels/x`` is kept as it is.
    """
    if model is None or model == "":
        raise InvalidArgumentError(
            "model is not set: Gemini puts the model in the URL; pass model='gemini-2.5-flash'"
        )
    if not isinstance(model, str):
        raise InvalidTypeError(f"model must be a str, got {type(model).__name__}")
    if any(c in model for c in "?#% \t\r\n") or model.startswith("/"):
        raise InvalidArgumentError(f"model {model!r} is not a Gemini model name")
    return model if model.startswith(_RESOURCE_PREFIXES) else f"models/{model}"


def _generate_content_body(backend: BodyHost, parts: ChatParts) -> dict[str, Any]:
    """The ``generateContent`` body (`build_request`; the mode is in the route)."""
    return build_request(parts.history, parts.members, parts.tools, parts.tool_choice)


class Gemini(OpenAICommon):
    """The Gemini API backend: Gemini's wire, OpenAICommon's verbs, Response and hooks.

        backend = Gemini(model="gemini-2.5-flash")   # key from env GEMINI_API_KEY
        r = backend.chat_completion([{"role": "user", "content": "Hi"}])
        print(r.msg if r.is_success else r.err)

    `api_key` defaults to env ``GEMINI_API_KEY``, else ``GOOGLE_API_KEY``; it is
    sent as ``x-goog-api-key``. Every other OpenAICommon argument is accepted.
    `response.to_message()` carries the thought signatures, which
    go back on the next request on the parts they came on.
    """

    dialect: ClassVar[type[Dialect]] = GeminiDialect
    text_dialect: ClassVar[type[Dialect] | None] = None
    send_include_usage: ClassVar[bool] = False
    probe_source: ClassVar[str] = "gemini"
    body_builder: ClassVar[ChatBodyBuilder] = staticmethod(_generate_content_body)
    default_api_url: ClassVar[str | None] = DEFAULT_API_URL
    api_key_env: ClassVar[tuple[str, ...]] = ("GEMINI_API_KEY", "GOOGLE_API_KEY")

    def _get_api_headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/json", "User-Agent": USER_AGENT}
        if self._api_key:
            headers["x-goog-api-key"] = self._api_key
        return headers

    def _chat_route(self, members: Mapping[str, Any], *, stream: bool) -> str:
        """``/models/{model}:generateContent``, or ``:streamGenerateContent?alt=sse``.

        Raises `ValueError` naming `model` when there is none (before any I/O).
        llmchat calls this; user code does not.
        """
        resource = model_resource(members.get("model", self.model))
        verb = ":streamGenerateContent?alt=sse" if stream else ":generateContent"
        return f"/{resource}{verb}"

    def probe_server_limits(self) -> dict[str, Any]:
        """Ask ``GET /models/{model}`` for the model's token limits; never raises.

        Returns ``{"source": "gemini", "context_length": inputTokenLimit,
        "max_output_tokens": outputTokenLimit}`` (the latter when reported),
        or ``{"source": "gemini", "note": ...}`` saying why nothing was learnt.
        """
        try:
            resource = model_resource(self.model)
        except (InvalidArgumentError, InvalidTypeError) as exc:
            return {"source": self.probe_source, "note": str(exc)}
        payload, note = self._request_json("GET", self._url(f"/{resource}"), label="GET model")
        if note is not None:
            return {"source": self.probe_source, "note": note}
        limit = payload.get("inputTokenLimit") if isinstance(payload, Mapping) else None
        if not is_positive_int(limit):
            return {"source": self.probe_source, "note": "GET model has no inputTokenLimit"}
        result: dict[str, Any] = {"source": self.probe_source, "context_length": limit}
        output = payload.get("outputTokenLimit")
        if is_positive_int(output):
            result["max_output_tokens"] = output
        return result
