"""The markdown tables of BENCHMARKS.md, read back: each under its headings, its cells as written.

The bench scripts write these tables (bench/_report.py); bench/charts.py reads
them to draw the charts of docs/benchmarks.md.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_SEPARATOR = re.compile(r"^\|(\s*:?-{3,}:?\s*\|)+\s*$")
_MEASURED = re.compile(r"^_(?:Measured|Counted, not timed \()\s*(\d{4}-\d{2}-\d{2})")


@dataclass(frozen=True)
class Table:
    """One markdown table of BENCHMARKS.md and the headings it sits under."""

    section: str
    """The ``## `` heading above it."""
    subsection: str | None
    """The ``### `` heading above it within that section, if any."""
    header: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    measured: str | None
    """The date of the section's ``_Measured …_`` line, if it has one."""

    def column(self, name: str) -> int:
        """The index of the column headed `name`; ValueError if there is none."""
        try:
            return self.header.index(name)
        except ValueError:
            raise ValueError(f"column {name!r} not in {self.header}") from None


def _cells(line: str) -> tuple[str, ...]:
    """The cells of one table line (no cell in BENCHMARKS.md holds an escaped pipe)."""
    return tuple(cell.strip() for cell in line.strip().strip("|").split("|"))


def parse_tables(markdown: str) -> list[Table]:
    """Every table of `markdown`, with the ``##``/``###`` headings it sits under."""
    tables: list[Table] = []
    section = ""
    subsection: str | None = None
    measured: str | None = None
    lines = markdown.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("## "):
            section, subsection, measured = line[3:].strip(), None, None
        elif line.startswith("### "):
            subsection = line[4:].strip()
        elif (found := _MEASURED.match(line)) and measured is None:
            measured = found.group(1)
        elif line.startswith("|") and i + 1 < len(lines) and _SEPARATOR.match(lines[i + 1]):
            header = _cells(line)
            rows: list[tuple[str, ...]] = []
            i += 2
            while i < len(lines) and lines[i].startswith("|"):
                rows.append(_cells(lines[i]))
                i += 1
            tables.append(Table(section, subsection, header, tuple(rows), measured))
            continue
        i += 1
    return tables


def number(cell: str) -> float:
    """A figure as BENCHMARKS.md writes it (``2,449.1``, ``+7.2``, ``0.97x``) as a float."""
    text = cell.replace(",", "").removeprefix("+").removesuffix("x").strip()
    try:
        return float(text)
    except ValueError:
        raise ValueError(f"not a figure: {cell!r}") from None
