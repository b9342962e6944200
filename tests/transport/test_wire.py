"""Bytes on the wire: Content-Encoding, size limits, memory per frame, strict UTF-8.

Every test runs over real sockets against the loopback server. Nothing sleeps:
a stream that must be seen arriving waits on events the test sets.
"""

from __future__ import annotations

import dataclasses
import json
import threading
import tracemalloc
import zlib
from typing import Any, cast

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from llmchat import OpenAICommon
from llmchat.backends.koboldcpp import KoboldCpp
from llmchat.backends.openai_common import USER_AGENT
from llmchat.backends.openrouter import OpenRouter
from llmchat.response import Response
from llmchat.testing import ChatResponder, Reply, ScriptedServer, Stall, Step, WaitFor, Write

HI = [{"role": "user", "content": "Hi"}]
ENCODINGS = ["gzip", "deflate", "br", "zstd"]
WAIT = 10.0


def chat_body(content: str = "Grüße, wire", finish: str = "stop") -> dict[str, Any]:
    return {
        "id": "chatcmpl-w",
        "object": "chat.completion",
        "model": "m",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "finish_reason": finish,
            }
        ],
        "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5},
    }


def delta(content: str | None = None, finish: str | None = None) -> dict[str, Any]:
    d: dict[str, Any] = {} if content is None else {"content": content}
    return {
        "id": "chatcmpl-s",
        "object": "chat.completion.chunk",
        "model": "m",
        "choices": [{"index": 0, "delta": d, "finish_reason": finish}],
    }


USAGE = {
    "id": "chatcmpl-s",
    "object": "chat.completion.chunk",
    "model": "m",
    "choices": [],
    "usage": {"prompt_tokens": 4, "completion_tokens": 3, "total_tokens": 7},
}
EVENTS = [delta("Grü"), delta("ße, "), delta("stream"), delta(None, "stop"), USAGE]


