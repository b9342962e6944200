"""One OpenTelemetry span per proxied model call (the ``otel`` extra), GenAI conventions.

Built from the request's usage event (`UsageLog.listeners`) when the answer
has ended: started at the event's ``started_at``, ended its ``duration_ms``
later, so a stream's span ends when the stream does and a streamed delta
costs nothing. Only model calls get one (chat, text completion, embeddings:
`OPERATIONS`); health, models, metrics and admin requests do not, nor a
keyless probe.

The span is a SERVER span: it is the proxy handling its client's request,
from its arrival to the answer's last byte, across admission waits and
fallbacks over several nodes, and its parent is the client's own span (the
request's W3C ``traceparent``). A CLIENT span would claim to be one call to
one model server, which a routed request with a fallback is not. The
``gen_ai.*`` attributes say what was asked and counted; ``llmchat.*`` say
how the proxy served it. The client key's name (``llmchat.key``: the usage
event's ``key_id``) is recorded, never the key; ``server.address`` is the
node's host, never its URL.

Nothing here imports opentelemetry until a span is wanted, and the app only
makes a `RequestSpans` when asked (`make_app(traces=...)`, ``llmchat proxy
--otel``).
"""

from __future__ import annotations

import importlib
import os
from typing import Any, Final
from urllib.parse import urlsplit

from ...errors import LLMChatError
from ..request_scope import current as current_scope
from ..usage.event import CLIENT_ABORT_STATUS, UsageEvent

__all__ = ["OPERATIONS", "RequestSpans", "check_otel", "provider_from_env"]

OPERATIONS: Final = {
    "/v1/chat/completions": "chat",
    "/v1/messages": "chat",
    "/v1/responses": "chat",
    "/api/chat": "chat",
    "/api/generate": "text_completion",
    "/v1/embeddings": "embeddings",
    "/api/embed": "embeddings",
    "/api/embeddings": "embeddings",
    # Gemini's face records a model method's pattern, never the model as sent.
    **{
        f"/{version}/models/{{model}}:{method}": "chat"
        for version in ("v1beta", "v1")
        for method in ("generateContent", "streamGenerateContent")
    },
}
"""The routes that call a model, and their ``gen_ai.operation.name``."""

_PROVIDERS: Final = {
    "api.openai.com": "openai",
    "api.anthropic.com": "anthropic",
    "generativelanguage.googleapis.com": "gcp.gemini",
    "api.mistral.ai": "mistral_ai",
    "api.deepseek.com": "deepseek",
    "api.groq.com": "groq",
    "api.x.ai": "x_ai",
}
"""``gen_ai.provider.name`` by the node's host: the dialect alone does not say who
runs a server (most OpenAI-dialect nodes are not OpenAI's), so it is set only here."""

_MISSING = "--otel needs the otel extra: pip install 'llmchat[otel]'"

_COUNTS: Final = (
    ("gen_ai.usage.input_tokens", "input_tokens"),
    ("gen_ai.usage.output_tokens", "output_tokens"),
    ("gen_ai.usage.cache_read.input_tokens", "cached_tokens"),
    ("gen_ai.usage.cache_creation.input_tokens", "cache_write_tokens"),
    ("gen_ai.usage.reasoning.output_tokens", "reasoning_tokens"),
)


