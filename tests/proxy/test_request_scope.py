"""A request's ``x-request-id`` on every line the proxy logs for it, streamed lines too."""

from __future__ import annotations

import io
import json
import logging
import threading
from collections.abc import Iterator
from typing import Any

import pytest
import requests

from llmchat import OpenAICommon
from llmchat.proxy import make_app
from llmchat.proxy.request_scope import (
    NO_REQUEST,
    RequestIdFilter,
    RequestScope,
    current_request_id,
    enter,
    leave,
)
from llmchat.proxy.routing.config import Tier
from llmchat.proxy.routing.upstream import RoutedUpstream
from llmchat.testing import ChatResponder, ScriptedServer

from ..support.proxy import proxy_over
from .routing.nodes_support import closed_port_url, config, node_config, nodes, routed_proxy
from .support import cut_stream

WAIT = 10.0
MESSAGES = [{"role": "user", "content": "hi"}]


class Lines(logging.Handler):
    """The ``llmchat.proxy`` records, stamped by the filter the command line installs."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.addFilter(RequestIdFilter())
        self.records: list[logging.LogRecord] = []
        self._cond = threading.Condition()

    def emit(self, record: logging.LogRecord) -> None:
        with self._cond:
            self.records.append(record)
            self._cond.notify_all()

    def ids(self, text: str) -> list[str]:
        """The request id of each record whose message holds `text`, once there is one
        (a line the server logs after the answer may come just after the client read it)."""

        def found() -> list[str]:
            return [r.request_id for r in self.records if text in r.getMessage()]  # type: ignore[attr-defined]

        with self._cond:
            self._cond.wait_for(found, WAIT)
            return found()


@pytest.fixture
def records() -> Iterator[Lines]:
    logger = logging.getLogger("llmchat.proxy")
    lines, level = Lines(), logger.level
    logger.addHandler(lines)
    logger.setLevel(logging.INFO)
    try:
        yield lines
    finally:
        logger.removeHandler(lines)
        logger.setLevel(level)


def test_a_refusal_in_the_app_call_is_logged_with_the_clients_id(
    records: Lines,
) -> None:
    with proxy_over(ChatResponder()) as (url, _):
        answer = requests.post(
            url + "/v1/messages",
            json={"model": "m", "messages": "not a list", "max_tokens": 5},
            headers={"x-request-id": "refused-1"},
            timeout=WAIT,
        )
    assert answer.status_code == 400
    assert records.ids("refused a request (HTTP 400)") == ["refused-1"]
    # The server's access line, logged after the answer, names the answer's id too.
    assert records.ids('"POST /v1/messages HTTP/1.1" 400') == ["refused-1"]


def test_an_upstream_failure_mid_stream_is_logged_with_the_id(
    records: Lines,
) -> None:
    with proxy_over([cut_stream()]) as (url, _):
        with requests.post(
            url + "/api/chat",
            json={"model": "m", "messages": MESSAGES, "stream": True},
            headers={"x-request-id": "stream-cut-7"},
            stream=True,
            timeout=WAIT,
        ) as answer:
            assert answer.status_code == 200  # the stream had started: the failure is a line
            lines = [json.loads(line) for line in answer.iter_lines() if line]
    assert "error" in lines[-1]
    # Logged while the server iterated the body, after the app call had returned.
    assert records.ids("upstream failed") == ["stream-cut-7"]


def test_a_routing_ejection_is_logged_with_the_id_of_the_request_that_saw_it(
    records: Lines,
) -> None:
    with nodes("b") as (b,):
        routed = RoutedUpstream(
            config(
                [node_config("dead", closed_port_url()), node_config(b)],
                {"m": [Tier("x", ("dead",)), Tier("x", ("b",))]},
            )
        )
        with routed_proxy(routed) as (url, _):
            answer = requests.post(
                url + "/api/chat",
                json={"model": "m", "messages": MESSAGES, "stream": False},
                headers={"x-request-id": "routed-3"},
                timeout=WAIT,
            )
    assert answer.status_code == 200 and answer.headers["x-llmchat-node"] == "b"
    assert records.ids("node dead ejected") == ["routed-3"]


def _start_response(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> None:
    pass


def _environ(path: str, body: dict[str, Any], request_id: str) -> dict[str, Any]:
    data = json.dumps(body).encode()
    return {
        "REQUEST_METHOD": "POST",
        "PATH_INFO": path,
        "CONTENT_LENGTH": str(len(data)),
        "CONTENT_TYPE": "application/json",
        "wsgi.input": io.BytesIO(data),
        "HTTP_X_REQUEST_ID": request_id,
    }


def test_the_scope_lasts_from_the_app_call_to_the_streamed_bodys_close() -> None:
    with ScriptedServer(ChatResponder("a streamed answer", chunk_size=3)) as upstream_url:
        with OpenAICommon(upstream_url) as backend:
            app = make_app(backend)
            body = app(
                _environ("/api/chat", {"model": "m", "messages": MESSAGES}, "scoped-1"),
                _start_response,
            )
            seen = []
            for _ in body:  # as a WSGI server does: after the call returned
                seen.append(current_request_id())
            assert seen and set(seen) == {"scoped-1"}
            body.close()  # type: ignore[attr-defined]
            assert current_request_id() == NO_REQUEST
            # A whole answer leaves the scope before the call returns.
            whole = app(
                _environ("/api/chat", {"model": "m", "messages": MESSAGES, "stream": False}, "w-2"),
                _start_response,
            )
            assert isinstance(whole, list) and current_request_id() == NO_REQUEST
            app.close()


def test_a_record_outside_any_request_gets_a_dash_and_one_given_keeps_its_own() -> None:
    stamp = RequestIdFilter()
    plain = logging.LogRecord("llmchat.proxy", logging.INFO, __file__, 1, "m", None, None)
    assert stamp.filter(plain) and plain.request_id == NO_REQUEST  # type: ignore[attr-defined]
    token = enter(RequestScope("outer"))
    try:
        inner = enter(RequestScope("inner"))
        leave(inner)
        assert current_request_id() == "outer"  # leaving restores the one before
        given = logging.LogRecord("x", logging.INFO, __file__, 1, "m", None, None)
        given.request_id = "mine"
        stamp.filter(given)
        assert given.request_id == "mine"  # type: ignore[attr-defined]
    finally:
        leave(token)
    assert current_request_id() == NO_REQUEST
