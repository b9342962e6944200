"""Playing one `Reply` onto a `Channel`, recording its timeline as it goes."""

from __future__ import annotations

import time

from .channel import Channel, Hangup
from .record import RecordedRequest
from .script import Drop, Pause, Pings, Reply, Stall, Step, WaitFor, Write
from .wire import LAST_CHUNK, encode_chunk, status_line

__all__ = ["play_reply", "reply_head"]

SERVER_NAME = "llmchat-testing"


def play_reply(
    channel: Channel, reply: Reply, record: RecordedRequest, *, keep_alive: bool
) -> bool:
    """Send `reply` for `record`; return whether the connection may carry another request.

    The connection ends after a close-framed reply, when the client asked to
    close, or when a step ends it (`Drop`, the client leaving, the server
    stopping; those raise `Hangup`). `record.finished` is set on every path,
    after `record.disconnected` when the client left.
    """
    try:
        keep_alive = keep_alive and reply.framing != "close" and not _says_close(reply)
        for step in reply.before_headers:
            _play_step(channel, step, record, frame=False)
        channel.send(reply_head(reply, keep_alive=keep_alive))
        record.headers_sent_at = time.monotonic()
        for step in reply.body_steps:
            _play_step(channel, step, record, frame=reply.framing == "chunked")
        if reply.framing == "chunked":
            channel.send(LAST_CHUNK)
        return keep_alive
    except Hangup as hangup:
        if hangup.why == "client":
            record.disconnected_at = time.monotonic()
            record.disconnected.set()
        raise
    finally:
        record.finished_at = time.monotonic()
        record.finished.set()


def reply_head(reply: Reply, *, keep_alive: bool) -> bytes:
    """Return the status line and header block, defaults first, overridden by the reply's own."""
    defaults = [("Server", SERVER_NAME), ("Content-Type", "application/json")]
    if reply.content_encoding is not None:
        defaults.append(("Content-Encoding", reply.content_encoding))
    if reply.framing == "length":
        size = sum(len(step.data) for step in reply.body_steps if isinstance(step, Write))
        defaults.append(("Content-Length", str(size)))
    elif reply.framing == "chunked":
        defaults.append(("Transfer-Encoding", "chunked"))
    if not keep_alive:
        defaults.append(("Connection", "close"))
    fields = _merge(defaults, reply.header_pairs)
    lines = "".join(f"{name}: {value}\r\n" for name, value in fields)
    return status_line(reply.status, reply.reason) + lines.encode("utf-8") + b"\r\n"


def _says_close(reply: Reply) -> bool:
    """Whether the reply's own headers announce `Connection: close`, which the server then keeps."""
    return any(
        name.lower() == "connection" and "close" in value.lower()
        for name, value in reply.header_pairs
    )


def _merge(
    defaults: list[tuple[str, str]], given: tuple[tuple[str, str], ...]
) -> list[tuple[str, str]]:
    """Each default unless `given` names it (then those pairs take its place), then the rest."""
    fields: list[tuple[str, str]] = []
    for name, value in defaults:
        mine = [pair for pair in given if pair[0].lower() == name.lower()]
        fields += mine or [(name, value)]
    named = {name.lower() for name, _ in defaults}
    return fields + [pair for pair in given if pair[0].lower() not in named]


def _play_step(channel: Channel, step: Step, record: RecordedRequest, *, frame: bool) -> None:
    """Run one step; `frame` wraps each `Write` as an HTTP chunk."""
    if isinstance(step, Write):
        _write(channel, step.data, record, frame=frame)
    elif isinstance(step, Pause):
        channel.pause(step.seconds)
    elif isinstance(step, Stall):
        channel.pause(None)
    elif isinstance(step, Pings):
        while True:  # until the client leaves or the server stops (`Hangup`)
            _write(channel, step.data, record, frame=frame)
            channel.pause(step.every)
    elif isinstance(step, WaitFor):
        channel.wait_event(step.event, step.timeout)
    elif isinstance(step, Drop):
        channel.drop(rst=step.rst)
        raise Hangup("drop")


def _write(channel: Channel, data: bytes, record: RecordedRequest, *, frame: bool) -> None:
    if not data:
        return  # an empty chunk would end a chunked body; elsewhere it is nothing to send
    # Notice a client that left while the previous write sat in the kernel's buffers.
    channel.check()
    channel.send(encode_chunk(data) if frame else data)
    now = time.monotonic()
    record.writes.append((now, len(data)))
    if record.headers_sent_at is not None and record.first_body_byte_at is None:
        record.first_body_byte_at = now
