"""The proxy's Anthropic routes: ``POST /v1/messages`` and ``/v1/messages/count_tokens``.

What Claude Code needs beyond the translation (`translate`):

- a stream whose upstream is silent (prefill, hidden reasoning, a tool call
  being generated) gets ``ping`` events every `ping_interval` seconds. The
  proxy first waits up to one interval for output, so an upstream that fails
  at once still gets a real HTTP status; past that the headers,
  ``message_start`` and a ``ping`` go out, and a later failure is an
  Anthropic ``error`` event (`PingingStreamBody`);
- token counts come from the upstream's own template and tokenizer
  (`token_count`);
- with `drop_billing_header`, a system text block starting
  ``x-anthropic-billing-header:`` (a per-request nonce Claude Code sends) is
  dropped, so the upstream's prefix cache keeps matching from the first token;
- the ``anthropic-beta`` header is accepted and ignored (logged at DEBUG).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, Final

from ....errors import InvalidArgumentError, InvalidTypeError
from ....tokens import TokenizerError
from ...bodies import begin_stream
from ...completions import DEFAULT_PING_INTERVAL, Completions, refused_model
from ...router import Route, Router
from ...server.hangup import HangupWatch, client_socket
from ...upstream import Call, Failure
from . import translate as anthropic_face
from .answer import AnthropicAnswer
from .body import PingingStreamBody
from .chain import ChainStartBody, Starting
from .token_count import count_tokens

if TYPE_CHECKING:
    from ....response import Response
    from ...client_exchange import ClientExchange

__all__ = [
    "BILLING_HEADER_PREFIX",
    "DEFAULT_PING_INTERVAL",
    "AnthropicRoutes",
    "register",
    "without_billing_header",
]

log = logging.getLogger("llmchat.proxy")

BILLING_HEADER_PREFIX: Final = "x-anthropic-billing-header:"
"""How the system text block Claude Code stamps with a per-request nonce begins."""

_NO_TOKENIZER: Final = "count_tokens needs an upstream with a tokenizer (llama.cpp, KoboldCpp)"


def without_billing_header(body: Mapping[str, Any]) -> Mapping[str, Any]:
    """`body` without the billing line Claude Code stamps on its system blocks.

    The line (``x-anthropic-billing-header: cc_version=...; cch=<nonce>;``)
    opens a text block of a list ``system``, normally a block of its own,
    which then goes whole; text after the line's end stays. A string
    ``system`` is the client's own prompt and stays as sent. `body` itself is
    not changed.
    """
    system = body.get("system")
    if not isinstance(system, list):
        return body
    kept: list[Any] = []
    for block in system:
        text = block.get("text") if isinstance(block, Mapping) else None
        if _type_of(block) != "text" or not isinstance(text, str):
            kept.append(block)
        elif not text.startswith(BILLING_HEADER_PREFIX):
            kept.append(block)
        elif "\n" in text:
            kept.append({**block, "text": text.partition("\n")[2]})
    if kept == system:
        return body
    return {**body, "system": kept}


def _type_of(block: Any) -> Any:
    """A content block's ``type``; None for anything that is not a block."""
    return block.get("type") if isinstance(block, Mapping) else None


def check_ping_interval(value: Any) -> float | None:
    """`make_app`'s `ping_interval`: seconds > 0 and finite, or None for no pings."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidTypeError(
            f"ping_interval must be a number of seconds or None, got {type(value).__name__}"
        )
    if not 0 < value < float("inf"):
        raise InvalidArgumentError(f"ping_interval must be > 0 and finite, got {value}")
    return float(value)


def register(router: Router, completions: Completions) -> None:
    """Put the Anthropic face's routes in `router`, answering through `completions`."""
    face = AnthropicRoutes(
        completions,
        ping_interval=completions.options.ping_interval,
        drop_billing_header=completions.options.drop_billing_header,
    )
    router.add(
        [
            Route("POST", "/v1/messages", "anthropic", face.messages),
            Route("POST", "/v1/messages/count_tokens", "anthropic", face.count_tokens),
        ]
    )


