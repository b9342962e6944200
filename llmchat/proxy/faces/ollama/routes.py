"""The proxy's Ollama routes: metadata, chat and generate, and embeddings.

Each handler takes the request's `ClientExchange` (reading the body, answering
JSON or an error) and runs completions through the `Completions` it was given;
translation is the pure modules' (`translate`, `shapes`,
`embed`), what the upstream says of its model `models`', and
the embeddings call `embeddings`'.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Final

from ....errors import InvalidArgumentError
from ...completions import Completions, allowed_models, refused_model
from ...embeddings import Embeddings, fetch_embeddings
from ...outbound import client_json
from ...relay import Relay
from ...router import Route, Router
from ...server.hangup import HangupWatch, client_socket
from ...upstream import UpstreamUnavailable, client_message
from . import embed as ollama_embed
from . import translate as ollama_face
from .answer import OllamaAnswer
from .models import model_info, speaks_llama_cpp

if TYPE_CHECKING:
    from ...client_exchange import ClientExchange

__all__ = ["OllamaRoutes", "register"]

# What `think: false` sends to a llama.cpp upstream: "none" turns the template's
# thinking off there (enable_thinking false); other servers are sent nothing.
_LLAMA_CPP_NO_REASONING: Final = {"reasoning_effort": "none"}


def register(router: Router, completions: Completions) -> None:
    """Put the Ollama face's routes in `router`, answering through `completions`."""
    face = OllamaRoutes(completions)
    router.add(
        Route(method, path, "ollama", handler)
        for method, path, handler in (
            ("GET", "/api/version", face.version),
            ("GET", "/api/tags", face.tags),
            ("GET", "/api/ps", face.ps),
            ("POST", "/api/show", face.show),
            ("POST", "/api/chat", face.chat),
            ("POST", "/api/generate", face.generate),
            ("POST", "/api/embed", face.embed),
            ("POST", "/api/embeddings", face.embeddings),
        )
    )


class OllamaRoutes:
    """The Ollama face's route handlers, over the `completions` path they are given."""

    def __init__(self, completions: Completions) -> None:
        self.completions = completions
        self.upstream = completions.upstream
        self._llama_cpp: bool | None = None
        """Whether the upstream is llama-server; learnt once, on the first ``think: false``."""

    # -- metadata -----------------------------------------------------------

    def version(self, exchange: ClientExchange) -> list[bytes]:
        return exchange.json(200, ollama_face.version_body())

    def tags(self, exchange: ClientExchange) -> list[bytes]:
        return self._models(exchange, ollama_face.tags_body)

    def ps(self, exchange: ClientExchange) -> list[bytes]:
        context = self.upstream.limits().get("context_length")
        return self._models(
            exchange, lambda names: ollama_face.ps_body(names, _count_or_none(context))
        )

    def _models(
        self, exchange: ClientExchange, shape: Callable[[list[str]], dict[str, Any]]
    ) -> list[bytes]:
        try:
            names = self.upstream.model_names()
        except UpstreamUnavailable:
            return exchange.error(502, client_message("connection", None), "connection")
        allowed = allowed_models(exchange, names)
        if allowed is not None:
            names = allowed
        return exchange.json(200, shape(names))

    def show(self, exchange: ClientExchange) -> list[bytes]:
        body = exchange.read_json()
        model = body.get("model", body.get("name"))
        if not isinstance(model, str) or not model:
            raise InvalidArgumentError("model: a model name is required")
        info = model_info(self.upstream, model)
        if info.llama_cpp:
            self._llama_cpp = True
        return exchange.json(200, ollama_face.show_body(info.context_length, info.capabilities))

    # -- completions --------------------------------------------------------

    def chat(self, exchange: ClientExchange) -> Iterable[bytes]:
        body = exchange.read_json()
        request = ollama_face.chat_request(body, no_reasoning=self._no_reasoning(body))
        answer = OllamaAnswer(body, "chat")
        if not body.get("messages"):
            return self._load(exchange, body, request, answer)
        return self.completions.complete(exchange, request, answer)

    def generate(self, exchange: ClientExchange) -> Iterable[bytes]:
        body = exchange.read_json()
        request = ollama_face.generate_request(body, no_reasoning=self._no_reasoning(body))
        answer = OllamaAnswer(body, "generate")
        if not body.get("prompt") and not body.get("images"):
            return self._load(exchange, body, request, answer)
        return self.completions.complete(exchange, request, answer)

    def _no_reasoning(self, body: Mapping[str, Any]) -> Mapping[str, Any] | None:
        """What turns reasoning off upstream, for a ``think: false`` request; None elsewhere."""
        if body.get("think") is not False:
            return None
        if self._llama_cpp is None:
            self._llama_cpp = speaks_llama_cpp(self.upstream)
        return _LLAMA_CPP_NO_REASONING if self._llama_cpp else None

    def _load(
        self,
        exchange: ClientExchange,
        body: Mapping[str, Any],
        request: dict[str, Any],
        answer: OllamaAnswer,
    ) -> list[bytes]:
        """Ollama's "load the model" request (nothing to say): answered at once, as Ollama does.

        The upstream loads its own model; there is nothing to forward.
        """
        loaded = answer.loaded(_unloading(body))
        if not request.get("stream"):
            return exchange.json(200, loaded)
        data = client_json(loaded, self.upstream.redactor()) + b"\n"
        exchange.event.stream = True
        return exchange.whole(200, "application/x-ndjson", data)

    # -- embeddings ---------------------------------------------------------

    def embed(self, exchange: ClientExchange) -> list[bytes]:
        request = ollama_embed.embed_request(exchange.read_json())
        started = time.monotonic_ns()
        result = self._embeddings(exchange, request)
        if not isinstance(result, Embeddings):
            return result
        body = ollama_embed.embed_body(
            model=str(request["model"]),
            vectors=result.vectors,
            dimensions=request.get("dimensions"),
            prompt_tokens=result.prompt_tokens,
            total_duration_ns=time.monotonic_ns() - started,
        )
        return exchange.json(200, body)

    def embeddings(self, exchange: ClientExchange) -> list[bytes]:
        request = ollama_embed.embeddings_request(exchange.read_json())
        result = self._embeddings(exchange, request)
        if not isinstance(result, Embeddings):
            return result
        return exchange.json(200, ollama_embed.embeddings_body(result.vectors))

    def _embeddings(
        self, exchange: ClientExchange, request: dict[str, Any]
    ) -> Embeddings | list[bytes]:
        """The upstream's vectors for `request`, or the error answer already written."""
        forbidden = refused_model(exchange, request.get("model"))
        if forbidden is not None:
            return forbidden
        if not request["input"]:
            return Embeddings([], 0, None)  # Ollama's "load the model" call: nothing to embed
        relay = Relay(exchange.request_id)
        watch = HangupWatch(client_socket(exchange.environ), relay.cancel).start()
        try:
            result = fetch_embeddings(self.upstream, relay, request)
        finally:
            watch.stop()
        if isinstance(result, Embeddings):
            exchange.event.input_tokens = result.prompt_tokens
            return result
        return exchange.failed(result, watch.hung_up.is_set())


def _count_or_none(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _unloading(body: Mapping[str, Any]) -> bool:
    """Ollama's ``keep_alive: 0`` on an empty request means "unload the model"."""
    keep_alive = body.get("keep_alive")
    if isinstance(keep_alive, (int, float)) and not isinstance(keep_alive, bool):
        return keep_alive == 0
    return isinstance(keep_alive, str) and keep_alive.strip() in ("0", "0s", "0m", "0h")
