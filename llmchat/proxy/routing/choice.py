"""Which admitted node serves a request: smooth weighted round-robin, or prefix affinity.

`SmoothWRR` is nginx's smooth weighted round-robin (each pick adds every
candidate's weight to its running score, takes the highest and subtracts the
total from it): over a cycle every node gets its weight's share, interleaved
rather than in runs. With ``affinity: prefix`` a request's conversation prefix
(its leading system messages and first user turn, as canonical JSON through
`llmchat.wire_json`: every later turn of the conversation has the same prefix)
picks its node by rendezvous hashing (highest random weight) over the tier's
eligible nodes, so a llama-server keeps serving the conversation whose KV cache
it holds; when that node has no free slot, the least-loaded admitted node
serves instead. Rendezvous over the *eligible* nodes moves only the
conversations of a node that leaves or joins.
"""

from __future__ import annotations

import hashlib
import math
import zlib
from collections.abc import Mapping, Sequence
from typing import Any, Final

from ... import wire_json
from .nodes import NodeState

__all__ = [
    "Rankings",
    "SmoothWRR",
    "choose",
    "least_loaded",
    "node_seed",
    "prefix_key",
    "rendezvous",
]

_MASK: Final = (1 << 64) - 1
_SPAN: Final = float(1 << 64) + 2.0


def prefix_key(body: Mapping[str, Any]) -> int | None:
    """A 64-bit key for the conversation of the OpenAI chat `body`; None without a user turn.

    The leading system (or developer) messages and the first user message, as
    canonical JSON (`llmchat.wire_json`; a string content as its UTF-8 bytes,
    length-prefixed): the same for every turn of one conversation.
    """
    messages = body.get("messages")
    if not isinstance(messages, list):
        return None
    end = 0
    for end, message in enumerate(messages):  # noqa: B007  (the index is the result)
        role = message.get("role") if isinstance(message, Mapping) else None
        if role == "user":
            break
        if role not in ("system", "developer"):
            return None  # no user turn first: nothing stable to key on
    else:
        return None
    crc, adler = 0, 1  # a routing key, not a secret: two checksums at memory speed
    try:
        for message in messages[: end + 1]:
            content = message.get("content")
            if isinstance(content, str):
                # A long text as its UTF-8 bytes, the rest as canonical JSON: the same
                # bytes for the same message, without escaping a long system prompt.
                rest = {k: v for k, v in message.items() if k != "content"}
                parts = [wire_json.encode_data(rest), b"\x00%d\x00" % len(content)]
                parts.append(content.encode("utf-8", "surrogatepass"))
            else:
                parts = [wire_json.encode_data(message)]
            for part in parts:
                crc, adler = zlib.crc32(part, crc), zlib.adler32(part, adler)
    except (ValueError, TypeError):
        return None
    return crc << 32 | adler


def node_seed(name: str) -> int:
    """A node's fixed 64-bit seed for rendezvous hashing (from its name)."""
    return int.from_bytes(hashlib.blake2b(name.encode("utf-8"), digest_size=8).digest(), "big")


def rendezvous(key: int, nodes: Sequence[NodeState], seeds: Mapping[str, int]) -> list[NodeState]:
    """`nodes` in `key`'s rendezvous order, best first.

    Weighted rendezvous (``-weight / ln(u)``, `u` the node's uniform hash in
    (0, 1)): a node's share of conversations is its share of the weight. The
    hash is CPython's of the ``(key, seed)`` tuple of ints: the same in every
    process (hash randomization covers only str and bytes), one C call. The
    best of any subset is its first node in this order, so one ranking serves
    whichever nodes are eligible.
    """
    log = math.log
    scored = [
        (-node.weight / log(((hash((key, seeds[node.name])) & _MASK) + 1) / _SPAN), i)
        for i, node in enumerate(nodes)
    ]
    scored.sort(reverse=True)
    return [nodes[i] for _, i in scored]


class Rankings:
    """One tier's rendezvous orders by conversation key, cached (a conversation comes back
    every turn). Use under the router's lock; built anew with the tier on reload."""

    LIMIT = 4096
    """Keys kept; the cache starts over when full."""

    def __init__(self, nodes: Sequence[NodeState]) -> None:
        self._nodes = tuple(nodes)
        self._seeds = {node.name: node_seed(node.name) for node in nodes}
        self._orders: dict[int, list[NodeState]] = {}

    def preferred(self, key: int, eligible: Sequence[NodeState]) -> NodeState:
        """The rendezvous node for `key` among `eligible` (non-empty, of this tier)."""
        order = self._orders.get(key)
        if order is None:
            if len(self._orders) >= self.LIMIT:
                self._orders.clear()
            order = self._orders[key] = rendezvous(key, self._nodes, self._seeds)
        if len(eligible) == len(self._nodes):
            return order[0]
        present = {id(node) for node in eligible}
        return next((node for node in order if id(node) in present), eligible[0])


def choose(
    eligible: Sequence[NodeState], key: int | None, wrr: SmoothWRR, rankings: Rankings
) -> NodeState | None:
    """The node to serve a request among a tier's `eligible` nodes; None when all are full.

    Under the router's lock; takes no slot. With a conversation `key`, its
    rendezvous node if it has room, else the least-loaded admitted node;
    without, the next admitted node by weight.
    """
    admitted = [node for node in eligible if node.inflight < node.max_conns]
    if not admitted:
        return None
    if key is not None:
        preferred = rankings.preferred(key, eligible)
        if preferred.inflight < preferred.max_conns:
            return preferred
        return least_loaded(admitted)
    return wrr.pick(admitted)


def least_loaded(nodes: Sequence[NodeState]) -> NodeState:
    """The node with the smallest share of its slots in use; the heavier weight on a tie."""
    return min(nodes, key=lambda n: (n.inflight / n.max_conns, -n.weight))


class SmoothWRR:
    """One tier's smooth weighted round-robin state. Use under the router's lock."""

    def __init__(self) -> None:
        self._current: dict[str, int] = {}

    def pick(self, nodes: Sequence[NodeState]) -> NodeState:
        """The next of `nodes` (non-empty) by weight."""
        current = self._current
        total = 0
        best: NodeState | None = None
        best_score = 0
        for node in nodes:
            score = current.get(node.name, 0) + node.weight
            current[node.name] = score
            total += node.weight
            if best is None or score > best_score:
                best, best_score = node, score
        assert best is not None
        current[best.name] = best_score - total
        return best
