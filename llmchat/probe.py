"""Side requests beside a completion: server limits, and bounded JSON look-ups.

`probe_server_limits` asks llama.cpp's ``GET /props`` for its context size and
slot count; `_side_request` is the one bounded, never-raising request a backend
makes beside its completions (a probe, a cost lookup, an abort). Every one is
bounded in total by the probe timeout (or its own limit), even against a
server that accepts and never answers, or trickles.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, ClassVar, Literal

from .counts import is_positive_int
from .redact import Redactor
from .transport import Exchange, Timeouts, Transport, classify_exception, decode_body, parse_json
from .urls import join_url, server_root

__all__ = ["SideRequests"]


log = logging.getLogger("llmchat")


class SideRequests:
    """`OpenAICommon`'s side requests: `probe_server_limits` and the bounded JSON calls.

    A mixin: it uses the backend's `api_url`, `timeouts`, `max_response_bytes`,
    `probe_source`, transport, headers and redactor.

    Shared internals for a subclass's own HTTP calls beside the completions
    (a server probe, a cost lookup such as OpenRouter's ``GET /generation``).
    They are not override points: a subclass calls them, and never `requests`
    directly, so its calls get the backend's transport, headers, timeouts,
    size bound and key scrubbing.

    - `_server_root()`: the `api_url` without its ``/v1``;
      `_url(route, at_root=)`: a route under `api_url` or the server root.
    - `_probe_json(path)` / `_probe_json_array(path)`: one bounded GET at the
      server root answering a JSON object / array: `(payload, None)` or
      `(None, note)`; never raises.
    - `_request_json(method, url, data, label=, limit=)`: any bounded side
      request answering a JSON object; `_side_request` adds the HTTP status.
    - `_decode_json_body(data)`: bytes read as the completion paths read a
      body (strict UTF-8, a leading BOM dropped, llmchat's one JSON reader
      and its depth rule); None when that gives no JSON.
    """

    api_url: str
    timeouts: Timeouts
    max_response_bytes: int | None
    probe_source: ClassVar[str]
    abort_path: ClassVar[str | None]
    _transport: Transport

    def _get_api_headers(self) -> dict[str, str]:
        raise NotImplementedError

    def _redactor(self) -> Redactor:
        raise NotImplementedError

    def _post_abort(self) -> None:
        """Best effort: tell the server to stop generating; errors are logged, never raised."""
        path = self.abort_path or ""
        try:
            _, note = self._request_json(
                "POST", self._url(path, at_root=True), b"{}", label=f"POST {path}"
            )
        except Exception as exc:  # a headers hook; its text could quote the key
            log.debug("%s abort failed: %s", type(self).__name__, self._redactor().exception(exc))
            return
        if note is not None:
            log.debug("%s abort: %s", type(self).__name__, note)

    def probe_server_limits(self) -> dict[str, Any]:
        """Ask the server for its context size and slot count; never raises.

        llama.cpp answers ``GET /props`` (``default_generation_settings.n_ctx``
        per slot, ``total_slots``). Returns ``{"source", "context_length",
        "slots"}``, or ``{"source", "note"}`` saying why nothing was learnt.
        Takes at most `server_probe_timeout` seconds in total.
        """
        payload, note = self._probe_json("/props")
        if note is not None:
            return {"source": self.probe_source, "note": note}
        settings = payload.get("default_generation_settings") if payload else None
        n_ctx = settings.get("n_ctx") if isinstance(settings, Mapping) else None
        if not is_positive_int(n_ctx):
            return {
                "source": self.probe_source,
                "note": "GET /props has no default_generation_settings.n_ctx",
            }
        result: dict[str, Any] = {"source": self.probe_source, "context_length": n_ctx}
        slots = payload.get("total_slots")
        if is_positive_int(slots):
            result["slots"] = slots
        return result

    def _server_root(self) -> str:
        """The api_url without its trailing ``/v1``: where a server's own routes live."""
        return server_root(self.api_url)

    def _url(self, route: str, *, at_root: bool = False) -> str:
        """The URL of `route` under `api_url` (or the server root), before any query.

        A shared internal for a subclass's own side requests.
        """
        return join_url(self._server_root() if at_root else self.api_url, route)

    def _probe_json(self, path: str) -> tuple[Any, str | None]:
        """One bounded GET of JSON at the server root: `(payload, None)` or `(None, note)`.

        Never raises, and never takes longer than the probe timeout in total,
        even against a server that accepts and never answers, or trickles.
        A shared internal for a subclass's own probe.
        """
        return self._request_json("GET", self._url(path, at_root=True), label=f"GET {path}")

    def _probe_json_array(self, path: str) -> tuple[list[Any] | None, str | None]:
        """One bounded GET of a JSON array at the server root: `(items, None)` or `(None, note)`.

        The same bounds and guarantees as `_probe_json` (never raises). A
        shared internal for a subclass's own probe.
        """
        url = self._url(path, at_root=True)
        _, payload, note = self._side_request("GET", url, label=f"GET {path}", shape="array")
        return payload, note

    @staticmethod
    def _decode_json_body(data: bytes) -> Any:
        """`data` read as the completion paths read a body; None when it is not JSON.

        Strict UTF-8 with a leading BOM dropped (a body that is not UTF-8 is
        not guessed at), then llmchat's one JSON reader (`fastjson.loads`, its
        depth rule included). A shared internal for a subclass that reads a
        body of its own.
        """
        try:
            text = data.decode("utf-8-sig")
        except UnicodeDecodeError:
            return None
        return parse_json(text)

    def _request_json(
        self,
        method: str,
        url: str,
        data: bytes | None = None,
        *,
        label: str,
        limit: float | None = None,
    ) -> tuple[Any, str | None]:
        """One bounded side request answering JSON: `(payload, None)` or `(None, note)`.

        Sent with the backend's headers; bounded in total by `limit` (default:
        the probe timeout); never raises. For a subclass's own calls beside the
        completion (a cost lookup, an abort).
        """
        _, payload, note = self._side_request(method, url, data, label=label, limit=limit)
        return payload, note

    def _side_request(
        self,
        method: str,
        url: str,
        data: bytes | None = None,
        *,
        shape: Literal["object", "array"] = "object",
        label: str,
        limit: float | None = None,
    ) -> tuple[int | None, Any, str | None]:
        """`_request_json` with the HTTP status too: `(status, payload, note)`; never raises.

        `status` is None when no HTTP answer came (refused, timed out, cut off),
        which tells an unreachable server from one without the route. `shape`
        is what the payload must be (a JSON object, or an array); anything else
        is a note.
        """
        timeouts = self.timeouts
        limit = timeouts.probe if limit is None else limit
        exchange = Exchange()
        exchange.arm_deadline(limit)
        headers = self._get_api_headers()
        if data is None:
            headers = {k: v for k, v in headers.items() if k != "Content-Type"}
        http = None
        try:
            http = self._transport.open(
                method,
                url,
                headers,
                data,
                exchange,
                connect_timeout=_min_limit(timeouts.connect, limit),
                read_timeout=_min_limit(timeouts.headers, limit),
            )
            body = http.read(self.max_response_bytes)
        except Exception as exc:
            _, message = classify_exception(
                exc, exchange=exchange, after_headers=http is not None, timeouts=timeouts
            )
            return None, None, self._redactor().text(f"{label} failed: {message}")
        finally:
            exchange.finish()
            if http is not None:
                http.close()
        status = http.status_code
        if status != 200:
            return status, None, f"{label} answered HTTP {status}"
        payload = parse_json(decode_body(body))
        expected = list if shape == "array" else Mapping
        if not isinstance(payload, expected):
            return status, None, f"{label} did not answer a JSON {shape}"
        return status, payload, None


def _min_limit(a: float | None, b: float | None) -> float | None:
    if a is None:
        return b
    return a if b is None else min(a, b)
