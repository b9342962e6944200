"""testing: the `Reply` model, `ChatResponder`'s shapes, and Content-Encoding, over real sockets."""

from __future__ import annotations

import json
from typing import Any

import pytest
import requests

from llmchat.testing import (
    ChatResponder,
    Pause,
    Reply,
    ScriptedServer,
    Write,
)

from .support import (
    chunk_payloads,
    connect,
    read_to_eof,
    split_response,
    sse_data,
)

# -- the Reply model -------------------------------------------------------------


def test_sse_reply_frames_events_pauses_and_done() -> None:
    reply = Reply.sse([{"a": "é"}, "event: ping\ndata: x\n\n"], delay=0.5, terminate_last=False)
    assert reply.framing == "chunked"
    assert ("Content-Type", "text/event-stream") in reply.header_pairs
    assert reply.body_steps == (
        Write('data: {"a":"é"}\n\n'),
        Pause(0.5),
        Write("event: ping\ndata: x\n\n"),
        Pause(0.5),
        Write("data: [DONE]\n"),
    )
    kobold = Reply.sse([{"a": 1}], done=False, terminate_last=False)
    assert kobold.body_steps == (Write(b'data: {"a":1}\n'),)


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"body": "x", "steps": [Write("y")]}, ValueError),
        ({"framing": "gzip"}, ValueError),
        ({"status": 42}, ValueError),
        ({"steps": ["not a step"]}, TypeError),
        ({"headers": {"X": "a\r\nInjected: 1"}}, ValueError),
    ],
)
def test_reply_refuses_bad_arguments(kwargs: dict[str, Any], error: type[Exception]) -> None:
    with pytest.raises(error):
        Reply(**kwargs)


def test_script_refuses_a_list_of_non_replies() -> None:
    with pytest.raises(TypeError, match="Reply"):
        ScriptedServer(["text"])  # type: ignore[list-item]


# -- ChatResponder ---------------------------------------------------------------

MESSAGES = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": [{"type": "text", "text": "Say hello please"}]},
]


def post(url: str, body: dict[str, Any]) -> requests.Response:
    with requests.post(url, json=body) as response:
        response.content  # noqa: B018  (read it all before the connection closes)
        return response


def test_chat_responder_blocking_shape() -> None:
    with ScriptedServer(ChatResponder("Hello there", model="m1")) as url:
        response = post(url + "/chat/completions", {"messages": MESSAGES})

    assert response.status_code == 200
    assert response.json() == {
        "id": "chatcmpl-loopback",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": "m1",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "Hello there"},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8},
    }


@pytest.mark.parametrize("include_usage", [True, False])
def test_chat_responder_stream_shape(include_usage: bool) -> None:
    body: dict[str, Any] = {"messages": MESSAGES, "stream": True}
    if include_usage:
        body["stream_options"] = {"include_usage": True}
    responder = ChatResponder("Hello there", chunk_size=4, finish_reason="length")
    with ScriptedServer(responder) as url:
        response = post(url + "/chat/completions", body)

    assert response.headers["Content-Type"] == "text/event-stream"
    payloads = sse_data(response.content)
    assert payloads[-1] == "[DONE]"
    events = [json.loads(payload) for payload in payloads[:-1]]
    assert {event["object"] for event in events} == {"chat.completion.chunk"}
    assert events[0]["choices"][0]["delta"] == {"role": "assistant", "content": None}
    deltas = [
        event["choices"][0]["delta"].get("content") for event in events[1:] if event["choices"]
    ]
    assert "".join(delta for delta in deltas if delta) == "Hello there"
    finish = events[4] if include_usage else events[-1]
    assert finish["choices"] == [{"index": 0, "delta": {}, "finish_reason": "length"}]
    usage_events = [event for event in events if "usage" in event]
    if include_usage:
        assert usage_events == [events[-1]]
        assert events[-1]["choices"] == []
        assert events[-1]["usage"] == {
            "prompt_tokens": 5,
            "completion_tokens": 3,
            "total_tokens": 8,
        }
    else:
        assert usage_events == []


