"""The proxy's upstream: one OpenAI-compatible backend or an `Inference` chain.

Every completion the proxy serves goes through `Upstream.start`, which always
streams from the upstream (a non-streaming client simply waits for the end):
one code path for both, token counts from the usage frame, and a live
`Response` that a client hang-up can cancel at any phase, prefill included.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from typing import Any, Final

from .. import wire_json
from ..backends._context import extra_headers
from ..backends.openai_common import OpenAICommon
from ..errors import InvalidTypeError
from ..redact import Redactor
from ..response import Response
from ..retry import Cancelled, Exhausted, Inference, TimedOut
from ..settings import Settings
from ..tokens import TokenCounter
from .failures import (
    CANCELLED,
    Failure,
    client_message,
    failure_of,
    http_failure,
    is_truncation,
)
from .openai_chunk import openai_chunk
from .relay import Relay, RelayBroken, open_relay
from .request_scope import trace_headers

__all__ = [
    "Failure",
    "Relay",
    "RelayBroken",
    "Upstream",
    "UpstreamUnavailable",
    "client_message",
    "failure_of",
    "is_truncation",
    "openai_chunk",
]

log = logging.getLogger("llmchat.proxy")

# OpenAI body members that travel as Settings fields (validated there, named
# in its errors); everything else but the call's own parts goes in extra_body.
_SETTINGS_FIELDS = frozenset(
    name for name in Settings.__dataclass_fields__ if name not in ("extra_body",)
)
_CALL_PARTS = frozenset({"messages", "tools", "tool_choice", "stream", "model"})


STREAM_LEAD: Final = 16
"""Chunks a streamed answer's reader may run ahead of what its client has taken.

A client that stops reading then holds the upstream back through TCP (and
the send-stall limit ends it), instead of the proxy reading the whole answer
into memory for nobody."""


class Call:
    """One proxied completion: the live upstream Response, cancellable from any thread.

    `node`, `tier` and `alias` say where a routing upstream sent it (the
    ``x-llmchat-node`` header and the usage event read them); None: the
    proxy answered itself, or one upstream without names.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._cancelled = False
        self._response: Response | None = None
        self._inference: Inference | None = None
        self._hooks: list[Callable[[], None]] = []
        self.node: str | None = None
        self.tier: int | None = None
        self.alias: str | None = None
        self.wait_ms: float | None = None
        """How long routing waited for a slot (`routing.attempts`); None: not routed."""
        self.request_id: str | None = None
        """The client exchange's ``x-request-id``, sent upstream (`start`)."""

    @property
    def cancelled(self) -> bool:
        """True once `cancel` was called."""
        return self._cancelled

    def cancel(self) -> None:
        """Stop the upstream generation in whatever phase it is; never raises."""
        with self._lock:
            self._cancelled = True
            response, inference = self._response, self._inference
            hooks, self._hooks = self._hooks, []
        for hook in hooks:
            hook()
        if inference is not None:
            inference.cancel()
        if response is not None:
            response.cancel()

    def on_cancel(self, hook: Callable[[], None]) -> None:
        """Run `hook` (quick, never raising) at the cancel; at once if it happened already."""
        with self._lock:
            if not self._cancelled:
                self._hooks.append(hook)
                return
        hook()

    def track(self, response: Response | None = None, inference: Inference | None = None) -> None:
        """Hold what `cancel` stops; one that arrives after a cancel is stopped at once."""
        with self._lock:
            if response is not None:
                self._response = response
            if inference is not None:
                self._inference = inference
            cancelled = self._cancelled
        if cancelled:
            self.cancel()


