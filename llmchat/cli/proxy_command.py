"""`llmchat proxy`: its options, and serving the app on the embedded server or under gunicorn."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from ..errors import LLMChatError
from .env import env_key
from .logs import LOG_LEVELS, configure_logging
from .workers import add_worker_options, serve_workers, wants_workers

__all__ = ["add_parser", "app_options", "serve"]

# Raw text: argparse would run the route list together into one paragraph.
_DESCRIPTION = """\
Serve five faces over one OpenAI-compatible upstream server:

  Ollama      POST /api/chat, /api/generate (translated); POST /api/embed,
              /api/embeddings (to the upstream's /v1/embeddings); GET /api/tags,
              /api/ps, /api/version, POST /api/show
  Anthropic   POST /v1/messages (translated), /v1/messages/count_tokens
  Responses   POST /v1/responses (OpenAI's Responses API, translated)
  Gemini      POST /v1beta/models/MODEL:generateContent, :streamGenerateContent,
              :countTokens (also under /v1/models/, translated); GET /v1beta/models,
              /v1beta/models/MODEL; the key also as x-goog-api-key or ?key=
  OpenAI      POST /v1/chat/completions, /v1/embeddings, GET /v1/models
              (relayed byte for byte with the upstream's key)

--model names the upstream model for every translating face (/api/chat,
/api/generate, /v1/messages, /v1/responses, /v1beta/models/); the relayed routes and /api/embed
send the client's model name as it is. The upstream key comes from --api-key-env; clients
must present $LLMCHAT_PROXY_KEY when it is set. GET /health and /api/hello
(Claude Code's start-up check) answer without a key.

The operator's routes need the admin key ($LLMCHAT_ADMIN_KEY, --admin-key-env):
GET /metrics (Prometheus; open when no admin key is set), and GET /admin/nodes,
/admin/config, /admin/usage, /admin/budgets (a 404 when no admin key is set).

--config FILE routes many models over many nodes instead (YAML, or JSON): model
aliases with ordered tiers, each node with its own dialect and key, client keys
with model policies. It replaces --upstream, --model and --api-key-env; a bad
file is refused at start-up with every error, and SIGHUP re-reads it (a bad
edit is logged and the running config stays). See examples/routing.yaml."""


def add_parser(commands: Any) -> None:
    """Add the `proxy` subcommand to `commands` (an argparse subparsers object)."""
    proxy = commands.add_parser(
        "proxy",
        help="serve Ollama, Anthropic, Gemini and OpenAI (chat relay, Responses) clients over an "
        "OpenAI-compatible upstream",
        description=_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    proxy.add_argument(
        "--config",
        metavar="FILE",
        help="route models over nodes as this YAML or JSON file says (see above); "
        "not with --upstream, --model or --api-key-env",
    )
    proxy.add_argument(
        "--upstream",
        help="the upstream's OpenAI base URL, e.g. http://127.0.0.1:8080/v1 "
        "(default: $LLMCHAT_API_URL)",
    )
    proxy.add_argument("--host", default="127.0.0.1", help="address to bind (default: 127.0.0.1)")
    proxy.add_argument("--port", type=int, default=11434, help="port (default: 11434, Ollama's)")
    proxy.add_argument(
        "--model",
        help="the upstream model every translating face uses whatever its clients name: "
        "Ollama's /api/chat and /api/generate, Anthropic's /v1/messages, the Responses "
        "face's /v1/responses, Gemini's /v1beta/models/ (default: $LLMCHAT_MODEL; "
        "unset: the client's model name is "
        "passed on). The relayed routes (/v1/chat/completions, /v1/embeddings) and "
        "/api/embed send the client's model name as it is",
    )
    proxy.add_argument(
        "--api-key-env",
        help="environment variable holding the upstream's API key (default: LLMCHAT_API_KEY)",
    )
    proxy.add_argument(
        "--proxy-key-env",
        default="LLMCHAT_PROXY_KEY",
        help="environment variable holding the key clients must send (default: "
        "LLMCHAT_PROXY_KEY; unset or empty: no key check)",
    )
    proxy.add_argument(
        "--admin-key-env",
        default="LLMCHAT_ADMIN_KEY",
        help="environment variable holding the operator's key, which /metrics and /admin/ "
        "need (default: LLMCHAT_ADMIN_KEY; unset or empty: /admin/ is a 404 and /metrics "
        "is open; a --config's admin.key_env takes its place)",
    )
    proxy.add_argument("--usage-log", help="append one JSON line per request to this file")
    proxy.add_argument(
        "--usage-db",
        help="record one row per request in this SQLite file or postgresql:// URL "
        "(read it with `llmchat usage --db`)",
    )
    proxy.add_argument(
        "--max-body-bytes", type=int, default=10_000_000, help="largest request body accepted"
    )
    proxy.add_argument(
        "--max-connections",
        type=int,
        default=256,
        help="connections served at once; more get a 503 (default: 256)",
    )
    proxy.add_argument(
        "--keep-alive",
        type=_seconds,
        default=75.0,
        help="seconds a kept-alive client connection may wait for its next request; keep it "
        "above a load balancer's idle timeout (default: 75; 0: close after each answer)",
    )
    for flag, default, what in _DEADLINES:
        proxy.add_argument(
            flag,
            type=_seconds,
            default=default,
            help=f"{what} (default: {default:g}; 0: no limit)",
        )
    proxy.add_argument(
        "--ping-interval",
        type=_seconds,
        default=5.0,
        help="seconds of upstream silence after which an Anthropic stream gets a ping event "
        "(default: 5; 0: no pings)",
    )
    proxy.add_argument(
        "--drop-billing-header",
        action="store_true",
        help="drop the per-request x-anthropic-billing-header system block Claude Code "
        "sends, so the upstream's prefix cache keeps matching",
    )
    proxy.add_argument(
        "--log-level",
        choices=LOG_LEVELS,
        default="warning",
        help="llmchat's log lines on stderr from this level up, each with its request's "
        "x-request-id (default: warning)",
    )
    proxy.add_argument(
        "--otel",
        action="store_true",
        help="one OpenTelemetry span per proxied request, exported as the standard OTEL_* "
        "environment says (OTEL_TRACES_EXPORTER, default otlp; OTEL_EXPORTER_OTLP_ENDPOINT; "
        "OTEL_SERVICE_NAME); needs the otel extra",
    )
    add_worker_options(proxy)
    proxy.set_defaults(run=_run_proxy)


_DEADLINES = (
    ("--header-timeout", 10.0, "seconds a request's line and headers may take in all"),
    ("--body-timeout", 60.0, "seconds a request's body may take in all; then a 408"),
    (
        "--send-timeout",
        60.0,
        "seconds one write may wait for a client that stopped reading; then it is let go",
    ),
)


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number of seconds, got {text!r}") from None
    if not value >= 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be >= 0 and finite, got {text!r}")
    return value


def _run_proxy(args: argparse.Namespace) -> int:
    configure_logging(args.log_level)
    if args.otel:
        from ..proxy.ops.traces import check_otel

        check_otel()  # a missing extra or exporter ends the command before anything is bound
    if args.config is not None:
        from .routed import run_routed

        return run_routed(args)
    _one_upstream_defaults(args)
    if not args.upstream:
        raise LLMChatError("no upstream: pass --upstream or set LLMCHAT_API_URL")
    if wants_workers(args):
        return serve_workers(args, lambda: _proxy_app(args))
    app, upstream = _proxy_app(args)
    return serve(args, app, upstream, f"over {upstream.api_url}")


def serve(args: argparse.Namespace, app: Any, upstream: Any, over: str) -> int:
    """Serve `app` on the embedded server until interrupted; close it and `upstream` after."""
    from ..proxy import make_server

    server = make_server(
        app,
        args.host,
        args.port,
        max_connections=args.max_connections,
        idle_timeout=args.keep_alive,
        header_timeout=args.header_timeout or None,
        body_timeout=args.body_timeout or None,
        send_timeout=args.send_timeout or None,
    )
    print(f"llmchat proxy: serving {server.url} {over}", file=sys.stderr, flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
        app.close()
        upstream.close()
    return 0


def _one_upstream_defaults(args: argparse.Namespace) -> None:
    # Not argparse defaults: with --config, only what was given on the line is a conflict.
    args.upstream = args.upstream or os.environ.get("LLMCHAT_API_URL")
    args.model = args.model or os.environ.get("LLMCHAT_MODEL")
    args.api_key_env = args.api_key_env or "LLMCHAT_API_KEY"


def _proxy_app(args: argparse.Namespace) -> tuple[Any, Any]:
    """The proxy app and its upstream as `args` say (under gunicorn, once per worker)."""
    _one_upstream_defaults(args)
    from ..backends.openai_common import OpenAICommon
    from ..proxy import make_app
    from ..transport import DEFAULT_POOL_SIZE

    upstream = OpenAICommon(
        args.upstream,
        api_key=env_key(args.api_key_env),
        model=args.model,
        # Every connection the server admits may hold one upstream connection.
        pool_size=max(DEFAULT_POOL_SIZE, args.max_connections),
    )
    app = make_app(upstream, **app_options(args))
    return app, upstream


def app_options(args: argparse.Namespace) -> dict[str, Any]:
    """`make_app`'s keywords from the command line (all but the upstream and client keys')."""
    return {
        "usage_log": args.usage_log,
        "api_key": env_key(args.proxy_key_env),
        "admin_key": env_key(args.admin_key_env),
        "max_body_bytes": args.max_body_bytes,
        "usage_db": args.usage_db,
        "ping_interval": args.ping_interval or None,
        "drop_billing_header": args.drop_billing_header,
        # Made per app: under gunicorn each worker exports from its own provider.
        "traces": True if args.otel else None,
    }
