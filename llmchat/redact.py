"""What a secret looks like in text, and taking it out.

A server or library that echoes a credential rarely echoes it verbatim:
requests quotes a bad header with `repr`, a JSON error body escapes it (PHP
also escapes ``/`` as ``\\/``), a URL percent-encodes it. A `Redactor` knows
every such form of its secrets and replaces each with ``[redacted]`` — in
text, in bytes, and (`StreamScrubber`) in bytes that arrive in pieces. It is
built once per set of secrets (`Redactor.of` caches it), so scrubbing a line
costs one regular-expression scan and nothing when there are no secrets.

`check_secret` is the other half: a key with control characters or
surrounding whitespace is refused where it is given, naming the field and
never the value.
"""

from __future__ import annotations

import functools
import json
import re
import traceback
from collections.abc import Iterable, Mapping
from typing import AnyStr, Final, Generic
from urllib.parse import quote, quote_plus

from .errors import InvalidArgumentError, InvalidTypeError

__all__ = [
    "REDACTED",
    "SENSITIVE_HEADERS",
    "Redactor",
    "StreamScrubber",
    "TextScrubber",
    "check_secret",
    "redact_headers",
    "secret_forms",
]

REDACTED: Final = "[redacted]"
_REDACTED_BYTES: Final = REDACTED.encode()
_PERCENT: Final = re.compile("%[0-9A-F]{2}")


SENSITIVE_HEADERS: Final = frozenset(
    {
        "authorization",
        "proxy-authorization",
        "x-api-key",
        "api-key",
        "x-goog-api-key",  # Gemini
        "cookie",
        "set-cookie",
    }
)


def redact_headers(headers: Mapping[str, str]) -> dict[str, str]:
    """Return a copy of `headers` fit for a log line, repr or debug dump.

    Credentials are replaced by ``[redacted]``; every repr and dump of headers
    in llmchat goes through here.
    """
    return {
        name: "[redacted]" if name.lower() in SENSITIVE_HEADERS else value
        for name, value in headers.items()
    }


def check_secret(name: str, value: str | None) -> str | None:
    """Return `value` if it can be a credential; raise `InvalidArgumentError` naming `name`.

    A key read from a file or made with ``echo`` often ends in a newline;
    sent as a header it makes requests fail with a message that quotes the
    header. Control characters and leading or trailing whitespace are refused
    here instead. The message names the field and the problem, never the value.
    """
    if value is None:
        return None
    if not isinstance(value, str):
        raise InvalidTypeError(f"{name} must be a str or None, got {type(value).__name__}")
    if any(ord(c) < 32 or ord(c) == 127 for c in value):
        raise InvalidArgumentError(
            f"{name} contains a control character (a newline or tab?); "
            "strip the key before passing it"
        )
    if value != value.strip():
        raise InvalidArgumentError(
            f"{name} has leading or trailing whitespace; strip the key before passing it"
        )
    return value


def secret_forms(secret: str) -> set[str]:
    """Every form `secret` can take in a message: exact, quoted, escaped, encoded, as a header."""
    forms: set[str] = set()
    for text in (secret, f"Bearer {secret}"):
        escaped = {
            text,
            repr(text)[1:-1],
            json.dumps(text)[1:-1],
            json.dumps(text, ensure_ascii=False)[1:-1],
        }
        escaped |= {form.replace("/", "\\/") for form in escaped}
        forms |= escaped
        encoded = {quote(text, safe=""), quote(text), quote_plus(text, safe=""), quote_plus(text)}
        forms |= encoded | {_PERCENT.sub(lambda m: m.group().lower(), form) for form in encoded}
    forms.discard("")
    return forms


class Redactor:
    """Replaces every form of a fixed set of secrets with ``[redacted]``; immutable, thread-safe.

    Build it with `Redactor.of(secrets)`: one instance per distinct set.
    """

    def __init__(self, secrets: Iterable[str]) -> None:
        forms: set[str] = set()
        for secret in secrets:
            if secret:
                forms |= secret_forms(secret)
        # Longest first: at one position the longest form wins ("Bearer k" over "k").
        ordered = sorted(forms, key=lambda form: (-len(form), form))
        self.forms: tuple[str, ...] = tuple(ordered)
        """Every text form, longest first; empty when there are no secrets."""
        self.byte_forms: tuple[bytes, ...] = tuple(
            dict.fromkeys(form.encode("utf-8") for form in ordered)
        )
        """The same forms as UTF-8 bytes."""
        self._text = re.compile("|".join(map(re.escape, ordered))) if ordered else None
        self._bytes = re.compile(b"|".join(map(re.escape, self.byte_forms))) if ordered else None
        self.longest = max((len(form) for form in self.byte_forms), default=0)
        """The length in bytes of the longest form (a stream holds back less than this)."""
        self.longest_text = max((len(form) for form in ordered), default=0)
        """The same for text (`TextScrubber`: decoded deltas are scrubbed as text)."""

    @classmethod
    def of(cls, secrets: Iterable[str]) -> Redactor:
        """The Redactor for `secrets`, built once per distinct set and then reused."""
        return _cached(tuple(sorted({s for s in secrets if s})))

    def __bool__(self) -> bool:
        return self._text is not None

    def __repr__(self) -> str:
        return f"Redactor({len(self.forms)} forms)"  # never the forms themselves

    def text(self, text: str) -> str:
        """`text` with every form of every secret replaced."""
        if self._text is None:
            return text
        return self._text.sub(REDACTED, text)

    def data(self, data: bytes) -> bytes:
        """`data` with every form of every secret replaced (the same object when clean)."""
        if self._bytes is None:
            return data
        if self._bytes.search(data) is None:
            return data
        return self._bytes.sub(_REDACTED_BYTES, data)

    def exception(self, exc: BaseException) -> str:
        """`exc` with its traceback, as a log line's text, scrubbed."""
        return self.text("".join(traceback.format_exception(type(exc), exc, exc.__traceback__)))

    def found_in(self, data: bytes) -> bool:
        """True when some form of a secret is in `data` (one scan; False without secrets)."""
        return self._bytes is not None and self._bytes.search(data) is not None

    def stream(self) -> StreamScrubber:
        """A new push scrubber for one byte stream."""
        return StreamScrubber(self)

    def text_stream(self) -> TextScrubber:
        """A new push scrubber for one text stream (a field's deltas, decoded)."""
        return TextScrubber(self)


