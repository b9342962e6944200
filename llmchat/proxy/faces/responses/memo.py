"""The output items this process sent lately, so an ``item_reference`` to one can be resolved.

The Responses face keeps no conversations: a client sends the whole history in
``input``. But clients that believe the server stores what it sent (the Vercel
AI SDK, unless ``store: false``) replay earlier output as
``{"type": "item_reference", "id": …}`` alone. The items the proxy itself
sent are remembered here, bounded (oldest forgotten first), so those
references resolve to the item's content. Ids are random (uuid4), so one
client cannot name another's items. The memory is per process: under several
gunicorn workers a reference may reach a worker that never sent the item,
and then the face treats it as unknown.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from typing import Any, Final

__all__ = ["recall", "remember"]

_MAX_ITEMS: Final = 4096
_MAX_CHARS: Final = 16 * 1024 * 1024  # roughly the memory a full memo may hold

_items: OrderedDict[str, tuple[dict[str, Any], int]] = OrderedDict()
_chars = 0
_lock = threading.Lock()


def remember(items: Iterable[Mapping[str, Any]]) -> None:
    """Keep each finished output item (by its ``id``), forgetting the oldest past the bound."""
    global _chars
    with _lock:
        for item in items:
            item_id = item.get("id")
            if not isinstance(item_id, str) or not item_id:
                continue
            size = len(repr(item))
            if size > _MAX_CHARS // 4:
                continue  # one huge item would push out everything else
            old = _items.pop(item_id, None)
            if old is not None:
                _chars -= old[1]
            _items[item_id] = (dict(item), size)
            _chars += size
            while len(_items) > _MAX_ITEMS or _chars > _MAX_CHARS:
                _, (_, gone) = _items.popitem(last=False)
                _chars -= gone


def recall(item_id: str) -> dict[str, Any] | None:
    """The item sent with `item_id`, or None if this process never sent it or forgot it."""
    with _lock:
        found = _items.get(item_id)
        return dict(found[0]) if found is not None else None
