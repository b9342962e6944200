"""Time to first byte in ``GET /metrics``: real streamed and blocking answers through a real proxy.

Each face's answers, streamed and whole, are observed in
``llmchat_time_to_first_byte_seconds`` once, with the usage event's
``ttfb_ms``. A stream that the upstream holds after its first piece shows the
first byte was timed when it went out, not when the answer ended.
"""

from __future__ import annotations

import dataclasses
import json
import socket
import threading
from collections.abc import Iterator
from typing import Any

import pytest
import requests

from llmchat import OpenAICommon
from llmchat.testing import ChatResponder, RecordedRequest, Reply, ScriptedServer, WaitFor

from ...support.metrics import scrape, total
from ...support.proxy import UsageSink, running_proxy

pytest.importorskip("prometheus_client", reason="needs the metrics extra")

WAIT = 10.0
FACES = {
    "openai": "/v1/chat/completions",
    "ollama": "/api/chat",
    "anthropic": "/v1/messages",
    "gemini": "/v1beta/models/m:{method}",
}
"""Each face's chat route (Gemini's names its method: `_route`)."""


def _route(face: str, stream: bool) -> str:
    method = "streamGenerateContent?alt=sse" if stream else "generateContent"
    return FACES[face].format(method=method) if face == "gemini" else FACES[face]


class HeldStreams:
    """A `ChatResponder` whose streams pause after their first content frame until released."""

    def __init__(self) -> None:
        self.responder = ChatResponder("Hello from the held upstream.")
        self.release = threading.Event()

    def __call__(self, request: RecordedRequest) -> Reply:
        reply = self.responder(request)
        body = request.json()
        if not (isinstance(body, dict) and body.get("stream")):
            return reply
        steps = list(reply.body_steps)  # the role frame, then the first content frame
        return dataclasses.replace(
            reply, steps=[*steps[:2], WaitFor(self.release, WAIT), *steps[2:]]
        )


def _body(face: str, stream: bool) -> dict[str, Any]:
    if face == "gemini":  # the stream is asked for by the route
        return {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}
    body: dict[str, Any] = {
        "model": "m",
        "messages": [{"role": "user", "content": "hi"}],
        "stream": stream,
    }
    if face == "anthropic":
        body["max_tokens"] = 20
    return body


def _lines(answer: requests.Response) -> Iterator[bytes]:
    return (line for line in answer.iter_lines(chunk_size=1) if line)


def _held_stream(url: str, face: str, upstream: HeldStreams) -> list[bytes]:
    """A streamed chat whose upstream holds after its first piece: the first line is read
    before the upstream is let go, so the answer's end comes after its first byte."""
    upstream.release = threading.Event()
    route, body = _route(face, True), _body(face, True)
    with requests.post(url + route, json=body, stream=True, timeout=WAIT) as got:
        assert got.status_code == 200, got.text
        lines = _lines(got)
        first = [next(lines)]
        upstream.release.set()
        return first + list(lines)


def test_time_to_first_byte_is_observed_for_streamed_and_blocking_answers() -> None:
    upstream = HeldStreams()
    sink = UsageSink()
    with ScriptedServer(upstream) as upstream_url, OpenAICommon(upstream_url) as backend:
        with running_proxy(backend, usage_log=sink) as url:
            for face in FACES:
                whole = requests.post(
                    url + _route(face, False), json=_body(face, False), timeout=WAIT
                )
                assert whole.status_code == 200, whole.text
                assert len(_held_stream(url, face, upstream)) > 2  # its first line, then more
            events = sink.wait(2 * len(FACES))
            samples = scrape(url)
    for event in events:
        assert event["ttfb_ms"] is not None, event
        assert 0 < event["ttfb_ms"] <= event["duration_ms"], event
        assert event["wait_ms"] is None  # one upstream: nothing routed, no admission
        if event["stream"]:
            # Its end waited for the client to read its first line: strictly later.
            assert event["ttfb_ms"] < event["duration_ms"], event
    for face in FACES:
        ttfbs = [e["ttfb_ms"] / 1000 for e in events if e["face"] == face]
        assert total(samples, "llmchat_time_to_first_byte_seconds_count", face=face) == 2
        observed = total(samples, "llmchat_time_to_first_byte_seconds_sum", face=face)
        assert observed == pytest.approx(sum(ttfbs), rel=1e-9, abs=1e-9)
        below_all = total(
            samples, "llmchat_time_to_first_byte_seconds_bucket", face=face, le="+Inf"
        )
        assert below_all == 2
    assert total(samples, "llmchat_admission_wait_seconds_count") == 0


def test_an_error_answer_has_a_first_byte_and_a_client_gone_before_any_has_none() -> None:
    release = threading.Event()
    prefill = Reply.json({}, before_headers=[WaitFor(release, WAIT)])  # never answered in time
    sink = UsageSink()
    with (
        ScriptedServer(lambda request: prefill) as upstream_url,
        OpenAICommon(upstream_url) as backend,
    ):
        with running_proxy(backend, usage_log=sink) as url:
            bad = requests.post(url + FACES["ollama"], data=b"{not json", timeout=WAIT)
            assert bad.status_code == 400
            host, port = url.removeprefix("http://").split(":")
            body = json.dumps(_body("ollama", False)).encode()
            with socket.create_connection((host, int(port)), timeout=WAIT) as sock:
                sock.sendall(
                    b"POST /api/chat HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                    b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
                )
            # Gone in prefill: the proxy cancels the upstream and writes no body.
            refused, gone = sink.wait(2)
            release.set()
            samples = scrape(url)
    assert refused["status"] == 400 and refused["ttfb_ms"] is not None
    assert refused["ttfb_ms"] <= refused["duration_ms"]
    assert (gone["status"], gone["ttfb_ms"]) == (499, None)
    assert total(samples, "llmchat_time_to_first_byte_seconds_count", face="ollama") == 1
    assert total(samples, "llmchat_request_duration_seconds_count", face="ollama") == 2


def test_usage_log_lines_carry_the_timings_and_old_lines_read_without_them(tmp_path: Any) -> None:
    from llmchat.proxy.usage import UsageEvent, UsageLog
    from llmchat.proxy.usage.fields import parse

    log = tmp_path / "usage.jsonl"
    UsageLog(log).emit(
        UsageEvent(request_id="r", face="openai", route="/v1/chat/completions", ttfb_ms=12.5,
                   wait_ms=3.25)
    )  # fmt: skip
    line = json.loads(log.read_text())
    assert (line["ttfb_ms"], line["wait_ms"]) == (12.5, 3.25)
    del line["ttfb_ms"], line["wait_ms"]  # a line an older llmchat wrote
    old = parse(line)
    assert (old["ttfb_ms"], old["wait_ms"]) == (None, None)
    assert parse({**line, "ttfb_ms": 7, "wait_ms": -1.0}) | {} == {**old, "ttfb_ms": 7.0}
    with pytest.raises(ValueError, match="ttfb_ms must be a number or null"):
        parse({**line, "ttfb_ms": "7"})
