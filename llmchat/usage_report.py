"""`llmchat usage`: the proxy's usage totals per model, per UTC day and per key id
(and, for a routing proxy's records, per node and per alias).

Reads an SQLite file or a ``postgresql://`` database (`--db`), or a JSON-lines
log (`--log`, loaded into an in-memory SQLite store so every source is summed
by the same SQL).
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
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
    "key_id": "per key id",
    "node": "per node",
    "alias": "per alias",
}
_ROUTED = ("node", "alias")
"""Groupings only a routing proxy's rows have: their tables are left out when no row has one."""
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
            "per node and per alias for a routing proxy's), from the store "
            "`llmchat proxy --usage-db` writes or the log `--usage-log` appends."
        ),
    )
    source = usage.add_mutually_exclusive_group(required=True)
    source.add_argument("--db", help="an SQLite file or a postgresql:// URL")
    source.add_argument("--log", help="a JSON-lines usage log")
    usage.add_argument("--since", type=_day, help="first UTC day counted, YYYY-MM-DD")
    usage.add_argument("--until", type=_day, help="last UTC day counted, YYYY-MM-DD")
    usage.add_argument("--json", action="store_true", help="print the totals as one JSON object")
    usage.set_defaults(run=_run_usage)


def _day(text: str) -> datetime.date:
    try:
        return datetime.date.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a date (YYYY-MM-DD): {text!r}") from None


def _run_usage(args: argparse.Namespace) -> int:
    from .proxy.usage.store import GROUPINGS, time_bounds

    time_bounds(args.since, args.until)  # refuse a backwards range before opening anything
    store, source = _open(args)
    try:
        groups = {by: store.totals(by, args.since, args.until) for by in GROUPINGS}
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


def _overall(groups: dict[str, list[Total]]) -> dict[str, Any]:
    """Every row has exactly one day, so the per-day rows sum to the whole."""
    rows = [t.as_dict() for t in groups["day"]]
    out: dict[str, Any] = {
        name: sum(row[name] for row in rows) for name in _COLUMNS if name != "duration_s"
    }
    out["duration_ms"] = round(sum(row["duration_ms"] for row in rows), 3)
    costs = [row["cost"] for row in rows if row["cost"] is not None]
    # math.fsum: the overall cost is the exactly rounded sum of the days' sums.
    out["cost"] = math.fsum(costs) if costs else None
    return out


def _as_json(
    source: str, args: argparse.Namespace, groups: dict[str, list[Total]]
) -> dict[str, Any]:
    out: dict[str, Any] = {
        "source": source,
        "since": args.since.isoformat() if args.since else None,
        "until": args.until.isoformat() if args.until else None,
        "total": _overall(groups),
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
    total = _overall(groups)
    for by, totals in groups.items():
        if by in _ROUTED and all(t.key is None for t in totals):
            continue  # a one-upstream proxy's records: a table of "(none)" says nothing
        rows = [[t.key if t.key is not None else "(none)", *_cells(t.as_dict())] for t in totals]
        rows.append(["total", *_cells(total)])
        print(file=out)
        _table(out, [_HEADINGS[by], *_COLUMNS, "cost"], rows)


def _cells(row: dict[str, Any]) -> list[str]:
    numbers = [str(row[name]) for name in _COLUMNS if name != "duration_s"]
    cost = "-" if row["cost"] is None else f"{row['cost']:.6f}"
    return [*numbers, f"{row['duration_ms'] / 1000:.3f}", cost]


def _table(out: TextIO, header: list[str], rows: list[list[str]]) -> None:
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    for row in [header, *rows]:
        first = row[0].ljust(widths[0])
        rest = "  ".join(cell.rjust(width) for cell, width in zip(row[1:], widths[1:], strict=True))
        print(f"{first}  {rest}".rstrip(), file=out)
