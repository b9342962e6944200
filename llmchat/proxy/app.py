"""The proxy's WSGI application: Ollama, Anthropic and OpenAI faces over one upstream.

Routing, the key check, the body limit and request ids live here; the error
body each face answers with is `error_shapes`'. Translating request bodies is
the faces' job (`faces/`: each face's ``translate``); turning a Response into
each face's answer is `answers`' and the faces' ``answer`` modules'; writing
streamed bodies is `bodies`'; talking to the upstream is `upstream.Upstream`'s.
Streams are yielded a line (or event) at a time: the app never buffers, so what
reaches the client is only as delayed as the WSGI server makes it.
"""

from __future__ import annotations

import hmac
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final

from ..redact import check_secret
from ..response import Response
from .answers import Answer
from .bodies import STREAM_HEADERS, StreamBody
from .client_body import TOO_DEEP, ClientError, read_json
from .client_exchange import ClientExchange
from .error_shapes import error_body, face_of
from .faces.anthropic.routes import DEFAULT_PING_INTERVAL, AnthropicRoutes
from .faces.ollama.routes import OllamaRoutes
from .faces.openai import routes as openai_routes
from .faces.responses import routes as responses_routes
from .outbound import Cleaner, client_json, utf8_size
from .retry_advice import log_refusal
from .server.hangup import HangupWatch, client_socket
from .upstream import Call, Failure, Upstream, client_message
from .usage import CLIENT_ABORT_STATUS, UsageLog
from .usage.backend import store_of
from .usage.event import key_id_of
from .usage.fields import UNKNOWN_ROUTE

__all__ = ["ProxyApp", "make_app"]

_ECHO_PATH: Final = 200
"""How much of an unknown path a 404 repeats back."""

log = logging.getLogger("llmchat.proxy")

StartResponse = Callable[..., Any]


def make_app(
    upstream: Any,
    *,
    usage_log: Any = None,
    api_key: str | None = None,
    max_body_bytes: int = 10_000_000,
    usage_db: Any = None,
    ping_interval: float | None = DEFAULT_PING_INTERVAL,
    drop_billing_header: bool = False,
) -> ProxyApp:
    """A WSGI application serving Ollama, Anthropic and OpenAI clients over `upstream`.

    `upstream` is an `OpenAICommon` backend (or subclass) or an
    `llmchat.retry.Inference` chain. `usage_log` is a JSON-lines file path or
    a callable taking one event dict per request. `usage_db` is an SQLite file
    path, a ``postgresql://`` URL (the ``postgres`` extra) or a `UsageStore`:
    one row per request, for `llmchat usage`; a path or URL is opened (and its
    schema created) here, and `ProxyApp.close` closes it. With `api_key`, every route
    but ``/`` and ``/health`` needs ``Authorization: Bearer KEY`` or
    ``x-api-key: KEY``. Bodies over `max_body_bytes` are refused with 413.
    An Anthropic stream whose upstream is silent gets a ``ping`` event every
    `ping_interval` seconds (None: never); `drop_billing_header` drops Claude
    Code's per-request ``x-anthropic-billing-header:`` system block.

        app = make_app(OpenAICommon("http://127.0.0.1:8080/v1"))
        llmchat.proxy.make_server(app, port=11434).serve_forever()
    """
    return ProxyApp(
        upstream,
        usage_log=usage_log,
        api_key=api_key,
        max_body_bytes=max_body_bytes,
        usage_db=usage_db,
        ping_interval=ping_interval,
        drop_billing_header=drop_billing_header,
    )


