"""The proxy's WSGI application: a router over the Ollama, Anthropic and OpenAI faces.

The key check, the lookup (404, 405), request ids and the last word on an
exception live here; nothing else does. Each face registers its routes the
same way (its package's ``register(router, completions)``, which adds its
`router.Route` list), and so does the app for its own three (root, hello, health). What the routes
share is the `completions.Completions` they receive (the one completion path,
over the upstream) and the `ClientExchange` each request gets (reading the
body, answering JSON or an error in the face's shape, the usage record).
Streams are yielded a line (or event) at a time: the app never buffers, so
what reaches the client is only as delayed as the WSGI server makes it.
"""

from __future__ import annotations

import functools
import hmac
import inspect
import logging
import sys
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, Final, TypedDict
from urllib.parse import unquote_plus

from ..redact import check_secret
from . import ops, request_scope
from .budget_refusal import over_budget
from .client_body import TOO_DEEP, ClientError
from .client_exchange import DEFAULT_MAX_BODY_BYTES, ClientExchange, ExchangeContext
from .completions import DEFAULT_PING_INTERVAL, Completions, FaceOptions
from .error_shapes import GEMINI_KEY_MESSAGE, face_of, gemini_key_refusal
from .faces import anthropic, gemini, ollama, openai, responses
from .request_scope import RequestScope, ScopedBody
from .router import Route, Router
from .routing.keys import KEY_POLICY, KeyRing
from .upstream import Upstream
from .usage import UsageLog
from .usage.backend import store_of
from .usage.budgets import Budgets
from .usage.event import key_id_of
from .usage.fields import UNKNOWN_ROUTE

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = ["AppOptions", "ProxyApp", "make_app"]

_ECHO_PATH: Final = 200
"""How much of an unknown path a 404 repeats back."""

log = logging.getLogger("llmchat.proxy")

StartResponse = Callable[..., Any]

FACES: Final = (ollama, anthropic, openai, responses, gemini)
"""The face packages the app registers, each by its ``register(router, completions)``."""


def _is_routed(upstream: object) -> bool:
    """Whether `upstream` is a `routing.RoutedUpstream`, without importing routing's upstream.

    Only a loaded ``routing.upstream`` can have made one, and the one-upstream
    proxy never loads it (nodes, health, admission: start-up time for nothing).
    """
    module = sys.modules.get("llmchat.proxy.routing.upstream")
    return module is not None and isinstance(upstream, module.RoutedUpstream)


class AppOptions(TypedDict, total=False):
    """`make_app`'s (and `ProxyApp`'s) keywords; see `make_app` for each."""

    usage_log: Any
    api_key: str | None
    max_body_bytes: int
    usage_db: Any
    ping_interval: float | None
    drop_billing_header: bool
    keys: KeyRing | None
    admin_key: str | None
    traces: Any


def make_app(upstream: Any, **options: Unpack[AppOptions]) -> ProxyApp:
    """A WSGI application serving Ollama, Anthropic and OpenAI clients over `upstream`.

    `upstream` is an `OpenAICommon` backend (or subclass), an
    `llmchat.retry.Inference` chain, or a `routing.RoutedUpstream` (many nodes
    behind aliases, used as it is). `usage_log` is a JSON-lines file path or
    a callable taking one event dict per request. `usage_db` is an SQLite file
    path, a ``postgresql://`` URL (the ``postgres`` extra) or a `UsageStore`:
    one row per request, for `llmchat usage`; a path or URL is opened (and its
    schema created) here, and `ProxyApp.close` closes it. With `api_key`, every route
    but ``/`` and ``/health`` needs ``Authorization: Bearer KEY``,
    ``x-api-key: KEY`` or ``x-goog-api-key: KEY`` (Gemini's routes also take
    ``?key=KEY``, which no log line, usage row or upstream request repeats).
    Bodies over `max_body_bytes` (default 10,000,000) are refused with 413.
    An Anthropic stream whose upstream is silent gets a ``ping`` event
    every `ping_interval` seconds (default 5.0; None: never);
    `drop_billing_header` drops Claude Code's per-request
    ``x-anthropic-billing-header:`` system block. `keys` (a routing config's
    client keys, `llmchat.proxy.routing.KeyRing`) replaces `api_key` with
    several named keys: the key's name is the usage event's ``key_id``, its
    policy is left in the WSGI environ under ``llmchat.key_policy`` for the
    model check; `ProxyApp.keys` may be swapped while serving (a reload).
    `admin_key` is the operator's: ``/metrics`` and ``/admin/`` need it (as
    ``Authorization: Bearer KEY`` or ``x-api-key: KEY``) instead of a client
    key; without it ``/admin/`` is a 404 and ``/metrics`` is open like
    ``/health``. `traces` (the ``otel`` extra) makes one OpenTelemetry span per
    model call (`ops.traces`): an SDK ``TracerProvider``, or True for one made
    from the standard ``OTEL_*`` environment, which `ProxyApp.close` shuts
    down. A misspelt keyword is a TypeError.

        app = make_app(OpenAICommon("http://127.0.0.1:8080/v1"))
        llmchat.proxy.make_server(app, port=11434).serve_forever()
    """
    return ProxyApp(upstream, **options)


