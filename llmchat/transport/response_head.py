"""An `http.client` response whose head is read without the `email` parser.

`HTTPResponse.begin` hands the header lines to `email.parser` (see
`header_fields`), a large share of what reading a short answer costs.
`LeanResponse.begin` reads the status line as http.client does, the fields
with `read_fields`, and stores them in the same `http.client.HTTPMessage`
the email parser would have built; a head that is not plain ``Name: value``
lines goes to the email parser after all. Framing (chunked, length, close)
is then decided by the rules of `HTTPResponse.begin`.
"""

from __future__ import annotations

import email.parser
import http.client

from .header_fields import FieldsTooLarge, read_fields

__all__ = ["LeanResponse"]


class LeanResponse(http.client.HTTPResponse):
    """`http.client.HTTPResponse` with `begin` reading plain heads by hand."""

    def begin(self) -> None:
        if self.headers is not None:
            return  # begun already (http.client's own guard)
        while True:
            version, status, reason = self._read_status()
            if status != http.client.CONTINUE:
                break
            self._head()  # a 100 Continue's head: read past it
        self.code = self.status = status
        self.reason = reason.strip()
        if version in ("HTTP/1.0", "HTTP/0.9"):
            self.version = 10  # 0.9 is read as 1.0, as http.client does
        elif version.startswith("HTTP/1."):
            self.version = 11
        else:
            raise http.client.UnknownProtocol(version)
        lines, fields = self._head()
        message = http.client.HTTPMessage()
        if fields is None:
            text = b"".join(lines).decode("iso-8859-1")
            message = email.parser.Parser(_class=http.client.HTTPMessage).parsestr(text)
        else:
            for name, value in fields:
                message[name] = value
        self.headers = self.msg = message
        coding = message.get("transfer-encoding")
        self.chunked = bool(coding) and coding.lower() == "chunked"
        if self.chunked:
            self.chunk_left = None
        self.will_close = self._check_close()
        self.length = None
        length = message.get("content-length")
        if length and not self.chunked:
            try:
                self.length = int(length)
            except ValueError:
                self.length = None
            else:
                if self.length < 0:
                    self.length = None  # a negative length means nothing
        if status in (204, 304) or 100 <= status < 200 or self._method == "HEAD":
            self.length = 0
        if not self.will_close and not self.chunked and self.length is None:
            self.will_close = True  # no framing: the body ends with the connection

    def _head(self) -> tuple[list[bytes], list[tuple[str, str]] | None]:
        try:
            return read_fields(self.fp)
        except FieldsTooLarge as exc:
            if exc.line:
                raise http.client.LineTooLong("header line") from None
            raise http.client.HTTPException(str(exc)) from None
