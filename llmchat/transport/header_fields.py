"""HTTP/1.1 header fields read straight from a connection's buffered reader.

`http.client` (and `http.server`, which calls it) reads the header lines,
joins them into one string and runs the `email` package's RFC 5322 parser
over it: on a short relayed request the proxy parsed two heads that way, at
about a sixth of its Python time. Every head llmchat meets on the
wire is plain ``Name: value`` lines, so `read_fields` splits those itself and
says when a head is anything else (a folded continuation line, a line with no
colon, a name with spaces), so the caller can refuse it or hand it to the
email parser unchanged.
"""

from __future__ import annotations

import re
from typing import Any, Final

__all__ = ["MAX_FIELDS", "MAX_LINE", "FieldsTooLarge", "read_fields"]

MAX_LINE: Final = 65536
"""The longest header line, as `http.client`'s ``_MAXLINE``."""
MAX_FIELDS: Final = 100
"""The most header lines in a head, as `http.client`'s ``_MAXHEADERS``."""

# A plain field line: an RFC 9110 §5.6.2 token, the colon right after it, the
# value after optional blanks, then the line end. The value holds only what
# RFC 9110 §5.5 lets a field value hold (VCHAR, obs-text, SP, HTAB): a NUL,
# a stray CR or another control byte makes the line not plain.
_FIELD: Final = re.compile(rb"([!#$%&'*+\-.^_`|~0-9A-Za-z]+):[ \t]*([\t\x20-\x7e\x80-\xff]*)\r?\n?")
_ENDS: Final = (b"\r\n", b"\n", b"")


class FieldsTooLarge(ValueError):
    """A header line is longer than `MAX_LINE` (`line` is true), or there are more than
    `MAX_FIELDS`."""

    def __init__(self, message: str, *, line: bool) -> None:
        super().__init__(message)
        self.line = line


def read_fields(rfile: Any) -> tuple[list[bytes], list[tuple[str, str]] | None]:
    """Read a head's header lines up to and including its blank line.

    Returns the raw lines (the blank one included) and the fields as
    ``(name, value)`` pairs as the email parser stores them: the name as
    sent, the value without its leading whitespace and line end, both decoded
    as ISO-8859-1.
    The fields are `None` when a line is not a plain field line; a head that
    ends before its blank line ends the lines read so far.
    """
    lines: list[bytes] = []
    fields: list[tuple[str, str]] | None = []
    while True:
        line = rfile.readline(MAX_LINE + 1)
        if len(line) > MAX_LINE:
            raise FieldsTooLarge("header line too long", line=True)
        lines.append(line)
        if line in _ENDS:
            return lines, fields
        if len(lines) > MAX_FIELDS:  # the blank line that ends the head is not a field
            raise FieldsTooLarge(f"more than {MAX_FIELDS} header lines", line=False)
        if fields is None:
            continue
        plain = _FIELD.fullmatch(line)
        if plain is None:
            fields = None  # folded, no colon, a space before it, a stray CR: not plain
            continue
        fields.append((plain[1].decode("latin-1"), plain[2].decode("latin-1")))
