"""The debug wire log: exact request bytes and response timings, secrets redacted.

Set ``LLMCHAT_DEBUG=/path/to/file`` and every exchange appends its lines
there: the request line with redacted headers, the body as the exact bytes
posted (one line, so a logged request can be replayed as sent), the status
with ``+Nms`` when headers arrived, ``+Nms`` at the first body byte, and the
end; then, after a stream's explicit end, whether its connection went back
to the pool, and a line whenever a request was sent again because its pooled
connection had been closed by the server. Lines of concurrent requests
interleave; each carries its exchange number. The same events go to the
``llmchat`` logger at DEBUG, without bodies.

Every line, to the file and to the logger, goes through the backend's
`Redactor`: credential headers are redacted by name, and any form of the key
anywhere else (a server echoing it in a header value, an error quoting it) is
replaced too.
"""

from __future__ import annotations

import itertools
import logging
import os
import threading
import time
from collections.abc import Mapping
from datetime import datetime, timezone
from typing import Final

from .redact import Redactor
from .transport import redact_headers

__all__ = ["ENV_VAR", "WireLog"]

ENV_VAR: Final = "LLMCHAT_DEBUG"
log = logging.getLogger("llmchat")
_write_lock = threading.Lock()
_numbers = itertools.count(1)


class WireLog:
    """The log lines of one exchange; every method is a no-op when logging is off."""

    def __init__(self, secrets: tuple[str, ...] = ()) -> None:
        self.path = os.environ.get(ENV_VAR) or None
        self.number = next(_numbers)
        self._redactor = Redactor.of(secrets)
        self._started = time.monotonic()
        self._first_byte_seen = False

    @property
    def enabled(self) -> bool:
        return self.path is not None or log.isEnabledFor(logging.DEBUG)

    def request(
        self, method: str, url: str, headers: Mapping[str, str], data: bytes | None
    ) -> None:
        if not self.enabled:
            return
        summary = self._scrub(f">>> {method} {url} headers={redact_headers(headers)}")
        log.debug("#%d %s (%d bytes)", self.number, summary, len(data or b""))
        lines = [summary]
        if data is not None:
            lines.append(">>> body " + data.decode("utf-8", "replace"))
        self._append(lines)

    def response(self, status: int, headers: Mapping[str, str]) -> None:
        if not self.enabled:
            return
        self._mark(self._scrub(f"<<< {status} {self._since()} headers={redact_headers(headers)}"))

    def first_byte(self) -> None:
        # Called on every read: after the first, one attribute test, logging on or off.
        if self._first_byte_seen:
            return
        self._first_byte_seen = True
        if not self.enabled:
            return
        self._mark(f"<<< first body byte {self._since()}")

    def resent(self) -> None:
        if not self.enabled:
            return
        self._mark(
            f"--- resent on a new connection: the server had closed the pooled one {self._since()}"
        )

    def connection(self, outcome: str) -> None:
        """After a stream's explicit end: ``back in the pool`` or why it was closed."""
        if not self.enabled:
            return
        self._mark(self._scrub(f"--- connection {outcome} {self._since()}"))

    def end(self, outcome: str) -> None:
        if not self.enabled:
            return
        self._mark(self._scrub(f"=== {outcome} {self._since()}"))

    def _mark(self, line: str) -> None:
        """One line (already scrubbed): to the debug log and to the recorded lines."""
        log.debug("#%d %s", self.number, line)
        self._append([line])

    def _since(self) -> str:
        return f"+{(time.monotonic() - self._started) * 1000:.0f}ms"

    def _scrub(self, text: str) -> str:
        return self._redactor.text(text)

    def _append(self, lines: list[str]) -> None:
        if self.path is None:
            return
        stamp = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        text = "".join(f"{stamp} #{self.number} {self._scrub(line)}\n" for line in lines)
        try:
            with _write_lock, open(self.path, "a", encoding="utf-8") as out:
                out.write(text)
        except OSError:
            log.warning("could not write the %s wire log to %s", ENV_VAR, self.path)
