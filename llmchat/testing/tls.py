"""The server side of a TLS handshake on one accepted socket, watching the server's stop."""

from __future__ import annotations

import selectors
import socket
import ssl

__all__ = ["accept_tls"]


def accept_tls(
    sock: socket.socket, context: ssl.SSLContext, wake: socket.socket
) -> ssl.SSLSocket | None:
    """Wrap `sock` in `context` as a server and complete the handshake; None if it cannot.

    Runs in the connection's own thread, so a slow or silent client holds up
    nobody else. The socket is non-blocking and each wait is a selector wait
    that also watches `wake`, so `stop()` ends a handshake that never comes.
    None means the client left, refused the certificate, spoke something
    other than TLS, or the server is stopping: the client's doing or the
    stop, never a server error. The wrapped socket is closed then.
    """
    sock.setblocking(False)
    # wrap_socket takes over the file descriptor: from here `tls` owns it.
    tls = context.wrap_socket(sock, server_side=True, do_handshake_on_connect=False)
    try:
        with selectors.DefaultSelector() as selector:
            selector.register(wake, selectors.EVENT_READ, "wake")
            selector.register(tls, selectors.EVENT_READ, "sock")
            while True:
                try:
                    tls.do_handshake()
                    return tls
                except ssl.SSLWantReadError:
                    selector.modify(tls, selectors.EVENT_READ, "sock")
                except ssl.SSLWantWriteError:
                    selector.modify(tls, selectors.EVENT_WRITE, "sock")
                if any(key.data == "wake" for key, _ in selector.select()):
                    break
    except OSError:  # ssl.SSLError included: a bad certificate, a reset, not TLS at all
        pass
    tls.close()
    return None
