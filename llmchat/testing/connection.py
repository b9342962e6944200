"""Serving one accepted connection: read requests, let the server choose replies, play them."""

from __future__ import annotations

import socket
import time
from collections import deque
from collections.abc import Callable
from typing import TypeAlias

from .channel import Channel, Hangup
from .record import RecordedRequest
from .respond import play_reply, reply_head
from .script import Reply
from .wire import BadRequest, ParsedRequest, RequestParser

__all__ = ["Admit", "serve_connection"]

Admit: TypeAlias = Callable[[ParsedRequest, int, float], tuple[RecordedRequest, Reply]]
"""The server's side of a request: `(request, connection_id, received_at)` -> record and reply."""


def serve_connection(
    sock: socket.socket, wake: socket.socket, connection_id: int, admit: Admit
) -> None:
    """Serve requests on `sock` until either side closes it or the server stops.

    Runs in the connection's own thread and closes `sock` on every path.
    Requests are answered one at a time, in order (HTTP/1.1 pipelining);
    malformed bytes get a 400 and the connection is closed.
    """
    channel = Channel(sock, wake)
    parser = RequestParser()
    queued: deque[tuple[ParsedRequest, float]] = deque()
    try:
        while True:
            while not queued:
                parsed = parser.feed(channel.receive())
                now = time.monotonic()
                queued.extend((request, now) for request in parsed)
            request, received_at = queued.popleft()
            record, reply = admit(request, connection_id, received_at)
            if not play_reply(channel, reply, record, keep_alive=request.keep_alive):
                return
    except Hangup:
        return
    except BadRequest as exc:
        _refuse(channel, str(exc))
    finally:
        channel.close()


def _refuse(channel: Channel, message: str) -> None:
    reply = Reply.error(400, message, "invalid_request_error")
    try:
        body = reply.body.encode("utf-8") if isinstance(reply.body, str) else reply.body
        channel.send(reply_head(reply, keep_alive=False) + body)
    except Hangup:
        pass  # the client is gone or the server stopping; there is no one left to tell
