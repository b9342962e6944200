"""Notice a client that hangs up while the proxy is still waiting on the upstream.

A WSGI server only learns of a hang-up when a write fails, and during prefill
(or a long tool-call fragment run) nothing is written. When the server hands
the app its client socket — llmchat's own server does (``llmchat.client_socket``)
and so does gunicorn (``gunicorn.socket``) — a watcher thread waits on it and
reports a hang-up at once, so the upstream generation is cancelled rather
than left running for a client that is gone.

An end-of-file alone does not say the client is gone: a client that closed
its socket and one that only shut down its sending side (``shutdown(SHUT_WR)``,
a half-close, after a complete request) both send just a FIN. The second
still reads the answer, and is answered normally, as gunicorn and most
servers do. To tell them apart the watcher writes ``HTTP/1.1 100 Continue``
(an interim answer every HTTP/1.1 client skips; never sent to HTTP/1.0) and
waits for the kernel's reset, which a closed socket answers any byte with:
a reset is a hang-up; none is a half-close, and the answer goes on.
"""

from __future__ import annotations

import logging
import os
import select
import selectors
import socket
import threading
import weakref
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["HangupWatch", "client_socket"]

log = logging.getLogger("llmchat.proxy")

SOCKET_KEYS = ("llmchat.client_socket", "gunicorn.socket")

_PROBE = b"HTTP/1.1 100 Continue\r\n\r\n"
_NOSIGNAL = getattr(socket, "MSG_NOSIGNAL", 0) | getattr(socket, "MSG_DONTWAIT", 0)
_RESET_POLL_MS = 250
# Sockets whose current request is HTTP/1.1, so may be sent an interim answer.
_INTERIM_OK: weakref.WeakKeyDictionary[socket.socket, bool] = weakref.WeakKeyDictionary()


def client_socket(environ: Mapping[str, Any]) -> socket.socket | None:
    """The client connection's socket, when the WSGI server exposes it."""
    for key in SOCKET_KEYS:
        sock = environ.get(key)
        if isinstance(sock, socket.socket):
            _INTERIM_OK[sock] = environ.get("SERVER_PROTOCOL") == "HTTP/1.1"
            return sock
    return None


class HangupWatch:
    """Call `on_hangup` once if the client closes its end before `stop()`.

    Does nothing when there is no socket to watch. Every watch in the process
    shares one watcher thread (`_Watcher`), blocked in ``epoll`` (or the
    platform's selector) on all the watched sockets at once: no thread, socket
    pair or join per request, which on a short request cost more than the
    rest of the proxy's own work.
    """

    def __init__(self, sock: socket.socket | None, on_hangup: Callable[[], None]) -> None:
        self._sock = sock
        self._on_hangup = on_hangup
        self.hung_up = threading.Event()
        """Set when the client's end-of-file was seen."""
        self.ended = threading.Event()
        """Set once this socket is no longer watched: a hang-up was reported, the
        client sent more (a pipelined request: not a hang-up, and nothing more can
        be told without consuming it), or `stop()` was called."""
        self._lock = threading.Lock()
        # "watching", then "firing" / "done"; on an end-of-file that may be a
        # half-close, "probing" (the 100 is being written) then "probed".
        self._state = "new"
        self._fired = threading.Condition(self._lock)
        self._firer: int | None = None  # the thread calling `on_hangup`, which may stop()
        self._answering = False
        self._watcher: _Watcher | None = None

    @property
    def watching(self) -> bool:
        """True while the watcher thread is looking at this socket."""
        return self._state == "watching"

    def start(self) -> HangupWatch:
        if self._sock is None or self._sock.fileno() < 0:
            self.ended.set()
            return self
        self._state = "watching"
        watcher = _Watcher.of_this_process()
        if watcher.add(self._sock, self):
            self._watcher = watcher
        else:
            self._end()
        return self

    def answering(self) -> None:
        """The answer's bytes are about to go out: no interim answer may be written now.

        An end-of-file seen from here on is a hang-up. One seen before (a
        half-close) stays watched for the reset the answer's writes draw
        from a socket that is closed after all.
        """
        with self._lock:
            if self._state == "probing" and self._firer != threading.get_ident():
                self._fired.wait_for(lambda: self._state != "probing")
            self._answering = True

    def stop(self) -> None:
        """Stop watching; after it returns `on_hangup` is never called (one under way
        has finished)."""
        with self._lock:
            busy = self._state in ("firing", "probing")
            if busy and self._firer != threading.get_ident() and not _Watcher.is_watcher_thread():
                # Whatever the app writes next must follow the whole interim answer.
                self._fired.wait_for(lambda: self._state not in ("firing", "probing"))
            was = self._state
            self._state = "done"
        if was == "watching" and self._watcher is not None and self._sock is not None:
            self._watcher.remove(self._sock)
        self.ended.set()

    # -- called on the watcher thread -------------------------------------------

    def _readable(self) -> bool:
        """The socket is readable: a hang-up, more data, or nothing. True when done."""
        sock = self._sock
        assert sock is not None
        reset = False
        try:
            peeked = sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT)
        except (BlockingIOError, InterruptedError):
            return False
        except OSError:
            peeked, reset = b"", True  # reset by peer: gone for sure
        if peeked:
            self._end()
            return True
        if not reset and _INTERIM_OK.get(sock, False):
            self._probe(sock)
            return True
        self._fire()
        return True

    def _fire(self, was: str = "watching") -> None:
        with self._lock:
            if self._state != was:
                return
            self._state, self._firer = "firing", threading.get_ident()
        self.hung_up.set()
        try:
            self._on_hangup()
        except Exception:  # the watcher thread has nobody to raise to
            log.warning("hang-up callback raised", exc_info=True)
        finally:
            self._end()

    def _probe(self, sock: socket.socket) -> None:
        """An end-of-file on HTTP/1.1 before the answer: write the interim answer, wait for a reset.

        Once the answer is going out an interim one cannot be written, and a
        client half-closes after its request, not in the middle of the
        answer: an end-of-file then is a hang-up, as it always was.
        """
        with self._lock:
            if self._state != "watching":
                return
            if self._answering:
                answering = True
            else:
                answering, self._state = False, "probing"
        if answering:
            self._fire()
            return
        try:
            sent = sock.send(_PROBE, _NOSIGNAL)
        except OSError:
            sent = -1  # the client's end is already reset: gone
        with self._lock:
            self._state = "probed"
            self._fired.notify_all()
        if sent != len(_PROBE):
            # Reset, or no room for 25 bytes (a client that reads nothing): as gone.
            self._fire("probed")
            return
        waiter = threading.Thread(
            target=self._await_reset, args=(sock,), name="llmchat-proxy-halfclose", daemon=True
        )
        waiter.start()

    def _await_reset(self, sock: socket.socket) -> None:
        """Fire if the client's kernel resets the connection before `stop()`; else nothing.

        Polled with no events asked for, so only a hang-up or an error (the
        reset) wakes it, not the end-of-file that is already there.
        """
        poller = select.poll()
        try:
            poller.register(sock, 0)
        except (OSError, ValueError):
            return
        while self._state == "probed":
            if poller.poll(_RESET_POLL_MS):
                self._fire("probed")
                return

    def _end(self) -> None:
        with self._lock:
            if self._state == "probed":
                return  # a half-close, still watched for a reset until `stop()`
            self._state = "done"
            self._fired.notify_all()
        self.ended.set()


