"""Context budgets: trim a conversation to fit a token budget.

`fit` keeps what must stay (system messages, caller-chosen sticky messages,
depth-anchored notes) and as many of the most recent turns as fit, dropping
the oldest first. An assistant turn with ``tool_calls`` and the tool results
that follow it form one unit: kept or dropped together, never split.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping
from typing import TypeAlias

from .errors import InvalidArgumentError, InvalidTypeError
from .messages import Message, MessageLike, coerce_messages
from .tokens import TokenCounter

__all__ = ["ALWAYS_STICKY_ROLES", "Sticky", "fit"]

ALWAYS_STICKY_ROLES = frozenset({"system", "developer"})
"""Roles `fit` always keeps."""

Sticky: TypeAlias = Callable[[Message], bool] | Collection[int]
"""Which messages `fit` must keep: a predicate on a message, or a set of input indices."""

_TOOL_RESULT_ROLES = frozenset({"tool", "function"})


def fit(
    messages: Iterable[MessageLike],
    budget: int,
    counter: TokenCounter,
    *,
    sticky: Sticky | None = None,
    anchored: Mapping[int, MessageLike] | None = None,
) -> list[Message]:
    """Return the messages to send so the prompt fits in `budget` tokens.

        limits = backend.probe_server_limits()
        budget = limits["context_length"] - max_tokens  # leave room for the reply
        messages = fit(history, budget, TokenCounter(backend, ChatML()))

    `probe_server_limits()`'s ``context_length`` is the natural budget (minus
    the tokens reserved for the reply). Cost is `counter.template_overhead()`
    plus `counter.count_message` of each kept message.

    Always kept: ``system``/``developer`` messages, messages `sticky` selects
    (a predicate ``Message -> bool`` or a collection of input indices), and
    every `anchored` message. Then whole units (a message, or an assistant
    turn with ``tool_calls`` plus the tool results right after it) are added
    newest first until the next one does not fit; older ones are dropped, so
    the kept droppable units are always the most recent ones. A sticky
    message inside a tool unit makes the whole unit sticky. Order is kept.

    `anchored` maps a depth to a message that is inserted with `depth` kept
    messages after it (0: at the end), counted in the fitted conversation
    and never inside a tool unit (it moves up to the unit's start) nor above
    the leading system messages. Neither input is modified.

    Raises `InvalidArgumentError` (a `ValueError`) naming the budget when the
    sticky part alone does not fit, and `TypeError`/`ValueError` for a bad
    budget, sticky index or depth.
    """
    listed = coerce_messages(messages)
    _check_budget(budget)
    anchors = _anchors(anchored)
    is_sticky = _sticky_predicate(sticky, len(listed))
    units = _units(listed)
    pinned = [any(is_sticky(i, listed[i]) for i in unit) for unit in units]
    cost = counter.template_overhead()
    cost += sum(counter.count_message(m) for _, m in anchors)
    cost += sum(_unit_cost(units[u], listed, counter) for u in range(len(units)) if pinned[u])
    if cost > budget:
        raise InvalidArgumentError(
            f"fit: budget={budget} tokens is too small for the sticky part alone "
            f"({cost} tokens: template overhead, system, sticky and anchored messages)"
        )
    keep = list(pinned)
    for u in reversed(range(len(units))):
        if pinned[u]:
            continue
        unit_cost = _unit_cost(units[u], listed, counter)
        if cost + unit_cost > budget:
            break
        cost += unit_cost
        keep[u] = True
    kept_units = [[listed[i] for i in unit] for u, unit in enumerate(units) if keep[u]]
    return _insert_anchors(kept_units, anchors)


def _check_budget(budget: object) -> None:
    if not isinstance(budget, int) or isinstance(budget, bool):
        raise InvalidTypeError(f"fit: budget must be an int, got {type(budget).__name__}")
    if budget < 0:
        raise InvalidArgumentError(f"fit: budget must be >= 0, got {budget}")


def _anchors(anchored: Mapping[int, MessageLike] | None) -> list[tuple[int, Message]]:
    """Anchors as (depth, Message), deepest first."""
    if anchored is None:
        return []
    if not isinstance(anchored, Mapping):
        raise InvalidTypeError(
            f"fit: anchored must be a mapping {{depth: message}}, got {type(anchored).__name__}"
        )
    depths = list(anchored)
    for depth in depths:
        if not isinstance(depth, int) or isinstance(depth, bool) or depth < 0:
            raise InvalidArgumentError(f"fit: anchored depth must be an int >= 0, got {depth!r}")
    messages = coerce_messages([anchored[d] for d in depths])
    return sorted(zip(depths, messages, strict=True), key=lambda pair: -pair[0])


def _sticky_predicate(sticky: Sticky | None, n: int) -> Callable[[int, Message], bool]:
    if sticky is None:
        return lambda i, m: m.role in ALWAYS_STICKY_ROLES
    if callable(sticky):
        chosen = sticky
        return lambda i, m: m.role in ALWAYS_STICKY_ROLES or bool(chosen(m))
    if isinstance(sticky, (str, bytes)) or not isinstance(sticky, Collection):
        raise InvalidTypeError(
            f"fit: sticky must be a predicate or a collection of indices, "
            f"got {type(sticky).__name__}"
        )
    indices = set(sticky)
    for index in indices:
        if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < n:
            raise InvalidArgumentError(
                f"fit: sticky index {index!r} is not an index of the {n} messages"
            )
    return lambda i, m: m.role in ALWAYS_STICKY_ROLES or i in indices


def _units(messages: list[Message]) -> list[list[int]]:
    """Group indices: a tool-call turn and the tool results right after it are one unit."""
    units: list[list[int]] = []
    for i, m in enumerate(messages):
        continues = (
            m.role in _TOOL_RESULT_ROLES
            and units
            and messages[units[-1][0]].role == "assistant"
            and messages[units[-1][0]].tool_calls
            and all(messages[j].role in _TOOL_RESULT_ROLES for j in units[-1][1:])
        )
        if continues:
            units[-1].append(i)
        else:
            units.append([i])
    return units


def _unit_cost(unit: list[int], messages: list[Message], counter: TokenCounter) -> int:
    return sum(counter.count_message(messages[i]) for i in unit)


def _insert_anchors(
    kept_units: list[list[Message]], anchors: list[tuple[int, Message]]
) -> list[Message]:
    """Flatten the units, placing each anchor `depth` messages from the end at a unit boundary."""
    total = sum(len(unit) for unit in kept_units)
    floor = 0
    for unit in kept_units:
        if unit[0].role not in ALWAYS_STICKY_ROLES:
            break
        floor += len(unit)
    boundaries: dict[int, list[Message]] = {}
    for depth, message in anchors:  # deepest first, so it comes first at a shared boundary
        target = max(floor, total - depth)
        position = 0
        for unit in kept_units:
            if position + len(unit) > target:
                break
            position += len(unit)
        boundaries.setdefault(position, []).append(message)
    out: list[Message] = []
    position = 0
    for unit in kept_units:
        out.extend(boundaries.get(position, []))
        out.extend(unit)
        position += len(unit)
    out.extend(boundaries.get(position, []))
    return out