class RequestSpans:
    """Makes the span of each finished model call; `observe` is a usage listener.

    `provider` is an OpenTelemetry ``TracerProvider``; `app` is read for the
    serving node's URL and dialect (its ``upstream``). `owned`: `close` shuts
    the provider down (it was made for this app).
    """

    def __init__(self, provider: Any, app: Any, owned: bool = False) -> None:
        from opentelemetry import trace
        from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

        from ..._version import __version__

        self.provider = provider
        self._owned = owned
        self._app = app
        self._tracer = provider.get_tracer("llmchat.proxy", __version__)
        self._server_kind = trace.SpanKind.SERVER
        self._error = trace.StatusCode.ERROR
        self._status = trace.Status
        self._propagator = TraceContextTextMapPropagator()
        self._hosts: dict[str, tuple[str | None, int | None]] = {}
        """Each node URL's host and port, parsed once (a node's URL is never exported)."""

    @classmethod
    def of(cls, traces: Any, app: Any) -> RequestSpans:
        """The spans `make_app(traces=...)` asks for: True, from the ``OTEL_*`` environment
        (`provider_from_env`); else `traces` is a ``TracerProvider``."""
        if traces is True:
            provider, owned = provider_from_env()
            return cls(provider, app, owned)
        if not callable(getattr(traces, "get_tracer", None)):
            raise TypeError("traces must be True, None or an OpenTelemetry TracerProvider")
        return cls(traces, app)

    def close(self) -> None:
        """Export what is pending and stop, when the provider was made for this app."""
        if self._owned:
            self.provider.shutdown()

    def observe(self, event: UsageEvent) -> None:
        """Make the span of one finished request, if it was a model call."""
        operation = OPERATIONS.get(event.route)
        if operation is None or event.is_probe:
            return
        start = int(event.started_at * 1e9)
        span = self._tracer.start_span(
            f"{operation} {event.model}" if event.model else operation,
            context=self._parent(),
            kind=self._server_kind,
            attributes=self.attributes(operation, event),
            start_time=start,
        )
        failed = not event.ok and not _cancelled(event)
        if failed:
            span.set_status(self._status(self._error, event.error_type or "error"))
        span.end(end_time=start + int(event.duration_ms * 1e6))

    def attributes(self, operation: str, event: UsageEvent) -> dict[str, Any]:
        """The span's attributes for `event` (no key, no URL, no text of the request)."""
        cancelled = _cancelled(event)
        out: dict[str, Any] = {
            "gen_ai.operation.name": operation,
            "llmchat.request_id": event.request_id,
            "llmchat.face": event.face,
            "llmchat.route": event.route,
            "llmchat.streamed": event.stream,
            "llmchat.cancelled": cancelled,
            "llmchat.content_bytes": event.content_bytes,
        }
        if event.model:
            out["gen_ai.request.model"] = event.model
        for name, field in _COUNTS:
            count = getattr(event, field)
            if count is not None:
                out[name] = count
        if not cancelled:
            out["http.response.status_code"] = event.status
            if not event.ok:
                out["error.type"] = event.error_type or "error"
        for name, value in (
            ("llmchat.key", event.key_id),
            ("llmchat.node", event.node),
            ("llmchat.alias", event.alias),
            ("llmchat.tier", event.tier),
            ("llmchat.cost", event.cost),
        ):
            if value is not None:
                out[name] = value
        self._add_server(out, event)
        return out

    def _add_server(self, out: dict[str, Any], event: UsageEvent) -> None:
        """``server.address``/``server.port`` of the node that served (its host only)."""
        url, dialect = self._node_url(event)
        if url is None:
            return
        host, port = self._hosts.get(url) or self._parse(url)
        if host is not None:
            out["server.address"] = host
            provider = _PROVIDERS.get(host)
            if provider is not None:
                out["gen_ai.provider.name"] = provider
        if port is not None:
            out["server.port"] = port
        if dialect is not None:
            out["llmchat.dialect"] = dialect

    def _node_url(self, event: UsageEvent) -> tuple[str | None, str | None]:
        upstream = self._app.upstream  # read once: a reload may swap the nodes
        if event.node is not None:
            node = (getattr(upstream, "nodes", None) or {}).get(event.node)
            if node is None:
                return None, None
            return node.config.url, node.config.dialect
        backend = getattr(upstream, "backend", None)
        url = getattr(backend, "api_url", None)
        return (url, None) if isinstance(url, str) else (None, None)

    def _parse(self, url: str) -> tuple[str | None, int | None]:
        try:
            parts = urlsplit(url)
            found = (parts.hostname, parts.port)  # hostname: no user or password
        except ValueError:
            found = (None, None)
        if len(self._hosts) < 1024:  # nodes are few; a bound all the same
            self._hosts[url] = found
        return found

    def _parent(self) -> Any:
        """The client's span as the parent (its ``traceparent``), else None: a new trace."""
        scope = current_scope()
        if scope is None or not scope.traceparent:
            return None
        carrier = {"traceparent": scope.traceparent}
        if scope.tracestate:
            carrier["tracestate"] = scope.tracestate
        return self._propagator.extract(carrier)