class ProxyApp:
    """The WSGI callable `make_app` returns. Thread-safe: one instance serves every request."""

    def __init__(
        self,
        upstream: Any,
        *,
        usage_log: Any = None,
        api_key: str | None = None,
        max_body_bytes: int = 10_000_000,
        usage_db: Any = None,
        ping_interval: float | None = DEFAULT_PING_INTERVAL,
        drop_billing_header: bool = False,
    ) -> None:
        if api_key is not None and (not isinstance(api_key, str) or not api_key):
            raise TypeError("api_key must be a non-empty str or None")
        check_secret("api_key", api_key)
        if isinstance(max_body_bytes, bool) or not isinstance(max_body_bytes, int):
            raise TypeError("max_body_bytes must be an int")
        if max_body_bytes < 1:
            raise ValueError(f"max_body_bytes must be >= 1, got {max_body_bytes}")
        self.upstream = Upstream(upstream)
        self.usage = UsageLog(usage_log)
        self._api_key = api_key.encode("utf-8") if api_key else None
        self._key_id = key_id_of(api_key) if api_key else None
        self.max_body_bytes = max_body_bytes
        anthropic = AnthropicRoutes(
            self, ping_interval=ping_interval, drop_billing_header=drop_billing_header
        )
        # Last: opening a database is I/O, and every argument is checked by now.
        self.usage.store, self._owns_store = store_of(usage_db)
        ollama = OllamaRoutes(self)
        self._routes: dict[
            tuple[str, str], tuple[str, Callable[[ClientExchange], Iterable[bytes]]]
        ] = {
            ("GET", "/"): ("proxy", self._root),
            ("HEAD", "/"): ("proxy", self._root),
            ("GET", "/health"): ("proxy", self._health),
            ("HEAD", "/api/hello"): ("anthropic", self._hello),
            ("GET", "/api/hello"): ("anthropic", self._hello),
            ("GET", "/api/version"): ("ollama", ollama.version),
            ("GET", "/api/tags"): ("ollama", ollama.tags),
            ("GET", "/api/ps"): ("ollama", ollama.ps),
            ("POST", "/api/show"): ("ollama", ollama.show),
            ("POST", "/api/chat"): ("ollama", ollama.chat),
            ("POST", "/api/generate"): ("ollama", ollama.generate),
            ("POST", "/api/embed"): ("ollama", ollama.embed),
            ("POST", "/api/embeddings"): ("ollama", ollama.embeddings),
            ("POST", "/v1/messages"): ("anthropic", anthropic.messages),
            ("POST", "/v1/messages/count_tokens"): ("anthropic", anthropic.count_tokens),
            ("POST", "/v1/chat/completions"): ("openai", lambda ex: openai_routes.chat(self, ex)),
            ("GET", "/v1/models"): ("openai", lambda ex: openai_routes.models(self, ex)),
            ("POST", "/v1/embeddings"): ("openai", lambda ex: openai_routes.embeddings(self, ex)),
            ("POST", "/v1/responses"): ("openai", lambda ex: responses_routes.create(self, ex)),
        }
        self._paths = frozenset(path for _, path in self._routes)

    def __repr__(self) -> str:
        return f"ProxyApp({self.upstream!r}, api_key={'set' if self._api_key else None})"

    def close(self) -> None:
        """Close the usage store `make_app` opened from a path or URL (not one passed in)."""
        if self._owns_store and self.usage.store is not None:
            self.usage.store.close()

    # -- WSGI entry ----------------------------------------------------------

    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        method = environ.get("REQUEST_METHOD", "GET").upper()
        path = environ.get("PATH_INFO", "") or "/"
        route = self._routes.get((method, path))
        face = route[0] if route else face_of(path)
        exchange = ClientExchange(environ, start_response, face)
        known = path in self._paths
        if not known:
            # The client chose this path: recorded as a fixed placeholder, never as sent.
            exchange.event.route = UNKNOWN_ROUTE
        # The key is checked first, so a caller without it cannot map the routes.
        if self._api_key is not None and path not in _OPEN_PATHS:
            if not self._authorized(environ):
                return self._error(exchange, 401, "Missing or wrong API key", "unauthorized")
            exchange.event.key_id = self._key_id
        if route is None:
            if known:
                return self._error(exchange, 405, f"{method} is not allowed on {path}", "method")
            # The path is the client's own, and up to 64 KiB: a bounded echo of it.
            shown = path if len(path) <= _ECHO_PATH else path[:_ECHO_PATH] + "..."
            return self._error(exchange, 404, f"No route for {method} {shown}", "not_found")
        try:
            return route[1](exchange)
        except ClientError as exc:
            return self._error(exchange, exc.status, str(exc), exc.error_type)
        except RecursionError:
            # A body nested deeper than the interpreter's stack: the client's doing.
            return self._error(exchange, 400, TOO_DEEP, "invalid_request")
        except (ValueError, TypeError) as exc:
            # The faces and Settings raise these naming the field the client got wrong.
            return self._error(exchange, 400, str(exc), "invalid_request")
        except Exception as exc:
            # Not log.exception: the traceback's text could quote a credential.
            error = self.upstream.redactor().exception(exc)
            log.error("proxy request %s failed: %s", exchange.request_id, error)
            return self._error(exchange, 500, "Internal proxy error", "proxy")

    def _authorized(self, environ: Mapping[str, Any]) -> bool:
        assert self._api_key is not None
        offered = environ.get("HTTP_X_API_KEY", "")
        bearer = environ.get("HTTP_AUTHORIZATION", "")
        if bearer[:7].lower() == "bearer ":
            offered = offered or bearer[7:].strip()
        return hmac.compare_digest(offered.encode("utf-8"), self._api_key)

    # -- answers ------------------------------------------------------------

    def _json(
        self,
        exchange: ClientExchange,
        status: int,
        obj: Any,
        extra: Iterable[tuple[str, str]] = (),
    ) -> list[bytes]:
        data = client_json(obj, self.upstream.redactor())  # the length is the cleaned body's
        exchange.begin(status, "application/json", [("Content-Length", str(len(data))), *extra])
        self._record(exchange)
        return [data]

    def _error(
        self,
        exchange: ClientExchange,
        status: int,
        message: str,
        error_type: str,
        *,
        body: Any = None,
        failure: Failure | None = None,
    ) -> list[bytes]:
        """Answer an error in the face's shape (or `body`, when the face built its own).

        A 4xx the proxy answers itself leaves one WARNING line naming the face,
        the status, the field and the reason (never the field's content); an
        upstream `failure` was logged where it was read, and its retry advice
        goes on the answer.
        """
        event = exchange.event
        event.ok = False
        event.error_type = event.error_type or error_type
        if failure is None and 400 <= status < 500:
            log_refusal(exchange.face, status, message)
        if body is None:
            body = error_body(exchange.face, status, message)
        extra = failure.headers() if failure is not None else ()
        return self._json(exchange, status, body, extra)

    def _record(self, exchange: ClientExchange) -> None:
        event = exchange.event
        if event.model:  # the upstream's name for its model: it reaches the logs
            event.model = Cleaner(self.upstream.redactor()).text(event.model)
        exchange.event.duration_ms = round((time.monotonic() - exchange.started) * 1000, 3)
        self.usage.emit(exchange.event)

    def _read_json(self, exchange: ClientExchange) -> dict[str, Any]:
        return read_json(exchange, self.max_body_bytes)

    # -- small routes -------------------------------------------------------

    def _root(self, exchange: ClientExchange) -> list[bytes]:
        # Ollama's own root answers this text; some clients probe it.
        data = b"Ollama is running"
        exchange.begin(200, "text/plain; charset=utf-8", [("Content-Length", str(len(data)))])
        self._record(exchange)
        return [data] if exchange.environ.get("REQUEST_METHOD") != "HEAD" else []

    def _hello(self, exchange: ClientExchange) -> list[bytes]:
        # Claude Code's connectivity check at every start (HEAD, no credentials,
        # its answer ignored): a 200, so it is neither a 404 nor a 401 and its
        # WARNING line in the log.
        exchange.begin(200, "text/plain; charset=utf-8", [("Content-Length", "0")])
        self._record(exchange)
        return []

    def _health(self, exchange: ClientExchange) -> list[bytes]:
        return self._json(exchange, 200, {"status": "ok"})

    # -- completions --------------------------------------------------------

    def _start(
        self, exchange: ClientExchange, request: dict[str, Any]
    ) -> tuple[Response, HangupWatch] | list[bytes]:
        """The live upstream Response, watched for a hang-up; or the answer to its failure."""
        call = Call()
        watch = HangupWatch(client_socket(exchange.environ), call.cancel).start()
        try:
            started = self.upstream.start(request, call)
        except BaseException:
            watch.stop()
            raise
        if isinstance(started, Failure):
            watch.stop()
            return self._upstream_error(exchange, started, watch)
        return started, watch

    def _complete(
        self, exchange: ClientExchange, request: dict[str, Any], answer: Answer
    ) -> Iterable[bytes]:
        stream = bool(request.get("stream"))
        exchange.event.stream = stream
        answer.redactor = self.upstream.redactor()
        started = self._start(exchange, request)
        if isinstance(started, list):
            return started
        response, watch = started
        if not stream:
            response.wait()  # a hang-up cancels it, in prefill or later
            watch.stop()
            if watch.hung_up.is_set() or response.is_cancelled:
                return self._client_gone(exchange, response)
            if not answer.complete(response):
                return self._upstream_error(exchange, answer.failure(response), watch)
            refused = answer.refused(response)
            if refused is not None:
                return self._upstream_error(exchange, refused, watch)
            self._count(exchange, response)
            return self._answer(exchange, answer, response)
        chunks = iter(response)
        first = next(chunks, None)  # blocks through prefill; a hang-up cancels it
        if first is None:
            ended = self._ended_early(exchange, response, answer, watch)
            if ended is not None:
                return ended
        translator = answer.stream()
        exchange.begin(200, translator.content_type, STREAM_HEADERS)
        return StreamBody(
            exchange.event,
            lambda: self._record(exchange),
            response,
            translator,
            answer,
            first,
            chunks,
            watch,
        )

    def _answer(self, exchange: ClientExchange, answer: Answer, response: Response) -> list[bytes]:
        """The whole body for a settled `response`; a 502 in the face's shape if it cannot be
        written: the upstream's answer, never the client's request, is at fault by now."""
        try:
            body = answer.body(response)
            data = client_json(body, answer.redactor)
        except Exception as exc:
            log.warning("the upstream's answer could not be written (%s)", type(exc).__name__)
            failure = Failure(502, client_message("response", None), "response")
            return self._error(exchange, 502, failure.message, "response", failure=failure)
        exchange.begin(200, "application/json", [("Content-Length", str(len(data)))])
        self._record(exchange)
        return [data]

    def _ended_early(
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
            return self._upstream_error(exchange, answer.failure(response), watch)
        return None

    def _upstream_error(
        self, exchange: ClientExchange, failure: Failure, watch: HangupWatch
    ) -> list[bytes]:
        if watch.hung_up.is_set() or failure.error_class == "client_abort":
            return self._aborted(exchange)
        exchange.event.error_type = failure.error_class
        return self._error(
            exchange, failure.status, failure.message, failure.error_class, failure=failure
        )

    def _client_gone(self, exchange: ClientExchange, response: Response) -> list[bytes]:
        response.cancel()
        self._count(exchange, response)
        return self._aborted(exchange)

    def _aborted(self, exchange: ClientExchange) -> list[bytes]:
        """Answer a client that is gone: WSGI still wants a status, nobody will read it."""
        exchange.begin(CLIENT_ABORT_STATUS, "text/plain", [("Content-Length", "0")])
        exchange.event.ok, exchange.event.error_type = False, "client_abort"
        self._record(exchange)
        return []

    @staticmethod
    def _count(exchange: ClientExchange, response: Response) -> None:
        event = exchange.event
        event.input_tokens = response.prompt_tokens
        event.output_tokens = response.completion_tokens
        event.content_bytes = utf8_size(response.msg)
        if response.model and not event.model:
            event.model = response.model


_OPEN_PATHS = frozenset({"/", "/health", "/api/hello"})
"""Paths answered without the key: they tell nothing but that the proxy is up."""
