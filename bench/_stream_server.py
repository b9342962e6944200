"""A bench's stream server in its own process: `llmchat.testing` Replies, another interpreter.

    python bench/_stream_server.py PORT MODULE:FUNCTION [JSON_KWARGS]   # serves until stdin closes

``MODULE.FUNCTION(**kwargs)`` (a module in bench/) returns the router: a callable
taking a `Request` (``path``, ``body``, ``json()``) and returning a
`llmchat.testing.Reply` made of `Write` steps. The server plays it as
`ScriptedServer` does — the head in one send, then every `Write` in its own send
(one HTTP chunk each with chunked framing), then the last chunk — but from its
own process, so a throughput bench's client never shares an interpreter (or its
GIL) with the server. A Reply's bytes are framed once and kept; a thread per
connection, HTTP/1.1 keep-alive.

``GET /_bench/log?since=N`` answers, as JSON, what the server did for every
request from the N-th on: path, connection number, and the `time.monotonic()`
(system-wide on Linux, so comparable with the client's) of the headers and of the
last body write, and the number of body writes.
"""

from __future__ import annotations

import importlib
import json
import socket
import sys
import threading
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import _report  # noqa: E402,F401  (puts the repository root on sys.path, litellm offline)
from _load_upstream import _read_request  # noqa: E402

LOG_PATH = "/_bench/log"
_LAST_CHUNK = b"0\r\n\r\n"


class Request:
    """What a router sees of one request."""

    def __init__(self, method: str, path: str, body: bytes) -> None:
        self.method, self.path, self.body = method, path, body

    def json(self) -> Any:
        """The body parsed as JSON; None when it is empty or not JSON."""
        try:
            return json.loads(self.body) if self.body else None
        except ValueError:
            return None


class Played:
    """One Reply's bytes, framed once: the head and each body send."""

    def __init__(self, reply: Any) -> None:
        from llmchat.testing import Write
        from llmchat.testing.respond import reply_head

        if reply.before_headers or any(not isinstance(s, Write) for s in reply.body_steps):
            raise ValueError("the stream server plays only Replies made of Write steps")
        self.chunked = reply.framing == "chunked"
        if reply.framing == "close":
            raise ValueError("the stream server keeps connections alive: no close framing")
        self.head = reply_head(reply, keep_alive=True)
        data = [step.data for step in reply.body_steps if step.data]
        self.sends = [b"%x\r\n%s\r\n" % (len(d), d) for d in data] if self.chunked else data


class Log:
    """What the server did per request, for ``GET /_bench/log``."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.entries: list[dict[str, Any]] = []

    def add(self, entry: dict[str, Any]) -> None:
        with self.lock:
            self.entries.append(entry)

    def since(self, index: int) -> bytes:
        with self.lock:
            return json.dumps(self.entries[index:]).encode()


class Handler:
    """Serves one connection after another, each in its own thread."""

    def __init__(self, router: Any) -> None:
        self.router = router
        self.log = Log()
        self.cache: dict[int, tuple[Any, Played]] = {}
        self.connections = 0
        self.lock = threading.Lock()

    def played(self, reply: Any) -> Played:
        kept = self.cache.get(id(reply))
        if kept is None or kept[0] is not reply:  # a new object reusing a freed id
            kept = (reply, Played(reply))
            self.cache[id(reply)] = kept
        return kept[1]

    def serve(self, sock: socket.socket) -> None:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        with self.lock:
            self.connections += 1
            connection = self.connections
        buffer = b""
        try:
            while True:
                request = _read_request(sock, buffer)
                if request is None:
                    return
                head, body, buffer = request
                method, path = head.split(b" ", 2)[:2]
                self.answer(sock, connection, method.decode(), path.decode(), body)
        except OSError:
            return  # the client left mid-answer
        finally:
            sock.close()

    def answer(
        self, sock: socket.socket, connection: int, method: str, path: str, body: bytes
    ) -> None:
        if path.startswith(LOG_PATH):
            since = int(path.partition("since=")[2] or 0)
            payload = self.log.since(since)
            sock.sendall(
                b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                b"Content-Length: %d\r\n\r\n%s" % (len(payload), payload)
            )
            return
        played = self.played(self.router(Request(method, path, body)))
        send = sock.sendall
        send(played.head)
        headers_at = time.monotonic()
        for piece in played.sends:
            send(piece)  # one write per step, as real servers write events
        last_at = time.monotonic()
        if played.chunked:
            send(_LAST_CHUNK)
        self.log.add(
            {
                "path": path,
                "connection": connection,
                "headers_at": headers_at,
                "last_write_at": last_at,
                "writes": len(played.sends),
            }
        )


def main() -> int:
    port, target = int(sys.argv[1]), sys.argv[2]
    kwargs = json.loads(sys.argv[3]) if len(sys.argv) > 3 else {}
    module, _, function = target.partition(":")
    router = getattr(importlib.import_module(module), function)(**kwargs)
    handler = Handler(router)
    listener = socket.create_server(("127.0.0.1", port), backlog=1024)

    def accept() -> None:
        while True:
            sock, _ = listener.accept()
            threading.Thread(target=handler.serve, args=(sock,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    print(listener.getsockname()[1], flush=True)
    sys.stdin.read()  # the bench closes our stdin (or dies) to stop us
    return 0


if __name__ == "__main__":
    sys.exit(main())
