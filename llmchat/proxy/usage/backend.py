"""Which usage store a `usage_db` names: a ``postgresql://`` URL or an SQLite file path.

The backends are imported only when chosen, so psycopg is needed only for a
PostgreSQL URL, and nothing imports this module back.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from ...errors import InvalidArgumentError, InvalidTypeError, LLMChatError
from .store import UsageStore

if TYPE_CHECKING:
    from .sql import SqlStore

__all__ = ["open_store", "store_of"]


def open_store(target: str | os.PathLike[str], *, field: str = "usage_db") -> SqlStore[Any]:
    """The store for `target`: a ``postgresql://`` URL or an SQLite file path.

    Checks `target` before any I/O, naming `field` in the error.
    """
    if isinstance(target, os.PathLike):
        target = os.fspath(target)
    if not isinstance(target, str):
        raise InvalidTypeError(f"{field} must be a file path or a postgresql:// URL")
    scheme = target.partition("://")[0].lower() if "://" in target else ""
    if scheme in ("postgresql", "postgres"):
        try:
            from .postgres import PostgresStore
        except ImportError:
            raise LLMChatError(
                f"{field}: a postgresql:// URL needs psycopg: pip install 'llmchat[postgres]'"
            ) from None
        return PostgresStore(target, field=field)
    if scheme:
        raise InvalidArgumentError(
            f"{field} must be a file path or a postgresql:// URL, not a {scheme}:// URL"
        )
    from .sqlite import SqliteStore

    return SqliteStore(target, field=field)


def store_of(usage_db: Any) -> tuple[UsageStore | None, bool]:
    """`make_app`'s `usage_db`: a path or URL (opened here, owned) or a store (the caller's).

    Returns the store and whether its closing is the app's job.
    """
    if usage_db is None:
        return None, False
    if isinstance(usage_db, (str, os.PathLike)):
        return open_store(usage_db), True
    if callable(getattr(usage_db, "record", None)):
        return usage_db, False
    raise InvalidTypeError(
        "usage_db must be an SQLite file path, a postgresql:// URL, a UsageStore, or None"
    )
