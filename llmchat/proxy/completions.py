"""The proxy's one completion path, as the object every face receives: `Completions`.

A face translates its client's body into an OpenAI chat request and an
`Answer`; `Completions.complete` runs it through the upstream and answers,
whole or streamed, with the client's hang-up watched in every phase. The
pieces are public for a face that streams its own way (the Anthropic face's
pings): `start`, `ended_early`, `upstream_error`, `aborted`, `record`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Final

from ..redact import Redactor
from ..response import Response
from .answers import Answer
from .bodies import StreamBody, begin_stream
from .client_exchange import ClientExchange, ExchangeContext
from .outbound import client_json, utf8_size
from .routing.keys import FORBIDDEN_TYPE, KEY_POLICY, allows, refusal
from .server.hangup import HangupWatch, client_socket
from .upstream import Call, Failure, Upstream, client_message

__all__ = [
    "DEFAULT_PING_INTERVAL",
    "Completions",
    "FaceOptions",
    "allowed_models",
    "refused_model",
]

log = logging.getLogger("llmchat.proxy")

DEFAULT_PING_INTERVAL: Final = 5.0
"""`make_app`'s default `ping_interval`, in seconds."""

StartResponse = Callable[..., Any]


@dataclass(frozen=True)
class FaceOptions:
    """The faces' own switches, as `make_app` was given them (the face checks its own)."""

    ping_interval: float | None = DEFAULT_PING_INTERVAL
    drop_billing_header: bool = False


