"""The proxy's Gemini routes: a model's methods, and the model list.

- ``POST /v1beta/models/{model}:generateContent`` and
  ``:streamGenerateContent`` (SSE with ``?alt=sse``, else the JSON array
  Gemini streams without it), the same under ``/v1/``: google-genai posts
  there with ``api_version="v1"``;
- ``POST .../models/{model}:countTokens``, counted by the upstream
  (`token_count`);
- ``GET /v1beta/models`` and ``GET /v1beta/models/{model}`` (`models`).
  ``GET /v1/models`` is the OpenAI face's list and stays so; ``GET
  /v1/models/{model}`` is left unserved for the same reason (an OpenAI
  client's ``models.retrieve``).

The model may be written ``models/x`` or ``x``; either way ``x`` is the
client's model name, which routing resolves (aliases, nodes) as on every
face. The usage event's route is the method's pattern
(``/v1beta/models/{model}:generateContent``), never the path as sent.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import parse_qs

from ....tokens import TokenizerError
from ...completions import Completions, allowed_models, refused_model
from ...router import Route, Router
from ...upstream import UpstreamUnavailable, client_message
from ...usage.fields import UNKNOWN_ROUTE
from .answer import GeminiAnswer
from .models import model_body, models_body
from .spelling import camel_case
from .token_count import count_tokens
from .translate import generate_request, model_name

if TYPE_CHECKING:
    from ...client_exchange import ClientExchange

__all__ = ["GeminiRoutes", "register"]

log = logging.getLogger("llmchat.proxy")

FACE: Final = "gemini"
PREFIXES: Final = ("/v1beta/models/", "/v1/models/")
"""Where a model's methods are posted: Gemini's v1beta and v1 APIs."""
_METHODS: Final = frozenset({"generateContent", "streamGenerateContent", "countTokens"})
_NO_TOKENIZER: Final = (
    "countTokens needs an upstream with a tokenizer (llama.cpp, KoboldCpp, Gemini)"
)


def register(router: Router, completions: Completions) -> None:
    """Put the Gemini face's routes in `router`, answering through `completions`."""
    face = GeminiRoutes(completions)
    router.add(
        [
            *(Route("POST", prefix, FACE, face.model_method, prefix=True) for prefix in PREFIXES),
            Route("GET", "/v1beta/models", FACE, face.models),
            Route("GET", "/v1beta/models/", FACE, face.model, prefix=True),
        ]
    )


class GeminiRoutes:
    """The Gemini face's handlers, over the `completions` path they are given."""

    def __init__(self, completions: Completions) -> None:
        self.completions = completions
        self.upstream = completions.upstream

    # -- a model's methods ----------------------------------------------------

    def model_method(self, exchange: ClientExchange) -> Iterable[bytes]:
        """``POST {prefix}{model}:{method}``: generate, stream or count."""
        path: str = exchange.environ.get("PATH_INFO", "")
        prefix = next(p for p in PREFIXES if path.startswith(p))
        named, colon, method = path[len(prefix) :].rpartition(":")
        handler = self._count if method == "countTokens" else self._generate
        if not colon or not named or method not in _METHODS:
            exchange.event.route = UNKNOWN_ROUTE
            shown = method[:60] if colon else "(none)"
            return exchange.error(
                404,
                f"Method {shown!r} is not served here: generateContent, "
                "streamGenerateContent or countTokens",
                "not_found",
            )
        exchange.event.route = f"{prefix}{{model}}:{method}"
        model = model_name(named)
        exchange.event.model = model
        return handler(exchange, model, method)

    def _generate(self, exchange: ClientExchange, model: str, method: str) -> Iterable[bytes]:
        stream = method == "streamGenerateContent"
        body = exchange.read_json()
        request, thinking = generate_request(body, model, stream=stream)
        framing = "sse" if stream and _alt(exchange) == "sse" else "array"
        answer = GeminiAnswer(model, framing=framing, thinking=thinking)
        return self.completions.complete(exchange, request, answer)

    def _count(self, exchange: ClientExchange, model: str, method: str) -> list[bytes]:
        body: Any = camel_case(exchange.read_json())
        inner = body.get("generateContentRequest")
        if inner is None:
            inner = body
        request = generate_request(inner, model, stream=False).body
        forbidden = refused_model(exchange, model)
        if forbidden is not None:
            return forbidden
        try:
            count = count_tokens(self.upstream, request, inner, model)
        except TokenizerError as exc:
            log.info("countTokens: %s", exc)
            return exchange.error(501, _NO_TOKENIZER, "not_implemented")
        exchange.event.input_tokens = count
        return exchange.json(200, {"totalTokens": count})

    # -- models ------------------------------------------------------------------

    def models(self, exchange: ClientExchange) -> list[bytes]:
        """``GET /v1beta/models``: every model served (a key's allowed ones, under a policy)."""
        try:
            names = self.upstream.model_names()
        except UpstreamUnavailable:
            return exchange.error(502, client_message("connection", None), "connection")
        allowed = allowed_models(exchange, names)
        if allowed is not None:
            names = allowed
        return exchange.json(200, models_body(names, self.upstream.limits()))

    def model(self, exchange: ClientExchange) -> list[bytes]:
        """``GET /v1beta/models/{model}``: the Model for any name the key may use."""
        path: str = exchange.environ.get("PATH_INFO", "")
        rest = path[len("/v1beta/models/") :]
        if rest.rpartition(":")[2] in _METHODS:
            shown = rest.rpartition(":")[2]
            return exchange.error(405, f"GET is not allowed on a model's {shown}", "method")
        exchange.event.route = "/v1beta/models/{model}"
        model = model_name(rest)
        forbidden = refused_model(exchange, model)
        if forbidden is not None:
            return forbidden
        return exchange.json(200, model_body(model, self.upstream.limits()))


def _alt(exchange: ClientExchange) -> str:
    """The ``alt`` query parameter (``sse`` asks for SSE framing); "" when absent."""
    query = parse_qs(exchange.environ.get("QUERY_STRING", ""))
    values: list[str] = query.get("alt") or [""]
    return values[0]
