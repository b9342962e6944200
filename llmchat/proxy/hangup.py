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
import os
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
        self._state = "new"  # "watching", then "firing" / "done"
        self._fired = threading.Condition(self._lock)
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

    def stop(self) -> None:
        """Stop watching; after it returns `on_hangup` is never called (one under way
        has finished)."""
        with self._lock:
            if self._state == "firing" and not _Watcher.is_watcher_thread():
                self._fired.wait_for(lambda: self._state != "firing")
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
        try:
            peeked = sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT)
        except (BlockingIOError, InterruptedError):
            return False
        except OSError:
            peeked = b""  # reset by peer: as gone as a clean close
        if peeked:
            self._end()
            return True
        with self._lock:
            if self._state != "watching":
                return True
            self._state = "firing"
        self.hung_up.set()
        try:
            self._on_hangup()
        except Exception:  # the watcher thread has nobody to raise to
            log.warning("hang-up callback raised", exc_info=True)
        finally:
            self._end()
        return True

    def _end(self) -> None:
        with self._lock:
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
