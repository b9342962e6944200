"""A test CA made at run time (trustme) and the TLS pieces built on it: no files, no network."""

from __future__ import annotations

import ssl
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import requests
import trustme

from llmchat.testing import Script, ScriptedServer
from llmchat.transport import Exchange, RequestsTransport, TransportResponse, new_session

WAIT = 5.0


def open_post(transport: RequestsTransport, url: str) -> TransportResponse:
    """POST ``{}`` to `url` + ``/x`` on its own exchange; the response with its body unread."""
    return transport.open(
        "POST", url + "/x", {}, b"{}", Exchange(), connect_timeout=WAIT, read_timeout=WAIT
    )


class TestCA:
    """A fresh certificate authority and a server certificate for the loopback addresses.

    `ca_path` is the CA's PEM, written under `folder`: `requests` (and so
    llmchat) takes a CA bundle as a path only.
    """

    __test__ = False  # a helper, not a pytest class

    def __init__(self, folder: Path) -> None:
        self.ca = trustme.CA()
        self.server_cert = self.ca.issue_cert("127.0.0.1", "::1", "localhost")
        self.ca_path = folder / "test-ca.pem"
        self.ca.cert_pem.write_to_path(str(self.ca_path))

    def server_context(self) -> ssl.SSLContext:
        """A server-side context holding the certificate, for `ScriptedServer(tls=...)`."""
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        self.server_cert.configure_cert(context)
        return context

    def session(self) -> requests.Session:
        """llmchat's own session (`CancellableAdapter`, so cancel works) trusting this CA.

        `trust_env` is off because requests lets REQUESTS_CA_BUNDLE or
        CURL_CA_BUNDLE, when set, replace `session.verify` on every request.
        """
        session = new_session()
        session.verify = str(self.ca_path)
        session.trust_env = False
        return session

    @contextmanager
    def server(self, script: Script = None) -> Iterator[ScriptedServer]:
        """A started HTTPS `ScriptedServer` with this CA's certificate."""
        server = ScriptedServer(script, tls=self.server_context())
        with server:
            yield server
