"""`llmchat usage`: the proxy's usage totals per model, per UTC day and per key id
(and, for a routing proxy's records, per node and per alias; with ``--by``, per
ISO week or month, or any one of these).

Costs are exact: summed as integer nano-units by the store, printed as decimal
text with nine places (`usage.money`), in the text tables and the JSON alike.

Reads an SQLite file or a ``postgresql://`` database (`--db`), or a JSON-lines
log (`--log`, loaded into an in-memory SQLite store so every source is summed
by the same SQL).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:  # the proxy package loads only when the command runs
    from .proxy.usage.store import Total, UsageStore

__all__ = ["add_parser"]

_HEADINGS = {
    "model": "per model",
    "day": "per day (UTC)",
    "week": "per ISO week (UTC)",
    "month": "per month (UTC)",
    "key_id": "per key id",
    "node": "per node",
    "alias": "per alias",
}
_ROUTED = ("node", "alias")
"""Groupings only a routing proxy's rows have: their tables are left out when no row has one."""
_DEFAULT_BY = ("model", "day", "key_id", "node", "alias")
"""The tables printed without ``--by``."""
_BY_NAMES = {"key": "key_id"}
"""Short names ``--by`` takes too."""
_COLUMNS = (
    "requests",
    "ok",
    "failed",
    "input_tokens",
    "cached_tokens",
    "output_tokens",
    "content_bytes",
    "duration_s",
)


def add_parser(commands: Any) -> None:
    """Add the ``usage`` subcommand to `commands` (the CLI's subparsers)."""
    usage = commands.add_parser(
        "usage",
        help="print the proxy's usage totals per model, per day and per key id",
        description=(
            "Sum the proxy's usage records (requests, ok/failed, input/cached/output "
            "tokens, content bytes, duration, cost by the config's prices) per model, "
            "per UTC day and per key id (and "
            "per node and per alias for a routing proxy's; --by picks the tables, "
            "ISO weeks and months among them), from the store "
            "`llmchat proxy --usage-db` writes or the log `--usage-log` appends. "
            "Costs are exact: each request's is rounded once to 1e-9 of the prices' "
            "currency, and the sums are of those amounts, to the last digit."
        ),
    )
    source = usage.add_mutually_exclusive_group(required=True)
    source.add_argument("--db", help="an SQLite file or a postgresql:// URL")
    source.add_argument("--log", help="a JSON-lines usage log")
    usage.add_argument("--since", type=_day, help="first UTC day counted, YYYY-MM-DD")
    usage.add_argument("--until", type=_day, help="last UTC day counted, YYYY-MM-DD")
    usage.add_argument(
        "--by",
        type=_groupings,
        default=_DEFAULT_BY,
        metavar="GROUPS",
        help=(
            "comma-separated tables to print, of model, day, week (ISO, e.g. 2026-W53), "
            "month, key (key_id), node, alias (default: model,day,key,node,alias)"
        ),
    )
    usage.add_argument("--json", action="store_true", help="print the totals as one JSON object")
    usage.set_defaults(run=_run_usage)


def _day(text: str) -> datetime.date:
    try:
        return datetime.date.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a date (YYYY-MM-DD): {text!r}") from None


def _groupings(text: str) -> tuple[str, ...]:
    from .proxy.usage.store import GROUPINGS

    names = [_BY_NAMES.get(name.strip(), name.strip()) for name in text.split(",")]
    unknown = [name for name in names if name not in GROUPINGS]
    if unknown:
        raise argparse.ArgumentTypeError(
            f"not a grouping: {unknown[0]!r} (one of {', '.join(GROUPINGS)}, key)"
        )
    return tuple(dict.fromkeys(names))  # once each, in the order given


def _run_usage(args: argparse.Namespace) -> int:
    from .proxy.usage.store import time_bounds

    time_bounds(args.since, args.until)  # refuse a backwards range before opening anything
    store, source = _open(args)
    try:
        groups = {by: store.totals(by, args.since, args.until) for by in args.by}
    finally:
        store.close()
    if args.json:
        print(json.dumps(_as_json(source, args, groups), indent=2))
    else:
        _print_tables(sys.stdout, source, args, groups)
    return 0