class Upstream:
    """Adapts what `make_app` was given: an `OpenAICommon` backend or an `Inference`."""

    def __init__(self, target: Any) -> None:
        if isinstance(target, Inference):
            self.inference: Inference | None = target
            self.backend: Any = target.backends[0]
        elif callable(getattr(target, "chat_completion_stream", None)):
            self.inference = None
            self.backend = target
        else:
            raise InvalidTypeError(
                "upstream must be an OpenAICommon backend or an llmchat.retry.Inference, "
                f"got {type(target).__name__}"
            )

    def __repr__(self) -> str:
        return f"Upstream({self.inference or self.backend!r})"

    def redactor(self) -> Redactor:
        """Takes every backend's credentials out of text and bytes bound for clients or logs."""
        secrets: list[str] = []
        for backend in self._backends():
            get = getattr(backend, "_secrets", None)
            if callable(get):
                secrets.extend(get())
        return Redactor.of(secrets)

    # -- completions --------------------------------------------------------

    def start(self, body: Mapping[str, Any], call: Call) -> Response | Failure:
        """Start streaming the OpenAI chat `body`; the live Response, or a Failure.

        Bad members raise `ValueError`/`TypeError` naming the field, before
        any I/O. An `Inference` that runs out of backends is a Failure.
        """
        messages = body.get("messages")
        if not isinstance(messages, list):
            raise InvalidTypeError("messages must be a list")
        tools = body.get("tools")
        tool_choice = body.get("tool_choice")
        settings = self._settings(body)
        if self.inference is None:
            sent = (("x-request-id", call.request_id),) if call.request_id else ()
            # Built and sent in this thread: the client's request scope is this thread's.
            with extra_headers(*sent, *trace_headers()):
                streamed: Response = self.backend.chat_completion_stream(
                    messages, tools=tools, tool_choice=tool_choice, settings=settings
                )
            return _paced(body, call, streamed)
        if tool_choice is not None:
            settings = settings.merged(
                Settings(extra_body={**(settings.extra_body or {}), "tool_choice": tool_choice})
            )
        # An Inference runs one request at a time: each proxied call gets its own.
        chain = Inference(
            self.inference.backends,
            max_retries=self.inference.max_retries,
            timeout=self.inference.timeout,
            on_attempt=self.inference.on_attempt,
            deadline=self.inference.deadline,
        )
        call.track(inference=chain)
        try:
            response = chain.run_stream(messages, tools=tools, settings=settings)
        except Cancelled:
            return CANCELLED
        except TimedOut as exc:
            _log_attempts(exc)
            return Failure(504, client_message("timeout", None), "timeout")
        except Exhausted as exc:
            _log_attempts(exc)
            last = exc.attempts[-1] if exc.attempts else None
            error_class = last.error_class if last and last.error_class else "unknown"
            status = last.error_status if last else None
            return http_failure(error_class, status)
        return _paced(body, call, response)

    def _settings(self, body: Mapping[str, Any]) -> Settings:
        fields: dict[str, Any] = {}
        extra: dict[str, Any] = {}
        for key, value in body.items():
            if key in _CALL_PARTS or value is None:
                continue
            if key in _SETTINGS_FIELDS:
                fields[key] = value
            else:
                extra[key] = value
        model = body.get("model")
        if (
            self.inference is None
            and getattr(self.backend, "model", None) is None
            and isinstance(model, str)
            and model
        ):
            # A backend with no model of its own serves whatever the client names;
            # one with a model (or a chain) keeps its own.
            extra["model"] = model
        if extra:
            fields["extra_body"] = extra
        return Settings(**fields)

    # -- models -------------------------------------------------------------

    def model_names(self) -> list[str]:
        """Model ids the upstream lists at ``GET /models``, then its configured ones.

        An upstream without the route (404, 405; a MockBackend answers 404)
        lists only its configured models. Raises `UpstreamUnavailable` when the
        upstream cannot be reached or fails: an empty list would read as "no
        models" to a client, not as "the server is down".
        """
        names: list[str] = []
        if isinstance(self.backend, OpenAICommon):
            status, payload, note = self.get_json("/models")
            if status is None or (note is not None and status not in (404, 405)):
                log.warning("the upstream's model list failed: %s", note)
                raise UpstreamUnavailable(note or "GET /models failed")
            data = payload.get("data") if isinstance(payload, Mapping) else None
            if isinstance(data, list):
                for item in data:
                    name = item.get("id") if isinstance(item, Mapping) else None
                    if isinstance(name, str) and name and name not in names:
                        names.append(name)
        configured = [getattr(b, "model", None) for b in self._backends()]
        for name in configured:
            if isinstance(name, str) and name and name not in names:
                names.append(name)
        redactor = self.redactor()
        return [redactor.text(name) for name in names]

    def count_tokens(self, body: Mapping[str, Any]) -> int:
        """Prompt tokens of the OpenAI chat `body`, by the first backend's server tokenizer.

        Exact per message when the backend has a prompt `template`, an estimate
        (`llmchat.tokens.ROLE_OVERHEAD` per message) without one; tools are an
        estimate either way. Raises `TokenizerError` when the server cannot
        tokenize (a hosted API). A fresh counter per call: a proxy's traffic
        must not grow a cache without bound.
        """
        counter = TokenCounter(self.backend, template=getattr(self.backend, "template", None))
        return counter.count_request(body.get("messages") or [], body.get("tools"))

    def limits(self) -> dict[str, Any]:
        """The first backend's `probe_server_limits()` (bounded; never raises); {} without one."""
        probe = getattr(self.backend, "probe_server_limits", None)
        if probe is None:
            return {}
        try:
            limits = probe()
        except Exception as exc:  # a subclass's probe must not fail a metadata route
            log.warning("probe_server_limits raised: %s", self.redactor().exception(exc))
            return {}
        return limits if isinstance(limits, dict) else {}

    # -- side requests ------------------------------------------------------

    def get_json(self, route: str) -> tuple[int | None, Any, str | None]:
        """``GET`` `route` under the first backend's api_url: `(status, payload, note)`.

        A bounded side request beside the completions, with the backend's own
        headers (`post_json` says the rest).
        """
        return self._side("GET", route, None, label=f"GET {route}", limit=None, at_root=False)

    def post_json(
        self,
        route: str,
        body: Mapping[str, Any],
        *,
        limit: float,
        at_root: bool = True,
        label: str = "",
    ) -> tuple[int | None, Any, str | None]:
        """``POST`` `body` as JSON to `route` at the first backend's server root (or under its
        api_url), bounded in total by `limit` seconds: `(status, payload, note)`.

        `status` is None when no HTTP answer came; `note` is None when the
        answer was JSON. Never raises; an upstream that is not an HTTP backend
        has no such routes: (None, None, note). `label` names the route in the
        note (default: `route`).
        """
        data = wire_json.encode(dict(body))
        label = f"POST {label or route}"
        return self._side("POST", route, data, label=label, limit=limit, at_root=at_root)

    def _side(
        self, method: str, route: str, data: bytes | None, **how: Any
    ) -> tuple[int | None, Any, str | None]:
        backend = self.backend
        if not isinstance(backend, OpenAICommon):
            return None, None, "the upstream is not an HTTP backend"
        url = backend._url(route, at_root=how.pop("at_root"))
        return backend._side_request(method, url, data, **how)

    def probe_json(self, path: str) -> tuple[Any, str | None]:
        """One bounded GET of JSON at the first backend's server root: `(payload, note)`.

        The backend's own probe (its bounds; never raises); (None, note) for an
        upstream that is not an HTTP backend.
        """
        backend = self.backend
        if not isinstance(backend, OpenAICommon):
            return None, "the upstream is not an HTTP backend"
        return backend._probe_json(path)

    def _backends(self) -> list[Any]:
        return list(self.inference.backends) if self.inference is not None else [self.backend]

    # -- byte relay ---------------------------------------------------------

    def relay(self, relay: Relay, method: str, path: str, data: bytes | None) -> None:
        """Open `method path` on the first backend with its own credentials, into `relay`.

        For the OpenAI face (`relay.open_relay` does the work): the client's
        body goes upstream as sent and the answer comes back byte for byte.
        """
        open_relay(self.backend, self.redactor(), relay, method, path, data)


class UpstreamUnavailable(Exception):
    """The upstream could not be reached, or failed, on a metadata route."""


def _paced(body: Mapping[str, Any], call: Call, response: Response) -> Response:
    """`response`, tracked by `call`; paced to its client when the client streams.

    A client that waits for the whole answer is not paced: nobody iterates
    its Response, which must be read to the end.
    """
    if body.get("stream"):
        response._pace(STREAM_LEAD)
    call.track(response=response)
    return response


def _log_attempts(exc: Exhausted) -> None:
    """Log a failed chain by class and status only: an attempt's message may quote a body."""
    outcomes = [
        f"#{a.number} {a.error_class or 'failed'}"
        + (f" {a.error_status}" if a.error_status is not None else "")
        for a in exc.attempts
    ]
    log.warning("upstream chain failed: %s", "; ".join(outcomes) or "no attempts")