class ProxyApp:
    """The WSGI callable `make_app` returns. Thread-safe: one instance serves every request.

    `router` is its route table; `completions` the completion path its faces
    received.
    """

    def __init__(
        self,
        upstream: Any,
        *,
        usage_log: Any = None,
        api_key: str | None = None,
        max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
        usage_db: Any = None,
        ping_interval: float | None = DEFAULT_PING_INTERVAL,
        drop_billing_header: bool = False,
        keys: KeyRing | None = None,
        admin_key: str | None = None,
        traces: Any = None,
    ) -> None:
        for name, value in (("api_key", api_key), ("admin_key", admin_key)):
            if value is not None and (not isinstance(value, str) or not value):
                raise TypeError(f"{name} must be a non-empty str or None")
            check_secret(name, value)
        if isinstance(max_body_bytes, bool) or not isinstance(max_body_bytes, int):
            raise TypeError("max_body_bytes must be an int")
        if max_body_bytes < 1:
            raise ValueError(f"max_body_bytes must be >= 1, got {max_body_bytes}")
        # A RoutedUpstream answers what the faces ask of an `Upstream` (duck-typed).
        routed = _is_routed(upstream)
        self.upstream: Upstream = upstream if routed else Upstream(upstream)
        self.usage = UsageLog(usage_log)
        self._api_key = api_key.encode("utf-8") if api_key else None
        self._key_id = key_id_of(api_key) if api_key else None
        if keys is not None and not isinstance(keys, KeyRing):
            raise TypeError("keys must be a llmchat.proxy.routing.KeyRing or None")
        self.keys = keys
        """The client keys, when a routing config names them; swapped whole on a reload."""
        self.admin_key = admin_key.encode("utf-8") if admin_key else None
        """The operator's key (bytes) for ``/metrics`` and ``/admin/``; swapped on a reload."""
        self.max_body_bytes = max_body_bytes
        self.budgets: Budgets | None = None
        """The keys' budgets (`usage.budgets`), set from a routing config; swapped on a reload."""
        context = ExchangeContext(self.upstream.redactor, self.usage.emit, max_body_bytes)
        options = FaceOptions(ping_interval, drop_billing_header)
        self.completions = Completions(self.upstream, context, options)
        self.router = Router()
        for register in (_register_own, *(face.register for face in FACES)):
            register(self.router, self.completions)  # a face checks its own options here
        ops.register(self.router, self)  # the operator's routes, behind the admin key
        self.traces = _traces_for(traces, self)
        """The spans made per model call (`ops.traces.RequestSpans`); None: no tracing."""
        if self.traces is not None:
            self.usage.listeners.append(self.traces.observe)
        # Last: opening a database is I/O, and every argument is checked by now.
        try:
            self.usage.store, self._owns_store = store_of(usage_db)
        except BaseException:
            if self.traces is not None:
                self.traces.close()  # the provider made for this app: its thread too
            raise

    def __repr__(self) -> str:
        api, admin = ("set" if key else None for key in (self._api_key, self.admin_key))
        return f"ProxyApp({self.upstream!r}, api_key={api}, admin_key={admin})"

    def close(self) -> None:
        """Close the usage store `make_app` opened from a path or URL (not one passed in),
        and the tracer provider it made (``traces=True``), exporting what is pending."""
        if self.traces is not None:
            self.traces.close()
        if self._owns_store and self.usage.store is not None:
            self.usage.store.close()

    # -- WSGI entry ----------------------------------------------------------

    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        method = environ.get("REQUEST_METHOD", "GET").upper()
        path = environ.get("PATH_INFO", "") or "/"
        take_query_key(environ)  # first: nothing after this sees a ?key= in the query
        route = self.router.find(method, path)
        face = route.face if route else face_of(path)
        exchange = self.completions.exchange(environ, start_response, face)
        # Every line logged for this request carries its id, the streamed body's too:
        # the scope is left once a whole answer is made, or when the stream closes.
        scope = RequestScope(
            exchange.request_id, environ.get("HTTP_TRACEPARENT"), environ.get("HTTP_TRACESTATE")
        )
        token = request_scope.enter(scope)
        try:
            result = self._answer(exchange, environ, method, path, route)
        except BaseException:
            request_scope.leave(token)
            raise
        if isinstance(result, (list, tuple)):
            request_scope.leave(token)
            return result
        return ScopedBody(result, token)

    def _answer(
        self,
        exchange: ClientExchange,
        environ: dict[str, Any],
        method: str,
        path: str,
        route: Route | None,
    ) -> Iterable[bytes]:
        """The answer to one request: the key check, the lookup, the route's handler."""
        recorded = self.router.recorded(path)
        known = recorded is not None
        if recorded != path:
            # The client chose this path (or its end, under a prefix route): recorded
            # as a fixed placeholder, never as sent.
            exchange.event.route = recorded or UNKNOWN_ROUTE
        # The key is checked first, so a caller without it cannot map the routes.
        if is_operator_path(path):
            refused = self._operator_refusal(exchange, environ, path)
            if refused is not None:
                return refused
        elif (self._api_key is not None or self.keys is not None) and path not in _OPEN_PATHS:
            key_id = self._authorized(environ, exchange.face)
            if key_id is None:
                if exchange.face == "gemini":
                    # Google's own answer to a bad key, which Gemini clients know.
                    body = gemini_key_refusal()
                    return exchange.error(400, GEMINI_KEY_MESSAGE, "unauthorized", body=body)
                return exchange.error(401, "Missing or wrong API key", "unauthorized")
            exchange.event.key_id = key_id
            budgets = self.budgets  # read once: a reload may swap it
            if budgets is not None and method == "POST" and route is not None:
                refusal = budgets.check(key_id)
                if refusal is not None:
                    return over_budget(exchange, refusal)
        if route is None:
            if known:
                return exchange.error(405, f"{method} is not allowed on {path}", "method")
            # The path is the client's own, and up to 64 KiB: a bounded echo of it.
            shown = path if len(path) <= _ECHO_PATH else path[:_ECHO_PATH] + "..."
            return exchange.error(404, f"No route for {method} {shown}", "not_found")
        try:
            return route.handler(exchange)
        except ClientError as exc:
            return exchange.error(exc.status, str(exc), exc.error_type)
        except RecursionError:
            # A body nested deeper than the interpreter's stack: the client's doing.
            return exchange.error(400, TOO_DEEP, "invalid_request")
        except (ValueError, TypeError) as exc:
            # The faces and Settings raise these naming the field the client got wrong.
            return exchange.error(400, str(exc), "invalid_request")
        except Exception as exc:
            # Not log.exception: the traceback's text could quote a credential.
            error = self.upstream.redactor().exception(exc)
            log.error("proxy request %s failed: %s", exchange.request_id, error)
            return exchange.error(500, "Internal proxy error", "proxy")

    def _operator_refusal(
        self, exchange: ClientExchange, environ: dict[str, Any], path: str
    ) -> Iterable[bytes] | None:
        """None when the operator's routes may answer; else the 404 (``/admin/`` with no
        admin key: there is none) or the 401 (a key set and not presented)."""
        admin_key = self.admin_key  # read once: a reload may swap it
        if admin_key is None:
            if path == "/metrics":
                return None
            return exchange.error(
                404,
                f"No route for {environ.get('REQUEST_METHOD', 'GET')} {path[:_ECHO_PATH]}",
                "not_found",
            )
        if hmac.compare_digest(_offered(environ).encode("utf-8"), admin_key):
            exchange.event.key_id = "admin"
            return None
        return exchange.error(401, "Missing or wrong admin key", "unauthorized")

    def _authorized(self, environ: dict[str, Any], face: str) -> str | None:
        """The accepted key's usage id, else None; a named key's policy goes into `environ`."""
        offered = _offered(environ, face)
        keys = self.keys  # read once: a reload may swap it
        if keys is not None:
            policy = keys.identify(offered)
            if policy is None:
                return None
            environ[KEY_POLICY] = policy
            return keys.key_id(policy)
        assert self._api_key is not None
        return self._key_id if hmac.compare_digest(offered.encode("utf-8"), self._api_key) else None


