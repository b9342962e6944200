"""The Gemini face end to end: generateContent, and both stream framings, over real sockets."""

from __future__ import annotations

import json
from typing import Any

from llmchat.testing import Reply

from .gemini_support import GENERATE, STREAM, gemini_proxy, request, user

HI = {"contents": [user("hi")]}


def _text(chunks: list[dict[str, Any]]) -> str:
    return "".join(
        part.get("text", "")
        for chunk in chunks
        for candidate in chunk.get("candidates", [])
        for part in candidate.get("content", {}).get("parts", [])
    )


def test_generate_content_answers_one_generate_content_response() -> None:
    with gemini_proxy() as (url, _, sink):
        answer = request(url, "POST", GENERATE, HI)
        (event,) = sink.wait(1)
    assert answer.status == 200, answer
    body = answer.json()
    assert _text([body]) == "Hello from loopback."
    assert body["candidates"][0]["finishReason"] == "STOP"
    assert body["usageMetadata"]["candidatesTokenCount"] == event["output_tokens"]
    assert event["ok"] and event["stream"] is False


def test_stream_with_alt_sse_is_server_sent_events() -> None:
    with gemini_proxy() as (url, _, _sink):
        answer = request(url, "POST", f"{STREAM}?alt=sse", HI)
    assert answer.status == 200, answer
    assert answer.headers["content-type"].startswith("text/event-stream")
    events = [
        json.loads(line[len("data: ") :])
        for line in answer.body.decode().splitlines()
        if line.startswith("data: ")
    ]
    assert _text(events) == "Hello from loopback."
    assert events[-1]["candidates"][0]["finishReason"] == "STOP"


def test_stream_without_alt_is_one_json_array() -> None:
    with gemini_proxy() as (url, _, _sink):
        answer = request(url, "POST", "/v1/models/gemini-2.5-pro:streamGenerateContent", HI)
    assert answer.status == 200, answer
    assert answer.headers["content-type"].startswith("application/json")
    chunks = answer.json()
    assert isinstance(chunks, list) and len(chunks) > 1
    assert _text(chunks) == "Hello from loopback."


def test_an_upstream_failure_before_output_is_a_gemini_error_with_a_real_status() -> None:
    def failing(_: Any) -> Reply:
        return Reply.json({"error": {"message": "overloaded"}}, status=503)

    with gemini_proxy(failing) as (url, _, _sink):
        answer = request(url, "POST", f"{STREAM}?alt=sse", HI)
    assert answer.status >= 500, answer
    error = answer.json()["error"]
    assert error["code"] == answer.status and error["status"] in ("UNAVAILABLE", "INTERNAL")
