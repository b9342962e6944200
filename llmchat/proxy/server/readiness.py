"""Which waiting client sockets became readable: epoll one-shot, or any selector.

The embedded server's poller (`poller.Poller`) waits on every connection
between requests and while a request arrives. With ``epoll`` each socket is
registered once, one-shot: an event disarms it, so while a pool thread
serves the request the poller sees nothing of that socket (a pipelined
request, the hang-up watcher's end of file), and re-arming it after the
answer is one ``epoll_ctl`` (``MOD``), made by the pool thread itself, where
a plain selector needs an unregister and a register (two) and a wake-up of
the poller's thread. Elsewhere `SelectorReadiness` does the latter, through
`selectors`.
"""

from __future__ import annotations

import select
import selectors
import socket
from collections.abc import Callable

__all__ = ["EpollReadiness", "Readiness", "SelectorReadiness", "best_readiness"]


class Readiness:
    """Interest in a socket's next readable event, armed once per wait."""

    rearm_from_any_thread = False
    """Whether `arm` may be called from a thread other than the poller's while it waits."""

    def add(self, sock: socket.socket) -> None:
        """Watch a new socket, armed."""
        raise NotImplementedError

    def arm(self, sock: socket.socket) -> None:
        """Watch `sock` for its next readable event (once)."""
        raise NotImplementedError

    def disarm(self, sock: socket.socket) -> None:
        """Stop watching `sock` for now (it is about to be served or closed)."""
        raise NotImplementedError

    def wait(self, timeout: float | None) -> list[int]:
        """The descriptors that became readable (each disarmed) within `timeout` seconds."""
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError


class EpollReadiness(Readiness):
    """``epoll`` with ``EPOLLONESHOT``: add once, re-arm with one ``MOD`` per wait."""

    rearm_from_any_thread = True  # epoll_ctl is thread-safe; a blocked epoll_wait sees it

    def __init__(self) -> None:
        self._epoll = select.epoll()
        self._mask = select.EPOLLIN | select.EPOLLONESHOT

    def add(self, sock: socket.socket) -> None:
        self._epoll.register(sock.fileno(), self._mask)

    def arm(self, sock: socket.socket) -> None:
        self._epoll.modify(sock.fileno(), self._mask)

    def disarm(self, sock: socket.socket) -> None:
        pass  # a one-shot event has disarmed it already; a close removes it

    def add_listener(self, fileno: int) -> None:
        """A descriptor always watched (the listening socket, the wake-up): not one-shot."""
        self._epoll.register(fileno, select.EPOLLIN)

    def wait(self, timeout: float | None) -> list[int]:
        try:
            return [fd for fd, _ in self._epoll.poll(-1 if timeout is None else timeout)]
        except InterruptedError:
            return []

    def close(self) -> None:
        self._epoll.close()


class SelectorReadiness(Readiness):
    """Any `selectors` selector: register on `arm`, unregister on the event."""

    def __init__(self) -> None:
        self._selector = selectors.DefaultSelector()

    def add(self, sock: socket.socket) -> None:
        self.arm(sock)

    def arm(self, sock: socket.socket) -> None:
        try:
            self._selector.register(sock, selectors.EVENT_READ)
        except KeyError:  # a stale entry under a reused descriptor number
            self._selector.unregister(sock.fileno())
            self._selector.register(sock, selectors.EVENT_READ)

    def disarm(self, sock: socket.socket) -> None:
        try:
            self._selector.unregister(sock)
        except (KeyError, ValueError):
            pass

    def add_listener(self, fileno: int) -> None:
        self._selector.register(fileno, selectors.EVENT_READ, data="always")

    def wait(self, timeout: float | None) -> list[int]:
        ready = []
        for key, _ in self._selector.select(timeout):
            if key.data is None:
                self._selector.unregister(key.fileobj)  # one-shot, as epoll's
            ready.append(key.fd)
        return ready

    def close(self) -> None:
        self._selector.close()


def best_readiness() -> EpollReadiness | SelectorReadiness:
    """epoll where there is one (Linux), else the platform's selector."""
    make: Callable[[], EpollReadiness | SelectorReadiness] = (
        EpollReadiness if hasattr(select, "epoll") else SelectorReadiness
    )
    return make()