class Completions:
    """The completion path every face receives: the upstream, the usage record, the options.

    `upstream` is the seam the routing layer replaces (one node chosen per
    request). What the path asks of it: ``start(body, call)`` (the live
    streaming `Response` for an OpenAI chat body, tracked by `call` so a
    hang-up cancels it; or a `Failure`), ``redactor()`` (its credentials, to
    take out of what clients and logs get) and ``inference`` (an `Inference`
    chain, or None: the Anthropic face starts a chain on a thread). The
    metadata routes also ask it for ``model_names()``, ``limits()``,
    ``count_tokens(body)``, ``relay(...)``, ``side_request(...)`` and
    ``probe_json(path)``; `upstream.Upstream` is the one implementation.

    `context` is what every `ClientExchange` the app makes answers through
    (the redactor, the usage sink, the body limit). Thread-safe: one
    instance serves every request.
    """

    def __init__(
        self, upstream: Upstream, context: ExchangeContext, options: FaceOptions | None = None
    ) -> None:
        self.upstream = upstream
        self.context = context
        self.options = options if options is not None else FaceOptions()

    def __repr__(self) -> str:
        return f"Completions({self.upstream!r})"

    def exchange(
        self, environ: dict[str, Any], start_response: StartResponse, face: str
    ) -> ClientExchange:
        """A new request's exchange, answering through this path's context."""
        return ClientExchange(environ, start_response, face, self.context)

    def redactor(self) -> Redactor:
        """The upstream's redactor (its credentials out of client- and log-bound text)."""
        return self.upstream.redactor()

    # -- the whole path -----------------------------------------------------

    def complete(
        self, exchange: ClientExchange, request: dict[str, Any], answer: Answer
    ) -> Iterable[bytes]:
        """Run the OpenAI chat `request` upstream and answer it as `answer` shapes it."""
        stream = bool(request.get("stream"))
        exchange.event.stream = stream
        answer.redactor = self.upstream.redactor()
        started = self.start(exchange, request)
        if isinstance(started, list):
            return started
        response, watch = started
        if not stream:
            response.wait()  # a hang-up cancels it, in prefill or later
            watch.stop()
            if watch.hung_up.is_set() or response.is_cancelled:
                return self._client_gone(exchange, response)
            if not answer.complete(response):
                return self.upstream_error(exchange, answer.failure(response), watch)
            refused = answer.refused(response)
            if refused is not None:
                return self.upstream_error(exchange, refused, watch)
            count(exchange, response)
            return self._whole(exchange, answer, response)
        batches = response.iter_batches()
        first = next(batches, None)  # blocks through prefill; a hang-up cancels it
        if first is None:
            ended = self.ended_early(exchange, response, answer, watch)
            if ended is not None:
                return ended
        translator = begin_stream(exchange, answer)
        return StreamBody(exchange, response, translator, answer, first, batches, watch)

    # -- its pieces ---------------------------------------------------------

    def start(
        self, exchange: ClientExchange, request: dict[str, Any]
    ) -> tuple[Response, HangupWatch] | list[bytes]:
        """The live upstream Response, watched for a hang-up; or the answer to its failure
        (or to a model the client's key may not ask for: a 403 before any node is chosen)."""
        forbidden = refused_model(exchange, request.get("model"))
        if forbidden is not None:
            return forbidden
        call = Call()
        call.request_id = exchange.request_id
        watch = HangupWatch(client_socket(exchange.environ), call.cancel).start()
        try:
            started = self.upstream.start(request, call)
        except BaseException:
            watch.stop()
            raise
        finally:
            exchange.routed(call.node, call.tier, call.alias, call.wait_ms)
        if isinstance(started, Failure):
            watch.stop()
            return self.upstream_error(exchange, started, watch)
        return started, watch

    def ended_early(
        self, exchange: ClientExchange, response: Response, answer: Answer, watch: HangupWatch
    ) -> list[bytes] | None:
        """The answer to a stream settled before any output; None when it is to be streamed.

        A client that is gone, or a failure before output (the client still gets
        a real status); a success with nothing to say streams as usual.
        """
        if watch.hung_up.is_set() or response.is_cancelled:
            watch.stop()
            return self._client_gone(exchange, response)
        if not answer.complete(response):
            watch.stop()
            return self.upstream_error(exchange, answer.failure(response), watch)
        return None

    def upstream_error(
        self, exchange: ClientExchange, failure: Failure, watch: HangupWatch
    ) -> list[bytes]:
        """Answer the upstream's `failure`; a client gone meanwhile is `aborted` instead."""
        return exchange.failed(failure, watch.hung_up.is_set())

    @staticmethod
    def aborted(exchange: ClientExchange) -> list[bytes]:
        """Answer a client that is gone (`ClientExchange.aborted`)."""
        return exchange.aborted()

    @staticmethod
    def record(exchange: ClientExchange) -> None:
        """Finish and emit the request's usage event (`ClientExchange.record`)."""
        exchange.record()

    def _whole(self, exchange: ClientExchange, answer: Answer, response: Response) -> list[bytes]:
        """The whole body for a settled `response`; a 502 in the face's shape if it cannot be
        written: the upstream's answer, never the client's request, is at fault by now."""
        try:
            body = answer.body(response)
            data = client_json(body, answer.redactor)
        except Exception as exc:
            log.warning("the upstream's answer could not be written (%s)", type(exc).__name__)
            failure = Failure(502, client_message("response", None), "response")
            return exchange.error(502, failure.message, "response", failure=failure)
        return exchange.whole(200, "application/json", data)

    @staticmethod
    def _client_gone(exchange: ClientExchange, response: Response) -> list[bytes]:
        response.cancel()
        count(exchange, response)
        return exchange.aborted()


def refused_model(exchange: ClientExchange, model: object) -> list[bytes] | None:
    """The 403 in the face's shape when the request's key policy may not ask for `model`
    (the client's name for it), else None; a request with no named key is never refused."""
    policy = exchange.environ.get(KEY_POLICY)
    message = refusal(policy, model) if isinstance(model, str) else None
    if message is None:
        return None
    return exchange.error(403, message, FORBIDDEN_TYPE)


def allowed_models(exchange: ClientExchange, names: list[str]) -> list[str] | None:
    """`names` the request's key policy allows, or None when no policy limits them
    (no named key, or a key allowed every model): the model lists show only these."""
    policy = exchange.environ.get(KEY_POLICY)
    if policy is None or policy.models is None:
        return None
    return [name for name in names if allows(policy, name)]


def count(exchange: ClientExchange, response: Response) -> None:
    """Put `response`'s token counts, size and model on the request's usage event."""
    event = exchange.event
    event.input_tokens = response.prompt_tokens
    event.output_tokens = response.completion_tokens
    event.cached_tokens = response.cached_tokens
    event.cache_write_tokens = response.cache_write_tokens
    event.reasoning_tokens = response.reasoning_tokens
    event.content_bytes = utf8_size(response.msg)
    if response.model and not event.model:
        event.model = response.model