def test_chat_responder_text_completions() -> None:
    with ScriptedServer(ChatResponder("abcdef", chunk_size=3)) as url:
        whole = post(url + "/completions", {"prompt": "one two"}).json()
        stream = post(url + "/completions", {"prompt": "one two", "stream": True})

    assert whole["object"] == "text_completion"
    assert whole["choices"][0]["text"] == "abcdef"
    assert whole["usage"] == {"prompt_tokens": 2, "completion_tokens": 2, "total_tokens": 4}
    payloads = sse_data(stream.content)
    assert payloads[-1] == "[DONE]"
    events = [json.loads(payload) for payload in payloads[:-1]]
    assert [event["choices"][0]["text"] for event in events] == ["abc", "def", ""]
    assert events[-1]["choices"][0]["finish_reason"] == "stop"
    assert events[-1]["usage"]["completion_tokens"] == 2


def test_chat_responder_props_and_models() -> None:
    server = ScriptedServer(ChatResponder(model="tiny", n_ctx=2048, total_slots=3))
    with server, requests.Session() as session:
        with session.get(server.root + "/props") as props:
            assert props.json() == {
                "default_generation_settings": {"n_ctx": 2048},
                "total_slots": 3,
            }
        with session.get(server.url + "/models") as models:
            assert [model["id"] for model in models.json()["data"]] == ["tiny"]


def test_chat_responder_unknown_path_is_llama_cpp_404() -> None:
    with ScriptedServer(ChatResponder()) as url:
        response = post(url + "/embeddings", {"input": "x"})

    assert response.status_code == 404
    assert response.json() == {
        "error": {"code": 404, "message": "File Not Found", "type": "not_found_error"}
    }


def test_chat_responder_requires_messages() -> None:
    with ScriptedServer(ChatResponder()) as url:
        response = post(url + "/chat/completions", {"model": "x"})

    assert response.status_code == 400
    assert response.json()["error"]["message"] == "'messages' is required"


# -- Content-Encoding ---------------------------------------------------------


def _decompressor(encoding: str) -> Any:
    """A streaming decompressor with one `feed(bytes) -> bytes` per encoding."""
    import zlib

    if encoding in ("gzip", "deflate"):
        z = zlib.decompressobj(wbits=31 if encoding == "gzip" else 15)
        return z.decompress
    if encoding == "br":
        import brotli

        return brotli.Decompressor().process
    from urllib3.response import ZstdDecoder  # type: ignore[attr-defined]

    return ZstdDecoder().decompress


@pytest.mark.parametrize("encoding", ["gzip", "deflate", "br", "zstd"])
def test_compressed_reply_sets_the_header_and_flushes_every_write(encoding: str) -> None:
    frames = [b"data: one\n\n", b"data: two\n\n", b"", b"data: three\n\n"]
    reply = Reply(
        200,
        {"Content-Type": "text/event-stream"},
        framing="chunked",
        steps=[Write(f) for f in frames],
        content_encoding=encoding,  # type: ignore[arg-type]
    )
    server = ScriptedServer(reply)
    with server:
        sock = connect(server)
        sock.sendall(b"GET /v1/x HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        status, headers, body = split_response(read_to_eof(sock))
        sock.close()
    assert status.startswith("HTTP/1.1 200") and headers["content-encoding"] == encoding
    payloads = chunk_payloads(body)
    assert len(payloads) == 4  # three non-empty writes, then the compressed stream's end
    feed = _decompressor(encoding)
    # Each write decodes on its own, as it arrives: the flush made it complete.
    assert [feed(p) for p in payloads[:3]] == [f for f in frames if f]


def test_compressed_length_reply_counts_compressed_bytes() -> None:
    import gzip

    reply = Reply.json({"text": "é" * 500}, content_encoding="gzip")
    server = ScriptedServer(reply)
    with server:
        answer = requests.get(server.url + "/x", stream=True, timeout=5)
        wire = answer.raw.read(decode_content=False)
    assert int(answer.headers["Content-Length"]) == len(wire) < 500
    assert json.loads(gzip.decompress(wire)) == {"text": "é" * 500}


def test_compressed_reply_is_frozen_data_and_checks_its_encoding() -> None:
    a = Reply.sse([{"x": 1}], content_encoding="deflate")
    b = Reply.sse([{"x": 1}], content_encoding="deflate")
    assert a == b and a.body_steps == b.body_steps
    assert Reply.sse([{"x": 1}]) != a
    with pytest.raises(ValueError, match="content_encoding"):
        Reply(body="x", content_encoding="lzma")  # type: ignore[arg-type]
    with pytest.raises(AttributeError):
        a.content_encoding = "gzip"  # type: ignore[misc]