def frame(event: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(event).encode() + b"\n\n"


def summary(r: Response) -> tuple[Any, ...]:
    return (
        r.is_success,
        r.error_class,
        r.err,
        r.msg,
        r.finish_reason,
        r.prompt_tokens,
        r.completion_tokens,
        r.model,
        r.id,
        [c.content for c in r],
    )


def backend(server: ScriptedServer, **kwargs: Any) -> OpenAICommon:
    return OpenAICommon(server.url, **kwargs)


def stream(b: OpenAICommon) -> Response:
    r = b.chat_completion_stream(HI)
    assert r.wait(WAIT)
    return r


# -- Content-Encoding ----------------------------------------------------------


@pytest.mark.parametrize("framing", ["length", "chunked", "close"])
@pytest.mark.parametrize("encoding", ENCODINGS)
def test_every_encoding_gives_the_same_blocking_response(
    server: ScriptedServer, encoding: str, framing: str
) -> None:
    server.set_script(
        [
            Reply.json(chat_body(), framing=framing),
            Reply.json(chat_body(), framing=framing, content_encoding=encoding),
        ]
    )
    b = backend(server)
    plain, packed = b.chat_completion(HI), b.chat_completion(HI)
    assert plain.is_success and plain.msg == "Grüße, wire"
    assert summary(packed) == summary(plain)
    # A blocking request keeps requests' default Accept-Encoding, br and zstd included.
    accepted = server.requests[1].headers["Accept-Encoding"]
    assert {"gzip", "deflate", "br", "zstd"} <= {t.strip() for t in accepted.split(",")}


@pytest.mark.parametrize("framing", ["chunked", "close"])
@pytest.mark.parametrize("encoding", ENCODINGS)
def test_every_encoding_gives_the_same_stream(
    server: ScriptedServer, encoding: str, framing: str
) -> None:
    server.set_script(
        [
            Reply.sse(EVENTS, framing=framing),  # type: ignore[arg-type]
            Reply.sse(EVENTS, framing=framing, content_encoding=encoding),  # type: ignore[arg-type]
        ]
    )
    b = backend(server)
    plain, packed = stream(b), stream(b)
    assert plain.is_success and plain.msg == "Grüße, stream" and plain.completion_tokens == 3
    assert summary(packed) == summary(plain)


def test_a_stream_asks_for_identity_and_a_hooks_header_wins(server: ScriptedServer) -> None:
    server.set_script(Reply.sse(EVENTS))
    b = backend(server)
    assert b.prepare_chat_request(HI, stream=True).headers["Accept-Encoding"] == "identity"
    assert "Accept-Encoding" not in b.prepare_chat_request(HI).headers
    assert stream(b).is_success
    assert server.requests[0].headers["Accept-Encoding"] == "identity"

    class Gzipped(OpenAICommon):
        def _get_api_headers(self) -> dict[str, str]:
            return {**super()._get_api_headers(), "accept-encoding": "gzip"}

    mine = Gzipped(server.url)
    assert mine.prepare_chat_request(HI, stream=True).headers == {
        "Content-Type": "application/json",
        "User-Agent": USER_AGENT,
        "accept-encoding": "gzip",
    }
    assert stream(mine).is_success
    assert server.requests[1].headers["Accept-Encoding"] == "gzip"


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_a_compressed_stream_still_arrives_incrementally(
    server: ScriptedServer, encoding: str
) -> None:
    go_on = threading.Event()
    steps: list[Step] = [Write(frame(delta("first"))), WaitFor(go_on, WAIT)]
    steps += [Write(frame(delta(" then", "stop"))), Write(b"data: [DONE]\n\n")]
    server.set_script(
        Reply(
            200,
            {"Content-Type": "text/event-stream"},
            framing="chunked",
            steps=steps,
            content_encoding=encoding,  # type: ignore[arg-type]
        )
    )
    r = backend(server).chat_completion_stream(HI)
    chunks = iter(r)
    first = next(chunks)  # arrives while the server still holds the rest back
    assert first.content == "first" and not go_on.is_set() and not r.is_done
    go_on.set()
    assert [c.content for c in chunks] == [" then"]
    assert r.is_success and r.msg == "first then"


@pytest.mark.parametrize("streamed", [False, True])
def test_corrupt_gzip_is_class_response(server: ScriptedServer, streamed: bool) -> None:
    good = zlib.compressobj(wbits=31)
    start = good.compress(frame(delta("kept "))) + good.flush(zlib.Z_SYNC_FLUSH)
    content_type = "text/event-stream" if streamed else "application/json"
    server.set_script(
        Reply(
            200,
            {"Content-Type": content_type, "Content-Encoding": "gzip"},
            framing="chunked",
            steps=[Write(start), Write(b"\xff" * 64 + b"not deflate at all")],
        )
    )
    b = backend(server)
    r = stream(b) if streamed else b.chat_completion(HI)
    assert (r.is_success, r.error_class) == (False, "response")
    assert r.err is not None and r.err.startswith("Undecodable body") and "gzip" in r.err
    if streamed:
        assert r.msg == "kept "


def _gzip_split(data: bytes) -> bytes:
    z = zlib.compressobj(wbits=31)
    return z.compress(data) + z.flush()


STREAM_BYTES = b"".join(frame(e) for e in EVENTS) + b"data: [DONE]\n\n"
GZIPPED_STREAM = _gzip_split(STREAM_BYTES)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(cut=st.integers(min_value=1, max_value=len(GZIPPED_STREAM) - 1))
def test_a_gzip_stream_split_at_any_byte_reads_the_same(server: ScriptedServer, cut: int) -> None:
    server.set_script(
        Reply(
            200,
            {"Content-Type": "text/event-stream", "Content-Encoding": "gzip"},
            framing="chunked",
            steps=[Write(GZIPPED_STREAM[:cut]), Write(GZIPPED_STREAM[cut:])],
        )
    )
    r = stream(backend(server))
    assert (r.is_success, r.msg, r.completion_tokens) == (True, "Grüße, stream", 3)


# -- size limits --------------------------------------------------------------


def test_limits_are_validated_and_carried_by_clone() -> None:
    b = OpenAICommon("http://127.0.0.1:9/v1")
    assert (b.max_response_bytes, b.max_event_bytes, b.keep_raw) == (64 * 2**20, 8 * 2**20, False)
    for name in ("max_response_bytes", "max_event_bytes"):
        with pytest.raises(ValueError, match=name):
            OpenAICommon("http://127.0.0.1:9/v1", **cast(Any, {name: 0}))
        for bad in ("1", 1.5, True):
            with pytest.raises(TypeError, match=name):
                OpenAICommon("http://127.0.0.1:9/v1", **cast(Any, {name: bad}))
    with pytest.raises(TypeError, match="keep_raw"):
        OpenAICommon("http://127.0.0.1:9/v1", keep_raw=cast(bool, 1))
    c = b.clone(max_response_bytes=None, max_event_bytes=10, keep_raw=True)
    assert (c.max_response_bytes, c.max_event_bytes, c.keep_raw) == (None, 10, True)
    assert c.clone().max_event_bytes == 10
    kobold = KoboldCpp("http://127.0.0.1:9/v1", max_response_bytes=5, keep_raw=True)
    assert (kobold.max_response_bytes, kobold.clone().keep_raw) == (5, True)
    router = OpenRouter(api_url="http://127.0.0.1:9/v1", api_key="k", max_event_bytes=7)
    assert router.clone().max_event_bytes == 7


def test_a_blocking_body_over_the_limit_fails_naming_it(server: ScriptedServer) -> None:
    server.set_script(Reply.json(chat_body("x" * 5000)))
    r = backend(server, max_response_bytes=4096).chat_completion(HI)
    assert (r.is_success, r.error_class) == (False, "response")
    assert r.err == "Response body larger than max_response_bytes (4096 bytes)"
    ok = backend(server, max_response_bytes=None).chat_completion(HI)
    assert ok.is_success and ok.msg == "x" * 5000


def test_a_stream_over_the_total_limit_fails_and_keeps_its_text(server: ScriptedServer) -> None:
    frames: list[Step] = [Write(frame(delta("y" * 100))) for _ in range(50)]
    frames.append(Stall())
    server.set_script(Reply(200, {"Content-Type": "text/event-stream"}, steps=frames))
    r = stream(backend(server, max_response_bytes=2000))
    assert (r.is_success, r.error_class) == (False, "response")
    assert r.err == "Response body larger than max_response_bytes (2000 bytes)"
    assert r.msg and set(r.msg) == {"y"} and len(r.msg) < 2000
    assert server.requests[0].disconnected.wait(WAIT)  # it hung up instead of reading on


def test_one_huge_sse_line_fails_at_once_naming_max_event_bytes(server: ScriptedServer) -> None:
    # The line never ends and the server never closes: only the limit can end this.
    huge = b"data: " + b"z" * 200_000
    steps: list[Step] = [Write(frame(delta("before "))), Write(huge), Stall()]
    server.set_script(Reply(200, {"Content-Type": "text/event-stream"}, steps=steps))
    r = stream(backend(server, max_event_bytes=65536))
    assert (r.is_success, r.error_class) == (False, "response")
    assert r.err == "Stream event larger than max_event_bytes (65536 bytes)"
    assert r.msg == "before "
    assert server.requests[0].disconnected.wait(WAIT)


def test_events_completed_in_the_same_read_as_a_huge_one_are_kept(
    server: ScriptedServer,
) -> None:
    data = frame(delta("a")) + frame(delta("b")) + b"data: " + b"q" * 5000 + b"\n\n"
    server.set_script(Reply(200, {"Content-Type": "text/event-stream"}, steps=[Write(data)]))
    r = stream(backend(server, max_event_bytes=1000))
    assert (r.error_class, r.msg) == ("response", "ab")
    assert "max_event_bytes (1000 bytes)" in (r.err or "")


def _gzip_bomb(decoded: int) -> bytes:
    z = zlib.compressobj(9, wbits=31)
    block = b"\0" * 2**20
    parts = [z.compress(block) for _ in range(decoded // len(block))]
    return b"".join(parts) + z.flush()


@pytest.mark.parametrize("streamed", [False, True])
def test_a_gzip_bomb_meets_the_limit_not_memory(server: ScriptedServer, streamed: bool) -> None:
    bomb = _gzip_bomb(256 * 2**20)  # 256 MiB of zeros in about 250 KB
    assert len(bomb) < 2**20
    content_type = "text/event-stream" if streamed else "application/json"
    server.set_script(
        Reply(200, {"Content-Type": content_type, "Content-Encoding": "gzip"}, body=bomb)
    )
    b = backend(server, max_response_bytes=2**20, max_event_bytes=None)
    tracemalloc.start()
    try:
        r = stream(b) if streamed else b.chat_completion(HI)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert (r.error_class, r.err) == (
        "response",
        "Response body larger than max_response_bytes (1048576 bytes)",
    )
    assert peak < 16 * 2**20  # bounded by the limit, nowhere near the decoded 256 MiB


# -- memory per frame ------------------------------------------------------------


@pytest.mark.parametrize("keep_raw", [False, True])
def test_streamed_chunks_keep_raw_only_when_asked(server: ScriptedServer, keep_raw: bool) -> None:
    server.set_script([Reply.sse(EVENTS), Reply.json(chat_body())])
    b = backend(server, keep_raw=keep_raw)
    r = stream(b)
    chunks = list(r)
    assert r.is_success and r.id == "chatcmpl-s" and len(chunks) == 5
    if keep_raw:
        assert [c.raw for c in chunks] == [json.loads(json.dumps(e)) for e in EVENTS]
    else:
        assert all(c.raw is None for c in chunks)
    [whole] = list(b.chat_completion(HI))  # the one blocking chunk keeps its payload either way
    assert whole.raw == chat_body()


def test_chunk_has_slots() -> None:
    from llmchat.chunk import Chunk

    assert not hasattr(Chunk(""), "__dict__")


# -- UTF-8 ---------------------------------------------------------------------


def test_a_stream_frame_that_is_not_utf8_fails_the_stream(server: ScriptedServer) -> None:
    bad = b'data: {"choices":[{"index":0,"delta":{"content":"caf\xe9"}}]}\n\n'
    frames = [frame(delta("one ")), bad, frame(delta("two", "stop")), b"data: [DONE]\n\n"]
    server.set_script(
        Reply(200, {"Content-Type": "text/event-stream"}, steps=[Write(f) for f in frames])
    )
    r = stream(backend(server))
    assert (r.is_success, r.error_class) == (False, "response")
    assert r.err == "1 stream frame(s) were not valid UTF-8; their text was lost"
    assert r.msg == "one two" and r.dropped_frames == 1


def test_a_blocking_body_that_is_not_utf8_fails(server: ScriptedServer) -> None:
    body = json.dumps(chat_body("café"), ensure_ascii=False).encode("latin-1")
    server.set_script(Reply(200, None, body))
    r = backend(server).chat_completion(HI)
    assert (r.is_success, r.error_class, r.err) == (
        False,
        "response",
        "Response body is not valid UTF-8",
    )


def test_an_error_body_that_is_not_utf8_still_gives_its_message(server: ScriptedServer) -> None:
    body = b'{"error": {"message": "bad caf\xe9"}}'
    server.set_script(Reply(500, None, body))
    r = backend(server).chat_completion(HI)
    assert (r.error_class, r.error_status) == ("http", 500)
    assert "bad caf\ufffd" in (r.err or "")


def test_a_leading_bom_is_accepted(server: ScriptedServer) -> None:
    bom = b"\xef\xbb\xbf"
    server.set_script(
        [
            Reply(200, None, bom + json.dumps(chat_body()).encode()),
            Reply(
                200,
                {"Content-Type": "text/event-stream"},
                steps=[Write(bom + STREAM_BYTES)],
            ),
        ]
    )
    b = backend(server)
    assert b.chat_completion(HI).msg == "Grüße, wire"
    r = stream(b)
    assert r.is_success and r.msg == "Grüße, stream"


# -- the loopback server's replies stay data --------------------------------------


def test_a_compressed_reply_answers_many_requests_alike(server: ScriptedServer) -> None:
    reply = Reply.json(chat_body(), content_encoding="gzip")
    assert dataclasses.replace(reply).body_steps == reply.body_steps
    server.set_script(reply)
    b = backend(server)
    assert b.chat_completion(HI).msg == b.chat_completion(HI).msg == "Grüße, wire"


def test_chat_responder_through_a_compressing_wrapper(server: ScriptedServer) -> None:
    responder = ChatResponder("zipped")
    server.set_script(lambda req: dataclasses.replace(responder(req), content_encoding="zstd"))
    b = backend(server)
    assert b.chat_completion(HI).msg == "zipped"
    assert stream(b).msg == "zipped"
