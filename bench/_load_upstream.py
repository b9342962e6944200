"""The load bench's upstream: a small, fast OpenAI-compatible server in its own process.

    python bench/_load_upstream.py [PORT]   # prints its port, serves until stdin closes

A thread per connection, HTTP/1.1 keep-alive, no recording: it must keep up with
every path at once and stay the same for all of them. A prompt containing
`LONG_PROMPT` gets a streamed answer of `DELTAS` content deltas, one HTTP chunk
per SSE event (as real servers write them); any other prompt gets a short
blocking ``chat.completion`` (or a one-delta stream when asked to stream). Each
answer carries the request's tag (``[tag]`` in the prompt) in its first and last
delta, so a client can tell its own stream from anyone else's. ``GET /stats``
answers the counts of requests served so far.
"""

from __future__ import annotations

import json
import re
import socket
import sys
import threading
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_stream import deltas, stream_frames

MODEL = "loopback"
LONG_PROMPT = "Tell me a long story."
SHORT_PROMPT = "Say ok."
DELTAS = 1_000
TAG = re.compile(rb"\[(t[0-9-]+)\]")
_READ = 65_536


_WORDS = deltas(DELTAS)


def _ends(tag: str) -> tuple[str, str]:
    """The first and last deltas of a long answer tagged `tag` (the rest never change)."""
    return f"[{tag}]" + _WORDS[0], _WORDS[-1] + f"[{tag}]"


_MIDDLE_TEXT = "".join(_WORDS[1:-1])


def long_text(tag: str) -> str:
    """The whole text of the long answer to a prompt tagged `tag`: what a client must read."""
    first, last = _ends(tag)
    return first + _MIDDLE_TEXT + last


def short_text(tag: str) -> str:
    """The short answer to a prompt tagged `tag`."""
    return f"ok [{tag}]"


def _chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


def _content(text: str) -> bytes:
    return stream_frames([text])[1]


# Everything but the tagged first and last deltas is framed and chunked once.
_FRAMES = stream_frames(_WORDS)  # role, the deltas, finish, usage, [DONE]
_HEAD = _chunk(_FRAMES[0])
_MIDDLE = [_chunk(frame) for frame in _FRAMES[2:DELTAS]]
_TAIL = [*map(_chunk, _FRAMES[DELTAS + 1 :]), b"0\r\n\r\n"]
_SHORT_TAIL = stream_frames([""])[2:]  # finish, usage, [DONE]
_SSE_HEADERS = (
    b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
    b"Transfer-Encoding: chunked\r\n"
)


class Counts:
    """Requests served, by kind; read by ``GET /stats``."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.by_kind = {"stream": 0, "short": 0, "short-stream": 0, "other": 0}

    def add(self, kind: str) -> None:
        with self.lock:
            self.by_kind[kind] += 1


def _blocking(tag: str) -> bytes:
    return json.dumps(
        {
            "id": "chatcmpl-load",
            "object": "chat.completion",
            "created": 1_700_000_000,
            "model": MODEL,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": short_text(tag)},
                    "finish_reason": "stop",
                }
            ],
            "usage": {"prompt_tokens": 12, "completion_tokens": 3, "total_tokens": 15},
        },
        separators=(",", ":"),
    ).encode()


def _read_request(sock: socket.socket, buffer: bytes) -> tuple[bytes, bytes, bytes] | None:
    """One request from `sock`: (head, body, what follows), or None when the client left."""
    while b"\r\n\r\n" not in buffer:
        data = sock.recv(_READ)
        if not data:
            return None
        buffer += data
    head, _, rest = buffer.partition(b"\r\n\r\n")
    lowered = head.lower()
    match = re.search(rb"\r\ncontent-length:\s*(\d+)", lowered)
    if match:
        size = int(match.group(1))
        while len(rest) < size:
            data = sock.recv(_READ)
            if not data:
                return None
            rest += data
        return head, rest[:size], rest[size:]
    if b"\r\ntransfer-encoding: chunked" in lowered:
        body = b""
        while True:
            while b"\r\n" not in rest:
                data = sock.recv(_READ)
                if not data:
                    return None
                rest += data
            line, _, rest = rest.partition(b"\r\n")
            size = int(line.split(b";")[0], 16)
            while len(rest) < size + 2:
                data = sock.recv(_READ)
                if not data:
                    return None
                rest += data
            if size == 0:
                return head, body, rest[2:]  # no trailers are sent to us
            body, rest = body + rest[:size], rest[size + 2 :]
    return head, b"", rest


def _answer(sock: socket.socket, head: bytes, body: bytes, counts: Counts) -> bool:
    """Answer one request; return whether the connection stays open."""
    request_line = head.split(b"\r\n", 1)[0]
    close = b"\r\nconnection: close" in head.lower() or request_line.endswith(b"HTTP/1.0")
    connection = b"Connection: close\r\n\r\n" if close else b"\r\n"
    if head.startswith(b"GET /stats"):
        with counts.lock:
            payload = json.dumps(counts.by_kind).encode()
        sock.sendall(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n%s%s" % (len(payload), connection, payload)
        )
        return not close
    if not request_line.startswith(b"POST ") or b"/chat/completions " not in request_line:
        counts.add("other")
        payload = b'{"error":{"message":"not found","type":"not_found"}}'
        sock.sendall(
            b"HTTP/1.1 404 Not Found\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n%s%s" % (len(payload), connection, payload)
        )
        return not close
    found = TAG.search(body)
    tag = found.group(1).decode() if found else "t0"
    request: dict[str, Any] = json.loads(body)
    if LONG_PROMPT.encode() in body:
        counts.add("stream")
        first, last = _ends(tag)
        sock.sendall(_SSE_HEADERS + connection + _HEAD)
        sock.sendall(_chunk(_content(first)))
        for piece in _MIDDLE:
            sock.sendall(piece)  # one chunk, one SSE event, one write
        sock.sendall(_chunk(_content(last)))
        for piece in _TAIL:
            sock.sendall(piece)
    elif request.get("stream"):
        counts.add("short-stream")
        sock.sendall(_SSE_HEADERS + connection + _HEAD)
        for frame in (_content(short_text(tag)), *_SHORT_TAIL):
            sock.sendall(_chunk(frame))
        sock.sendall(b"0\r\n\r\n")
    else:
        counts.add("short")
        payload = _blocking(tag)
        sock.sendall(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n%s%s" % (len(payload), connection, payload)
        )
    return not close


def _serve(sock: socket.socket, counts: Counts) -> None:
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    buffer = b""
    try:
        while True:
            request = _read_request(sock, buffer)
            if request is None:
                return
            head, body, buffer = request
            if not _answer(sock, head, body, counts):
                return
    except OSError:
        return  # the client left mid-answer; nothing to tell anyone
    finally:
        sock.close()


def main() -> int:
    port = int(sys.argv[1]) if len(sys.argv) > 1 else 0
    listener = socket.create_server(("127.0.0.1", port), backlog=1024)
    counts = Counts()

    def accept() -> None:
        while True:
            sock, _ = listener.accept()
            threading.Thread(target=_serve, args=(sock, counts), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    print(listener.getsockname()[1], flush=True)
    sys.stdin.read()  # the bench closes our stdin (or dies) to stop us
    return 0


if __name__ == "__main__":
    sys.exit(main())