def _traces_for(traces: Any, app: ProxyApp) -> Any:
    """`make_app`'s `traces` as a `ops.traces.RequestSpans`, or None (no tracing)."""
    if traces is None or traces is False:
        return None
    from .ops.traces import RequestSpans  # imports opentelemetry: only when asked for

    return RequestSpans.of(traces, app)


def _offered(environ: dict[str, Any], face: str = "proxy") -> str:
    """The key a request presents: ``x-api-key``, else ``x-goog-api-key``, else
    ``Authorization: Bearer``'s; on Gemini's face, last, the ``?key=`` query
    parameter (`take_query_key` moved it out of the query)."""
    offered: str = environ.get("HTTP_X_API_KEY", "") or environ.get("HTTP_X_GOOG_API_KEY", "")
    bearer: str = environ.get("HTTP_AUTHORIZATION", "")
    if bearer[:7].lower() == "bearer ":
        offered = offered or bearer[7:].strip()
    if not offered and face == "gemini":
        offered = environ.get(QUERY_KEY, "")
    return offered


QUERY_KEY: Final = "llmchat.query_key"
"""The WSGI environ key under which `take_query_key` leaves a ``?key=`` value."""


def take_query_key(environ: dict[str, Any]) -> None:
    """Move a ``key`` query parameter (Gemini's ``?key=API_KEY``) out of ``QUERY_STRING``
    into ``environ[QUERY_KEY]``: nothing that reads or records the query (a handler,
    a span, a log line) sees the key. The other parameters stay as sent."""
    query: str = environ.get("QUERY_STRING", "")
    if "key=" not in query:
        return
    kept: list[str] = []
    for pair in query.split("&"):
        name, _, value = pair.partition("=")
        if unquote_plus(name) == "key":
            environ.setdefault(QUERY_KEY, unquote_plus(value))
        else:
            kept.append(pair)
    environ["QUERY_STRING"] = "&".join(kept)