class _Watcher:
    """The process's one watcher thread, and the selector that holds every watched socket.

    Sockets are registered and unregistered from the request threads, under a
    lock; epoll and kqueue see a change while the thread is blocked, other
    selectors are woken by a byte on a private socket pair. Made lazily, and
    again in a forked child (gunicorn's workers), where the parent's thread
    does not exist.
    """

    _current: _Watcher | None = None
    _made = threading.Lock()

    @classmethod
    def of_this_process(cls) -> _Watcher:
        watcher = cls._current
        if watcher is None or watcher._pid != os.getpid():
            with cls._made:
                watcher = cls._current
                if watcher is None or watcher._pid != os.getpid():
                    watcher = cls._current = _Watcher()
        return watcher

    def __init__(self) -> None:
        self._pid = os.getpid()
        self._lock = threading.Lock()
        self._selector = selectors.DefaultSelector()
        self._live_changes = isinstance(
            self._selector,
            tuple(getattr(selectors, name) for name in _LIVE if hasattr(selectors, name)),
        )
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self._selector.register(self._wake_r, selectors.EVENT_READ, None)
        thread = threading.Thread(target=self._run, name="llmchat-proxy-hangup", daemon=True)
        thread.start()
        self._ident = thread.ident

    @classmethod
    def is_watcher_thread(cls) -> bool:
        watcher = cls._current
        return watcher is not None and watcher._ident == threading.get_ident()

    def add(self, sock: socket.socket, watch: HangupWatch) -> bool:
        with self._lock:
            try:
                self._selector.register(sock, selectors.EVENT_READ, watch)
            except KeyError:
                # Its descriptor number is still registered for a socket that was
                # closed unwatched (its request is long over): drop that, retry.
                try:
                    stale = self._selector.get_key(sock)
                    self._selector.unregister(stale.fileobj)
                    self._selector.register(sock, selectors.EVENT_READ, watch)
                except (OSError, ValueError, KeyError):
                    return False
            except (OSError, ValueError):
                return False
        self._wake()
        return True

    def remove(self, sock: socket.socket) -> None:
        with self._lock:
            try:
                self._selector.unregister(sock)
            except (KeyError, ValueError, OSError):
                pass  # the watcher let it go already (it fired, or data came)
        self._wake()

    def _wake(self) -> None:
        if self._live_changes:
            return
        try:
            self._wake_w.send(b"x")
        except OSError:  # full (a wake-up is pending anyway) or closing
            pass

    def _run(self) -> None:
        while True:
            for key, _ in self._selector.select():
                watch = key.data
                if watch is None:
                    try:
                        while self._wake_r.recv(4096):
                            pass
                    except OSError:
                        pass
                    continue
                if watch._readable():
                    with self._lock:
                        try:
                            self._selector.unregister(key.fileobj)
                        except (KeyError, ValueError, OSError):
                            pass


# Selectors whose waiting thread sees a registration made while it waits.
_LIVE = ("EpollSelector", "KqueueSelector", "DevpollSelector")