def _open(args: argparse.Namespace) -> tuple[UsageStore, str]:
    from .proxy.usage.backend import open_store
    from .proxy.usage.sqlite import SqliteStore

    if args.db is not None:
        if "://" not in args.db and not os.path.exists(args.db):
            # Not opened: that would create an empty database where none was.
            raise FileNotFoundError(f"no usage database at {args.db}")
        store = open_store(args.db, field="--db")
        return store, getattr(store, "address", args.db)  # a URL's password stays out
    memory = SqliteStore(":memory:", field="--log")
    with open(args.log, "rb") as lines:
        skipped = _load_log(memory, lines)
    if skipped:
        print(
            f"llmchat usage: skipped {skipped} malformed line(s) of {args.log}",
            file=sys.stderr,
        )
    return memory, args.log


def _load_log(store: UsageStore, lines: Iterable[bytes]) -> int:
    """Record each event line into `store`; return how many lines were not events.

    A line is an event when it is UTF-8 JSON whose fields pass `usage.fields.parse`:
    anything else (a torn line, a hand edit, a wrong type) is counted, never fatal.
    """
    from .proxy.usage.event import UsageEvent
    from .proxy.usage.fields import parse

    skipped = 0
    for line in lines:
        if not line.strip():
            continue
        try:
            event = UsageEvent(**parse(json.loads(line.decode("utf-8"))))
        except (ValueError, RecursionError):  # UnicodeDecodeError and JSON's are ValueErrors
            skipped += 1
            continue
        store.record(event)
    return skipped


def _overall(groups: dict[str, list[Total]]) -> Total:
    """The whole: every row is in one group of any grouping, so the first table's rows sum to it."""
    from .proxy.usage.store import combined

    return combined(next(iter(groups.values())), key="total")


def _as_json(
    source: str, args: argparse.Namespace, groups: dict[str, list[Total]]
) -> dict[str, Any]:
    out: dict[str, Any] = {
        "source": source,
        "since": args.since.isoformat() if args.since else None,
        "until": args.until.isoformat() if args.until else None,
        "total": _numbers(_overall(groups).as_dict()),
    }
    for by, totals in groups.items():
        out[f"by_{by}"] = [{by: t.key, **_numbers(t.as_dict())} for t in totals]
    return out


def _numbers(row: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in row.items() if k != "key"}


def _print_tables(
    out: TextIO, source: str, args: argparse.Namespace, groups: dict[str, list[Total]]
) -> None:
    since = args.since.isoformat() if args.since else "the start"
    until = args.until.isoformat() if args.until else "the end"
    print(f"usage from {source}, {since} to {until} (UTC days)", file=out)
    total = _overall(groups).as_dict()
    for by, totals in groups.items():
        if by in _ROUTED and args.by == _DEFAULT_BY and all(t.key is None for t in totals):
            continue  # a one-upstream proxy's records: a table of "(none)" says nothing
        rows = [[t.key if t.key is not None else "(none)", *_cells(t.as_dict())] for t in totals]
        rows.append(["total", *_cells(total)])
        print(file=out)
        _table(out, [_HEADINGS[by], *_COLUMNS, "cost"], rows)


def _cells(row: dict[str, Any]) -> list[str]:
    numbers = [str(row[name]) for name in _COLUMNS if name != "duration_s"]
    cost = "-" if row["cost"] is None else row["cost"]  # already exact decimal text
    return [*numbers, f"{row['duration_ms'] / 1000:.3f}", cost]


def _table(out: TextIO, header: list[str], rows: list[list[str]]) -> None:
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    for row in [header, *rows]:
        first = row[0].ljust(widths[0])
        rest = "  ".join(cell.rjust(width) for cell, width in zip(row[1:], widths[1:], strict=True))
        print(f"{first}  {rest}".rstrip(), file=out)