class AnthropicRoutes:
    """The Anthropic face's two routes, over the `completions` path it is given."""

    def __init__(
        self,
        completions: Completions,
        *,
        ping_interval: float | None = DEFAULT_PING_INTERVAL,
        drop_billing_header: bool = False,
    ) -> None:
        if not isinstance(drop_billing_header, bool):
            raise InvalidTypeError("drop_billing_header must be a bool")
        self.completions = completions
        self.ping_interval = check_ping_interval(ping_interval)
        self.drop_billing_header = drop_billing_header

    def _body(self, exchange: ClientExchange) -> Mapping[str, Any]:
        body: Mapping[str, Any] = exchange.read_json()
        beta = exchange.environ.get("HTTP_ANTHROPIC_BETA")
        if beta:
            # Betas name features of Anthropic's own servers; the translation needs none.
            log.debug("anthropic-beta ignored: %.200s", beta)
        return without_billing_header(body) if self.drop_billing_header else body

    def messages(self, exchange: ClientExchange) -> Iterable[bytes]:
        """``POST /v1/messages``: the translated request through the upstream, answered back."""
        body = self._body(exchange)
        request = anthropic_face.messages_request(body)
        answer = AnthropicAnswer(body)
        if not request.get("stream") or self.ping_interval is None:
            return self.completions.complete(exchange, request, answer)
        return self._stream(exchange, request, answer, self.ping_interval)

    def count_tokens(self, exchange: ClientExchange) -> list[bytes]:
        """``POST /v1/messages/count_tokens``: the upstream's own count of the prompt."""
        body = self._body(exchange)
        # Counting takes no max_tokens; the translation requires one, and it is not counted.
        request = anthropic_face.messages_request({**body, "max_tokens": 1})
        try:
            count = count_tokens(self.completions.upstream, request, body)
        except TokenizerError as exc:
            log.info("count_tokens: %s", exc)
            return exchange.error(404, _NO_TOKENIZER, "not_found")
        exchange.event.input_tokens = count
        return exchange.json(200, {"input_tokens": count})

    def _stream(
        self,
        exchange: ClientExchange,
        request: dict[str, Any],
        answer: AnthropicAnswer,
        interval: float,
    ) -> Iterable[bytes]:
        completions = self.completions
        exchange.event.stream = True
        forbidden = refused_model(exchange, request.get("model"))
        if forbidden is not None:  # before an `Inference` chain's thread, too
            return forbidden
        answer.redactor = completions.upstream.redactor()
        if completions.upstream.inference is None:
            watched = completions.start(exchange, request)
            if isinstance(watched, list):
                return watched
            return self._answer_stream(exchange, answer, *watched, interval)
        # An `Inference` chain returns only once a backend has content, so it
        # starts on a thread: it may be silent through every attempt.
        call = Call()
        call.request_id = exchange.request_id
        watch = HangupWatch(client_socket(exchange.environ), call.cancel).start()
        try:
            starting = Starting(completions.upstream, request, call)
            if starting.done.wait(interval):
                started = starting.result()
                if isinstance(started, Failure):
                    watch.stop()
                    return completions.upstream_error(exchange, started, watch)
                return self._answer_stream(exchange, answer, started, watch, interval)
        except BaseException:
            watch.stop()
            raise
        translator = begin_stream(exchange, answer)
        return ChainStartBody(exchange, starting, translator, answer, watch, interval=interval)

    def _answer_stream(
        self,
        exchange: ClientExchange,
        answer: AnthropicAnswer,
        response: Response,
        watch: HangupWatch,
        interval: float,
    ) -> Iterable[bytes]:
        # Output within one interval, or a settled Response: answer as the other faces do.
        ready = response.wait_for_content(interval)
        if ready and response.is_done:
            said = response.msg or response.reasoning_text or response.tool_calls
            ended = (
                None if said else self.completions.ended_early(exchange, response, answer, watch)
            )
            if ended is not None:
                return ended
        translator = begin_stream(exchange, answer)
        return PingingStreamBody(
            exchange,
            response,
            translator,
            answer,
            watch,
            interval=interval,
            silent_start=not ready,
        )
