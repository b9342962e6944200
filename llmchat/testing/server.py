"""ScriptedServer: the loopback server's sockets, threads, script and recordings."""

from __future__ import annotations

import selectors
import socket
import ssl
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from types import TracebackType
from typing import Final, TypeAlias

from .connection import serve_connection
from .record import RecordedRequest
from .script import Reply, ScriptError
from .tls import accept_tls
from .wire import ParsedRequest

__all__ = ["Script", "ScriptedServer"]

READY_TIMEOUT: Final = 5.0
STOP_TIMEOUT: Final = 5.0

Responder = Callable[[RecordedRequest], Reply]

Script: TypeAlias = Reply | Sequence[Reply] | Responder | None
"""What a `ScriptedServer` plays: one reply, replies in order, a callable, or nothing."""


class ScriptedServer:
    """A loopback OpenAI-compatible HTTP/1.1 server whose replies are scripted per request.

    `script` is one `Reply` (answers every request), a list of replies (used
    once each, in request order; a request past the end gets a 500 JSON error
    "no scripted reply for request N"), a callable `(RecordedRequest) -> Reply`
    such as `ChatResponder()`, or None (only what `push` supplies). Replies
    given to `push` are used first, once each, before the script's own.

    Each connection is served by its own thread, with keep-alive for replies
    framed by length or chunks. Every request is recorded in `requests`
    before its reply is chosen. `stop()` wakes every handler, including one
    mid-`Stall`, and joins the threads. A callable script that raises, or a
    server thread that fails, answers 500 and is kept in `errors`; leaving the
    `with` block then raises `ScriptError`.

    With `tls` (a server-side `ssl.SSLContext` holding the certificate) the
    server speaks HTTPS: each connection's thread completes the handshake
    before reading a request, `url` starts with ``https://`` and
    `tls_handshakes` counts the handshakes completed. Every step, fault and
    recording works as over plain HTTP; a handshake that fails (the client
    refused the certificate, or left) just closes that connection.

    Example:

        with ScriptedServer(Reply.json({"ok": True})) as url:  # ".../v1"
            requests.get(url + "/models")
    """

    def __init__(
        self, script: Script = None, *, host: str = "127.0.0.1", tls: ssl.SSLContext | None = None
    ) -> None:
        if tls is not None and not isinstance(tls, ssl.SSLContext):
            raise TypeError(f"tls must be an ssl.SSLContext or None, got {type(tls).__name__}")
        self.host = host
        self.tls = tls
        self.requests: list[RecordedRequest] = []
        """Every request read, in order of arrival; appended from handler threads."""
        self.errors: list[BaseException] = []
        """Failures of the script or of the server's own threads (not of the client)."""
        self.connections_accepted = 0
        """How many TCP connections the server accepted so far."""
        self.tls_handshakes = 0
        """How many TLS handshakes completed so far (0 without `tls`); one per connection."""
        self._lock = threading.Condition()
        self._queue: deque[Reply] = deque()
        self._fallback: Reply | Responder | None = None
        self._listener: socket.socket | None = None
        self._port: int | None = None
        self._wake_r: socket.socket | None = None
        self._wake_w: socket.socket | None = None
        self._ready = threading.Event()
        self._stopped = False
        self._acceptor: threading.Thread | None = None
        self._handlers: list[threading.Thread] = []
        self.set_script(script)

    # -- script ---------------------------------------------------------------

    def set_script(self, script: Script) -> None:
        """Replace the script and drop any pushed replies not used yet."""
        queue, fallback = _split_script(script)
        with self._lock:
            self._queue = deque(queue)
            self._fallback = fallback

    def push(self, reply: Reply) -> None:
        """Queue `reply` for the next request not yet answered, ahead of the script."""
        if not isinstance(reply, Reply):
            raise TypeError(f"push() takes a Reply, got {type(reply).__name__}")
        with self._lock:
            self._queue.append(reply)

    def wait_for_requests(self, n: int, timeout: float | None = None) -> bool:
        """Block until `n` requests are recorded; return False if `timeout` passes first."""
        with self._lock:
            return self._lock.wait_for(lambda: len(self.requests) >= n, timeout)

    # -- lifecycle ------------------------------------------------------------

    @property
    def port(self) -> int:
        """The ephemeral port the server listens on; only once started."""
        if self._port is None:
            raise RuntimeError("the ScriptedServer is not started; use start() or `with`")
        return self._port

    @property
    def root(self) -> str:
        """`http://HOST:PORT` (``https://`` with `tls`), the server's origin."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        scheme = "http" if self.tls is None else "https"
        return f"{scheme}://{host}:{self.port}"

    @property
    def url(self) -> str:
        """`root` + ``/v1``, an OpenAI base URL."""
        return self.root + "/v1"

    def start(self) -> ScriptedServer:
        """Listen on an ephemeral port and return once the accept thread is running."""
        if self._acceptor is not None:
            raise RuntimeError("a ScriptedServer can be started only once")
        self._listener = _listen(self.host)
        self._port = int(self._listener.getsockname()[1])
        self._wake_r, self._wake_w = socket.socketpair()
        self._acceptor = threading.Thread(
            target=self._accept_loop, name=f"llmchat-testing-accept-{self.port}", daemon=True
        )
        self._acceptor.start()
        if not self._ready.wait(READY_TIMEOUT):
            self.stop()
            raise RuntimeError(f"the accept thread did not start within {READY_TIMEOUT} s")
        return self

    def stop(self) -> None:
        """Stop serving: wake every handler, close every connection, join the threads.

        Returns within about `STOP_TIMEOUT` seconds even if a handler is stuck
        in user code; such a thread is reported in `errors`. Idempotent.
        """
        if self._acceptor is None or self._stopped:
            return
        self._stopped = True
        assert self._wake_w is not None and self._listener is not None
        # One byte, never read back: the wake socket stays readable, so every
        # selector wait in every thread returns at once.
        self._wake_w.send(b"\0")
        deadline = time.monotonic() + STOP_TIMEOUT
        self._acceptor.join(STOP_TIMEOUT)
        with self._lock:
            handlers = list(self._handlers)
        for thread in handlers:
            thread.join(max(0.0, deadline - time.monotonic()))
        stuck = [t.name for t in (self._acceptor, *handlers) if t.is_alive()]
        self._listener.close()
        if stuck:
            # Their selectors still hold the wake socket, so it stays open for them.
            self._fail(RuntimeError(f"server threads did not stop in {STOP_TIMEOUT} s: {stuck}"))
            return
        self._wake_r.close()  # type: ignore[union-attr]
        self._wake_w.close()

    def __enter__(self) -> str:
        self.start()
        return self.url

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
        if exc_type is None and self.errors:
            first = self.errors[0]
            raise ScriptError(
                f"{len(self.errors)} server-side error(s); first: {type(first).__name__}: {first}"
            ) from first

    def __repr__(self) -> str:
        where = self.root if self._listener is not None else "not started"
        return f"ScriptedServer({where}, {len(self.requests)} requests)"

    # -- threads --------------------------------------------------------------

    def _accept_loop(self) -> None:
        assert self._listener is not None and self._wake_r is not None
        selector = selectors.DefaultSelector()
        try:
            selector.register(self._listener, selectors.EVENT_READ)
            selector.register(self._wake_r, selectors.EVENT_READ)
            self._ready.set()
            while True:
                for key, _ in selector.select():
                    if key.fileobj is self._wake_r:
                        return
                    self._accept()
        except Exception as exc:  # a thread has nobody to raise to; `__exit__` reports it
            self._fail(exc)
        finally:
            selector.close()

    def _accept(self) -> None:
        assert self._listener is not None
        try:
            sock, _ = self._listener.accept()
        except (BlockingIOError, InterruptedError):
            return  # the client gave up between the wake-up and accept()
        # Small writes must leave at once: tests time them and split on them.
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        with self._lock:
            connection_id = self.connections_accepted
            self.connections_accepted += 1
            thread = threading.Thread(
                target=self._serve,
                args=(sock, connection_id),
                name=f"llmchat-testing-{self.port}-conn-{connection_id}",
                daemon=True,
            )
            self._handlers = [t for t in self._handlers if t.is_alive()]
            self._handlers.append(thread)
        thread.start()

    def _serve(self, sock: socket.socket, connection_id: int) -> None:
        assert self._wake_r is not None
        try:
            if self.tls is not None:
                wrapped = accept_tls(sock, self.tls, self._wake_r)
                if wrapped is None:
                    return  # no handshake: the client left or refused the certificate
                sock = wrapped
                with self._lock:
                    self.tls_handshakes += 1
            serve_connection(sock, self._wake_r, connection_id, self._admit)
        except Exception as exc:  # a thread has nobody to raise to; `__exit__` reports it
            self._fail(exc)
        finally:
            sock.close()

    def _admit(
        self, request: ParsedRequest, connection_id: int, received_at: float
    ) -> tuple[RecordedRequest, Reply]:
        """Record `request`, then choose its reply: pushed first, then the script."""
        with self._lock:
            record = RecordedRequest(
                index=len(self.requests),
                connection_id=connection_id,
                method=request.method,
                path=request.target,
                http_version=request.version,
                headers=request.headers,
                body=request.body,
                raw=request.raw,
                received_at=received_at,
            )
            self.requests.append(record)
            self._lock.notify_all()
            pushed = self._queue.popleft() if self._queue else None
            fallback = self._fallback
        # A callable script runs outside the lock: it may take its time.
        record.reply = pushed if pushed is not None else self._scripted(fallback, record)
        return record, record.reply

    def _scripted(self, fallback: Reply | Responder | None, record: RecordedRequest) -> Reply:
        if fallback is None:
            message = f"no scripted reply for request {record.index + 1}"
            return Reply.error(500, f"{message} ({record.method} {record.path})")
        if isinstance(fallback, Reply):
            return fallback
        try:
            reply = fallback(record)
            if not isinstance(reply, Reply):
                raise TypeError(f"the script returned {type(reply).__name__}, not a Reply")
        except Exception as exc:
            self._fail(exc)
            return Reply.error(500, f"the script failed: {type(exc).__name__}: {exc}")
        return reply

    def _fail(self, exc: BaseException) -> None:
        with self._lock:
            self.errors.append(exc)


def _split_script(script: Script) -> tuple[list[Reply], Reply | Responder | None]:
    """Return `(replies used once each, reply or callable for the rest)`."""
    if script is None or isinstance(script, Reply):
        return [], script
    if isinstance(script, Sequence) and not isinstance(script, (str, bytes)):
        bad = [item for item in script if not isinstance(item, Reply)]
        if bad:
            raise TypeError(f"a script list holds only Reply objects, got {bad[0]!r}")
        return list(script), None
    if callable(script):
        return [], script
    raise TypeError(f"script must be a Reply, a list of Reply, a callable or None, got {script!r}")


def _listen(host: str) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    listener = socket.socket(family, socket.SOCK_STREAM)
    try:
        listener.bind((host, 0))
        listener.listen(128)
        listener.setblocking(False)
    except OSError:
        listener.close()
        raise
    return listener