def _cancelled(event: UsageEvent) -> bool:
    return event.status == CLIENT_ABORT_STATUS or event.error_type == "client_abort"


def check_otel() -> None:
    """Raise `LLMChatError` naming what to install when ``--otel`` cannot work here."""
    _exporters()


def provider_from_env() -> tuple[Any, bool]:
    """The provider spans go to, and whether it was made here (then the app shuts it down).

    A process already tracing (an SDK provider set globally, e.g. under
    ``opentelemetry-instrument``) keeps its own. Else a new one, its resource
    from ``OTEL_SERVICE_NAME``/``OTEL_RESOURCE_ATTRIBUTES`` (``service.name``
    defaults to ``llmchat-proxy``) and its exporters from ``OTEL_TRACES_EXPORTER``
    (`_exporters`), each behind a batch processor: a span costs the request a
    queue append.
    """
    from opentelemetry import trace
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    exporters = _exporters()
    current = trace.get_tracer_provider()
    if isinstance(current, TracerProvider):
        return current, False
    resource = Resource.create()
    if str(resource.attributes.get("service.name", "")).startswith("unknown_service"):
        resource = resource.merge(Resource({"service.name": "llmchat-proxy"}))
    provider = TracerProvider(resource=resource)
    for make in exporters:
        provider.add_span_processor(BatchSpanProcessor(make()))
    return provider, True


def _exporters() -> list[Any]:
    """The span exporter classes ``OTEL_TRACES_EXPORTER`` names (default ``otlp``).

    ``otlp`` is OTLP over HTTP, or gRPC when ``OTEL_EXPORTER_OTLP_PROTOCOL``
    (or its traces variant) is ``grpc``, each configured by the standard
    ``OTEL_EXPORTER_OTLP_*`` variables; ``console`` prints each span;
    ``none`` exports nothing. Raises `LLMChatError` naming what is missing.
    """
    try:
        import opentelemetry.sdk.trace  # noqa: F401
    except ImportError:
        raise LLMChatError(_MISSING) from None
    names = os.environ.get("OTEL_TRACES_EXPORTER", "otlp")
    out: list[Any] = []
    for name in (n.strip().lower() for n in names.split(",")):
        if name == "none":
            continue
        if name == "console":
            from opentelemetry.sdk.trace.export import ConsoleSpanExporter

            out.append(ConsoleSpanExporter)
        elif name == "otlp":
            out.append(_otlp_exporter())
        else:
            raise LLMChatError(f"OTEL_TRACES_EXPORTER: {name!r} is not one of otlp, console, none")
    return out


def _otlp_exporter() -> Any:
    protocol = os.environ.get(
        "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", os.environ.get("OTEL_EXPORTER_OTLP_PROTOCOL", "")
    )
    grpc = protocol.strip().lower() == "grpc"
    kind = "grpc" if grpc else "http"
    package = f"opentelemetry-exporter-otlp-proto-{kind}"
    try:
        module = importlib.import_module(f"opentelemetry.exporter.otlp.proto.{kind}.trace_exporter")
    except ImportError:
        raise LLMChatError(
            f"OTEL_TRACES_EXPORTER=otlp needs {package}: pip install {package} "
            "(or OTEL_TRACES_EXPORTER=console)"
        ) from None
    return module.OTLPSpanExporter
