"""Notice a client that hangs up while the proxy is still waiting on the upstream.

A WSGI server only learns of a hang-up when a write fails, and during prefill
(or a long tool-call fragment run) nothing is written. When the server hands
the app its client socket — llmchat's own server does (``llmchat.client_socket``)
and so does gunicorn (``gunicorn.socket``) — a watcher thread waits on it and
reports end-of-file at once, so the upstream generation is cancelled rather
than left running for a client that is gone.
"""

from __future__ import annotations

import logging
import selectors
import socket
import threading
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["HangupWatch", "client_socket"]

log = logging.getLogger("llmchat.proxy")

SOCKET_KEYS = ("llmchat.client_socket", "gunicorn.socket")


def client_socket(environ: Mapping[str, Any]) -> socket.socket | None:
    """The client connection's socket, when the WSGI server exposes it."""
    for key in SOCKET_KEYS:
        sock = environ.get(key)
        if isinstance(sock, socket.socket):
            return sock
    return None


class HangupWatch:
    """Call `on_hangup` once if the client closes its end before `stop()`.

    Does nothing when there is no socket to watch. The watcher blocks in
    ``select`` on the client socket and a private wake-up pair: no polling.
    """

    def __init__(self, sock: socket.socket | None, on_hangup: Callable[[], None]) -> None:
        self._sock = sock
        self._on_hangup = on_hangup
        self.hung_up = threading.Event()
        """Set when the client's end-of-file was seen."""
        self._wake_r: socket.socket | None = None
        self._wake_w: socket.socket | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> HangupWatch:
        if self._sock is None or self._sock.fileno() < 0:
            return self
        self._wake_r, self._wake_w = socket.socketpair()
        self._thread = threading.Thread(target=self._run, name="llmchat-proxy-hangup", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop watching; waits for the watcher to leave (it wakes at once)."""
        thread, wake_w = self._thread, self._wake_w
        if thread is None or wake_w is None:
            return
        try:
            wake_w.send(b"x")
        except OSError:
            pass
        thread.join()
        for end in (self._wake_r, wake_w):
            if end is not None:
                end.close()
        self._thread = None

    def _run(self) -> None:
        sock, wake = self._sock, self._wake_r
        assert sock is not None and wake is not None
        with selectors.DefaultSelector() as selector:
            try:
                selector.register(sock, selectors.EVENT_READ, "client")
            except (OSError, ValueError):
                return
            selector.register(wake, selectors.EVENT_READ, "wake")
            while True:
                ready = {key.data for key, _ in selector.select()}
                if "wake" in ready:
                    return
                try:
                    peeked = sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT)
                except BlockingIOError:
                    continue
                except OSError:
                    peeked = b""  # reset by peer: as gone as a clean close
                if peeked:
                    # The client sent more (a pipelined request): not a hang-up,
                    # and nothing more this watcher can tell without consuming it.
                    return
                self.hung_up.set()
                try:
                    self._on_hangup()
                except Exception:  # a watcher thread has nobody to raise to
                    log.warning("hang-up callback raised", exc_info=True)
                return
