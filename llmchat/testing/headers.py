"""Headers: a read-only, case-insensitive view of one message's header fields."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping

from ..transport import redact_headers

__all__ = ["Headers"]


class Headers(Mapping[str, str]):
    """The header fields of one request, in wire order, looked up case-insensitively.

    `headers["content-type"]` and `headers["Content-Type"]` are the same field.
    A name sent more than once reads as its values joined with `", "` (RFC 9110
    §5.3); `get_all(name)` gives them one by one and `fields` gives the exact
    `(name, value)` pairs as received. Iteration yields each name once, spelled
    as it first arrived. The repr redacts credentials, so a recorded request is
    safe to print in a failing test.
    """

    __slots__ = ("_by_key", "fields")

    def __init__(self, fields: Iterable[tuple[str, str]] = ()) -> None:
        self.fields: tuple[tuple[str, str], ...] = tuple(fields)
        """Every `(name, value)` pair exactly as received, in order."""
        self._by_key: dict[str, list[str]] = {}
        for name, value in self.fields:
            self._by_key.setdefault(name.lower(), []).append(value)

    def __getitem__(self, name: str) -> str:
        return ", ".join(self._by_key[name.lower()])

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name.lower() in self._by_key

    def __iter__(self) -> Iterator[str]:
        seen: set[str] = set()
        for name, _ in self.fields:
            if name.lower() not in seen:
                seen.add(name.lower())
                yield name

    def __len__(self) -> int:
        return len(self._by_key)

    def get_all(self, name: str) -> list[str]:
        """Return every value sent for `name`, in order; `[]` when it was not sent."""
        return list(self._by_key.get(name.lower(), ()))

    def tokens(self, name: str) -> set[str]:
        """Return the lower-cased comma-separated tokens of `name` (e.g. `Connection`)."""
        return {
            token.strip().lower()
            for value in self._by_key.get(name.lower(), ())
            for token in value.split(",")
            if token.strip()
        }

    def __repr__(self) -> str:
        return f"Headers({redact_headers(dict(self.items()))!r})"