class _Scan(Generic[AnyStr]):
    """What a push scrubber of one kind (bytes or text) looks for; private to this module.

    Built from a Redactor's public forms and cached per set of forms
    (`_byte_scan`, `_text_scan`), so a scrubber needs nothing private of its
    Redactor.
    """

    def __init__(
        self, forms: tuple[AnyStr, ...], pattern: re.Pattern[AnyStr], starts: re.Pattern[AnyStr]
    ) -> None:
        self.pattern: re.Pattern[AnyStr] = pattern
        """One form or another (longest first)."""
        self.starts: re.Pattern[AnyStr] = starts
        """The first character of each form."""
        self.longest = max(len(form) for form in forms)
        self.prefixes: frozenset[AnyStr] = frozenset(
            form[:n] for form in forms for n in range(1, len(form))
        )
        """Every proper prefix of a form: a tail that may yet become one."""

    def partial_at(self, data: AnyStr, pos: int) -> int | None:
        """The first offset >= `pos` from which `data` to its end could begin a form."""
        start = max(pos, len(data) - self.longest + 1)
        while True:
            found = self.starts.search(data, start)
            if found is None:
                return None
            at = found.start()
            if data[at:] in self.prefixes:
                return at
            start = at + 1


@functools.lru_cache(maxsize=64)
def _byte_scan(forms: tuple[bytes, ...]) -> _Scan[bytes]:
    firsts = b"".join(re.escape(bytes([b])) for b in sorted({form[0] for form in forms}))
    pattern = re.compile(b"|".join(map(re.escape, forms)))
    return _Scan(forms, pattern, re.compile(b"[" + firsts + b"]"))


@functools.lru_cache(maxsize=64)
def _text_scan(forms: tuple[str, ...]) -> _Scan[str]:
    firsts = "".join(re.escape(c) for c in sorted({form[0] for form in forms}))
    pattern = re.compile("|".join(map(re.escape, forms)))
    return _Scan(forms, pattern, re.compile("[" + firsts + "]"))


@functools.lru_cache(maxsize=64)
def _cached(secrets: tuple[str, ...]) -> Redactor:
    return Redactor(secrets)


class StreamScrubber:
    """Push-style scrubber for one byte stream: `feed(bytes) -> bytes`, `flush() -> bytes`.

    Replaces every form even when it is split across reads. It holds back
    only a tail that could be the start of a form, so a clean stream is not
    delayed by a whole read; clean bytes are passed on as they came. The
    output equals `Redactor.data` of the whole stream, however it was split.
    No I/O.
    """

    def __init__(self, redactor: Redactor) -> None:
        self._scan = _byte_scan(redactor.byte_forms) if redactor else None
        self._held = b""

    def feed(self, data: bytes) -> bytes:
        """The bytes that can be passed on now (maybe fewer than given, maybe more)."""
        scan = self._scan
        if scan is None:
            return data
        buf = self._held + data if self._held else data
        out: list[bytes] = []
        pos = 0
        while True:
            match = scan.pattern.search(buf, pos)
            hold = scan.partial_at(buf, pos)
            if match is not None and (hold is None or match.start() < hold):
                out += (buf[pos : match.start()], _REDACTED_BYTES)
                pos = match.end()
                continue
            end = len(buf) if hold is None else hold
            self._held = buf[end:]
            if pos == 0 and end == len(buf):
                return buf  # nothing replaced, nothing held: the bytes as they came
            out.append(buf[pos:end])
            return b"".join(out)

    def flush(self) -> bytes:
        """What is still held at the end of the stream (it was no form after all)."""
        held, self._held = self._held, b""
        return held


class TextScrubber:
    """`StreamScrubber` for text: `feed(str) -> str`, `flush() -> str`.

    For a field that arrives in decoded pieces (a streamed answer's text or
    reasoning deltas), where a secret split across two pieces must still be
    caught. It holds back only a tail that could begin a form; the output
    equals `Redactor.text` of the whole text, however it was split. No I/O.
    """

    def __init__(self, redactor: Redactor) -> None:
        self._scan = _text_scan(redactor.forms) if redactor else None
        self._held = ""

    @property
    def holding(self) -> bool:
        """True while a tail is held back (it may yet turn out to begin a secret)."""
        return bool(self._held)

    def feed(self, text: str) -> str:
        """The text that can be passed on now (maybe less than given, maybe more)."""
        scan = self._scan
        if scan is None:
            return text
        buf = self._held + text if self._held else text
        if scan.pattern.search(buf) is not None:
            buf = scan.pattern.sub(REDACTED, buf)
        hold = scan.partial_at(buf, 0)
        # A REDACTED inserted before the tail is no form's start: only the tail matters.
        if hold is None:
            self._held = ""
            return buf
        self._held = buf[hold:]
        return buf[:hold]

    def flush(self) -> str:
        """What is still held at the end of the text (it was no form after all)."""
        held, self._held = self._held, ""
        return held