def is_operator_path(path: str) -> bool:
    """``/metrics`` and ``/admin/...``: the operator's routes, behind the admin key."""
    return path == "/metrics" or path == "/admin" or path.startswith("/admin/")


def _register_own(router: Router, completions: Completions) -> None:
    """The app's own routes, registered as a face's are (they need no completions)."""
    router.add(
        [
            Route("GET", "/", "proxy", _root),
            Route("HEAD", "/", "proxy", _root),
            Route("GET", "/health", "proxy", functools.partial(_health, completions=completions)),
            Route("HEAD", "/api/hello", "anthropic", _hello),
            Route("GET", "/api/hello", "anthropic", _hello),
        ]
    )


def _root(exchange: ClientExchange) -> list[bytes]:
    # Ollama's own root answers this text; some clients probe it.
    return exchange.text(200, b"Ollama is running", "text/plain; charset=utf-8")


def _hello(exchange: ClientExchange) -> list[bytes]:
    # Claude Code's connectivity check at every start (HEAD, no credentials,
    # its answer ignored): a 200, so it is neither a 404 nor a 401 and its
    # WARNING line in the log.
    return exchange.text(200, b"", "text/plain; charset=utf-8")


def _health(exchange: ClientExchange, completions: Completions) -> list[bytes]:
    # A routing upstream reports the proxy, each node and the live config (503 when
    # no node is eligible); the one-upstream proxy answers that it is up.
    report = getattr(completions.upstream, "health_report", None)
    if report is None:
        return exchange.json(200, {"status": "ok"})
    body = report()
    return exchange.json(200 if body.get("status") == "ok" else 503, body)


# What `inspect` (help(), the API.md shape test) shows for `make_app`: ProxyApp's own
# keywords, written once there; `AppOptions` types them for a checker.
make_app.__signature__ = inspect.signature(ProxyApp).replace(return_annotation=ProxyApp)  # type: ignore[attr-defined]

_OPEN_PATHS = frozenset({"/", "/health", "/api/hello"})
"""Paths answered without the key: they tell nothing but that the proxy is up."""
