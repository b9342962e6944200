"""transport: timeouts and header redaction."""

from __future__ import annotations

import pytest

from llmchat.transport import Timeouts, redact_headers


def test_redaction_is_case_insensitive_and_copies() -> None:
    headers = {"authorization": "Bearer k", "X-Api-Key": "k", "Accept": "x"}
    assert redact_headers(headers) == {
        "authorization": "[redacted]",
        "X-Api-Key": "[redacted]",
        "Accept": "x",
    }
    assert headers["authorization"] == "Bearer k"


def test_timeouts_defaults_and_repr() -> None:
    timeouts = Timeouts()
    assert (timeouts.connect, timeouts.headers, timeouts.request) == (30.0, 60.0, 1800.0)
    assert "finish_grace=10.0" in repr(timeouts)


@pytest.mark.parametrize("value", [0, -1.0, float("nan"), float("inf")])
def test_timeouts_refuse_non_positive(value: float) -> None:
    with pytest.raises(ValueError, match="headers_timeout"):
        Timeouts(headers=value)


def test_timeouts_refuse_bool() -> None:
    with pytest.raises(TypeError, match="probe_timeout"):
        Timeouts(probe=True)


# -- classify_exception: the table, row by row ---------------------------------

import socket  # noqa: E402

import requests  # noqa: E402
from urllib3 import exceptions as u3  # noqa: E402

from llmchat.transport import Exchange, classify_exception, decode_body, parse_json  # noqa: E402


def _refused() -> requests.exceptions.ConnectionError:
    """What requests really raises for a refused port: three layers deep."""
    inner = u3.NewConnectionError(None, "Failed to establish a new connection")  # type: ignore[arg-type]
    inner.__cause__ = ConnectionRefusedError(111, "Connection refused")
    return requests.exceptions.ConnectionError(u3.MaxRetryError(None, "/v1", reason=inner))  # type: ignore[arg-type]


ROWS = [
    (requests.exceptions.ConnectTimeout("x"), False, "connection", "Could not connect within 30s"),
    (u3.ConnectTimeoutError("x"), False, "connection", "Could not connect"),
    (requests.exceptions.SSLError("bad cert"), False, "connection", "TLS failure: bad cert"),
    (requests.exceptions.ProxyError("no proxy"), False, "connection", "Proxy failure"),
    (socket.gaierror(-2, "Name or service not known"), False, "connection", "Could not resolve"),
    (_refused(), False, "connection", "Connection refused"),
    (ConnectionRefusedError(111, "refused"), False, "connection", "Connection refused"),
    (requests.exceptions.ReadTimeout("x"), False, "timeout", "No response headers within 60s"),
    (requests.exceptions.ReadTimeout("x"), True, "timeout", "Body silent for more than 60s"),
    (u3.ReadTimeoutError(None, "/v1", "read timed out"), True, "timeout", "Body silent"),  # type: ignore[arg-type]
    (TimeoutError("timed out"), False, "timeout", "Server silent"),
    (requests.exceptions.ContentDecodingError("gzip"), True, "response", "Undecodable body"),
    (u3.IncompleteRead(10, 90), True, "response", "Body cut off"),
    (requests.exceptions.ChunkedEncodingError("broken"), True, "response", "Body cut off"),
    (u3.ProtocolError("Connection broken"), True, "response", "Body cut off"),
    (
        u3.ProtocolError("Connection aborted", ConnectionResetError(104, "reset")),
        False,
        "connection",
        "Connection reset before a response",
    ),
    (ConnectionResetError(104, "reset"), True, "response", "Body cut off: connection reset"),
    (requests.exceptions.ConnectionError("down"), False, "connection", "Connection failed"),
    (BrokenPipeError(32, "Broken pipe"), False, "connection", "Connection failed"),
    (OSError(5, "io"), True, "response", "Body cut off"),
    (requests.exceptions.InvalidURL("bad"), False, "unknown", "Invalid URL"),
    (requests.exceptions.TooManyRedirects("loop"), False, "unknown", "Too many redirects"),
    (ValueError("strange"), False, "unknown", "ValueError: strange"),
]


@pytest.mark.parametrize(("exc", "after_headers", "error_class", "message"), ROWS)
def test_classify_row(
    exc: BaseException, after_headers: bool, error_class: str, message: str
) -> None:
    got_class, got_message = classify_exception(exc, after_headers=after_headers)
    assert got_class == error_class
    assert message in got_message


def test_deadline_abort_is_a_timeout_whatever_the_exception() -> None:
    exchange = Exchange()
    exchange.deadline_seconds = 2.5
    exchange.abort("deadline")
    error_class, message = classify_exception(
        ConnectionResetError(104, "reset"), exchange=exchange, after_headers=True
    )
    assert (error_class, message) == (
        "timeout",
        "No complete response within request_timeout (2.5s)",
    )


def test_abort_is_idempotent_and_shuts_sockets_down() -> None:
    left, right = socket.socketpair()
    with left, right:
        exchange = Exchange()
        exchange.attach_socket(left)
        exchange.abort("cancel")
        exchange.abort("deadline")
        assert exchange.aborted == "cancel"
        assert right.recv(1) == b""  # the peer sees the shutdown at once
        late, late_peer = socket.socketpair()
        with late, late_peer:
            exchange.attach_socket(late)  # attaches after the abort: shut down at once
            assert late_peer.recv(1) == b""


def test_decode_body_prefers_utf8_then_latin1() -> None:
    assert decode_body("é".encode()) == "é"
    assert decode_body(b"\xef\xbb\xbf{}") == "{}"
    assert decode_body(b"\xe9t\xe9") == "été"


def test_parse_json_ignores_content_type_and_garbage() -> None:
    assert parse_json('{"a": 1}') == {"a": 1}
    assert parse_json("<html>") is None
    assert parse_json("") is None
