"""A node's slots: which one a request holds, in this process and across worker processes.

Admission counts a node's requests in flight against its ``max_conns``
(`nodes.NodeState`); `NodeSlots` also names them. Each request holds one slot
index in ``range(max_conns)``, so a llama-server node can be asked to run it in
that slot of its own (``id_slot``). A request with a conversation key prefers
the free index that key ranks first (`slot_order`: rendezvous hashing, as
`choice` picks nodes), so the turns of one conversation return to the slot
whose KV cache holds it, in every worker alike.

Under ``--workers N`` each worker admits on its own, so the arbiter makes a
`SlotLedger` before it forks: a directory of empty files, one per node and
slot index. A worker holds slot ``i`` of a node by an exclusive, non-blocking
``flock`` on that file, opened for the purpose and closed on release. A flock
belongs to its open file, so two holders conflict even within one process,
and the kernel drops the locks of a process that dies: a worker killed by
SIGKILL gives its slots back, with nothing to clean up. Files are named by the
node's name, so a reload that keeps a node keeps its slots, and a new
``max_conns`` (or the slot count learnt from ``/props``) changes only which
indexes are tried. Without a ledger (one process), the indexes are counted in
memory alone.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from collections.abc import Iterable
from typing import Final

try:
    import fcntl
except ImportError:  # Windows: no workers (gunicorn is POSIX-only), so no ledger
    fcntl = None  # type: ignore[assignment]

__all__ = ["NodeSlots", "SlotLedger", "slot_order"]

_MASK: Final = (1 << 64) - 1


def slot_order(key: int, indexes: Iterable[int]) -> list[int]:
    """`indexes` in `key`'s rendezvous order, best first.

    The hash of the ``(key, index)`` tuple of ints is the same in every process
    (hash randomization covers only str and bytes): every worker prefers the
    same slot for one conversation, and a held slot moves only its own
    conversations to their next choice.
    """
    return sorted(indexes, key=lambda index: _rank(key, index), reverse=True)


def _rank(key: int, index: int) -> int:
    return hash((key, index)) & _MASK


class SlotLedger:
    """The slots every worker of one arbiter holds, as locked files in `directory`.

    `create` makes the directory (in the arbiter, before any fork); `remove`
    deletes it, in the process that made it only: a gunicorn worker leaves the
    arbiter's code path on its way out too, and must not delete it.
    """

    def __init__(self, directory: str, *, owner: int | None = None) -> None:
        if fcntl is None:
            raise OSError("a slot ledger needs flock (POSIX)")
        self.directory = directory
        self._owner = owner

    @classmethod
    def create(cls, parent: str | None = None) -> SlotLedger:
        """A new, empty ledger in a fresh private directory under `parent` (default: TMPDIR)."""
        directory = tempfile.mkdtemp(prefix="llmchat-slots-", dir=parent)
        return cls(directory, owner=os.getpid())

    def __repr__(self) -> str:
        return f"SlotLedger({self.directory!r})"

    def path(self, node: str, index: int) -> str:
        """The file that stands for slot `index` of the node named `node`."""
        digest = hashlib.blake2b(node.encode("utf-8"), digest_size=8).hexdigest()
        return os.path.join(self.directory, f"{digest}.{index}")

    def hold(self, node: str, index: int) -> int | None:
        """Lock slot `index` of `node`: the open descriptor that holds it, or None when
        some holder (any process) has it. Never blocks."""
        fd = os.open(self.path(node, index), os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return None
        except BaseException:
            os.close(fd)
            raise
        return fd

    @staticmethod
    def let_go(fd: int) -> None:
        """Give back the slot `hold` returned `fd` for (closing the file drops its lock)."""
        os.close(fd)

    def remove(self) -> None:
        """Delete the directory, if this process created it; workers holding slots keep them."""
        if self._owner == os.getpid():
            shutil.rmtree(self.directory, ignore_errors=True)


class NodeSlots:
    """One node's slot indexes held by this process, and by it in the ledger (when shared).

    Not thread-safe on its own: `NodeState` calls it under the router's lock.
    """

    __slots__ = ("_held", "_ledger", "_name")

    def __init__(self, name: str, ledger: SlotLedger | None = None) -> None:
        self._name = name
        self._ledger = ledger
        self._held: dict[int, int | None] = {}
        """Held index -> its ledger descriptor (None without a ledger)."""

    def __len__(self) -> int:
        return len(self._held)

    def held(self) -> list[int]:
        """The indexes this process holds, ascending."""
        return sorted(self._held)

    def take(self, limit: int, key: int | None = None) -> int | None:
        """Hold a free index below `limit`: `key`'s first free one in `slot_order`, else
        the lowest free one. None when every free one here is held by another process
        (or none is free here)."""
        held = self._held
        ledger = self._ledger
        free = [index for index in range(limit) if index not in held]
        if ledger is None:  # one process: the first choice is free, nothing else to try
            if not free:
                return None
            index = free[0] if key is None else max(free, key=lambda i: _rank(key, i))
            held[index] = None
            return index
        if key is not None and len(free) > 1:
            free = slot_order(key, free)
        for index in free:
            if ledger is None:
                held[index] = None
                return index
            fd = ledger.hold(self._name, index)
            if fd is not None:
                held[index] = fd
                return index
        return None

    def give(self, index: int) -> None:
        """Give `index` back (its ledger lock too); an index not held is ignored."""
        if index not in self._held:
            return
        fd = self._held.pop(index)
        if fd is not None and self._ledger is not None:
            self._ledger.let_go(fd)
