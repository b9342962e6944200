"""Charts of the benchmark figures, generated from BENCHMARKS.md into docs/benchmarks.md.

    python bench/charts.py            # rewrite the charts and README's headline figures
    python bench/charts.py --check    # exit 1 if either is not what BENCHMARKS.md gives

The bench scripts write BENCHMARKS.md's markdown tables; this reads the tables
named in `CHARTS` and writes each as a Mermaid ``xychart-beta`` bar chart
(Material for MkDocs and GitHub both render Mermaid) between
``<!-- charts:start -->`` and ``<!-- charts:end -->`` in docs/benchmarks.md.
The pictures are never drawn by hand, so they cannot drift from the figures:
the suite regenerates them from the committed BENCHMARKS.md and compares
(tests/test_bench_charts.py), and ``bench/run_all.py`` rewrites them after a
run. A table or row that is no longer where a chart expects it is an error
naming the chart, not a chart with a bar missing. README.md's few headline
figures come from the same charts, between ``<!-- bench-headline:start -->``
and ``<!-- bench-headline:end -->``.
"""

from __future__ import annotations

import argparse
import math
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from _md_tables import Table, number, parse_tables

ROOT = Path(__file__).resolve().parent.parent
BENCHMARKS_MD = ROOT / "BENCHMARKS.md"
DOCS_PAGE = ROOT / "docs" / "benchmarks.md"
README_MD = ROOT / "README.md"
START = "<!-- charts:start -->"
END = "<!-- charts:end -->"
HEADLINE_START = "<!-- bench-headline:start -->"
HEADLINE_END = "<!-- bench-headline:end -->"


class Bar(NamedTuple):
    """One bar: the row whose first cell starts with `prefix`, shown as `label`."""

    prefix: str
    label: str
    column: str | None = None
    """The column it shows, when not the chart's `column`."""


@dataclass(frozen=True)
class Chart:
    """One bar chart: which table, which column, which rows and what to call them."""

    title: str
    """The chart's heading on the page (also its Mermaid title)."""
    section: str
    subsection: str | None
    column: str
    """The header of the column the bars show."""
    bars: tuple[Bar, ...]
    """The bars, in the order drawn."""
    axis: str
    """The value axis' title: the unit, and which way is better."""
    where: tuple[str, str] | None = None
    """(column, cell): only rows with that cell, for tables with several rows per path."""
    note: str = ""
    """One sentence under the chart: what to read in it."""
    headline: str = ""
    """The chart's lead-in when its figures are also one of README.md's headline lines."""


MANY = "proxy CPU ms / stream, 32 concurrent streams"
"""The column of the proxy's CPU per stream at 32 concurrent streams."""

OTHER_CLIENTS = (Bar("raw floor:", "raw floor"), Bar("openai", "openai"), Bar("litellm", "litellm"))
"""The client benches' rows after llmchat's: the floor and the libraries llmchat is timed with."""

FACES = ("OpenAI relay", "Ollama face", "Anthropic face", "Responses face", "Gemini face")
"""The proxy's faces as the CPU bench's rows start, in its order."""

LOAD_PATHS = (
    Bar("direct", "direct (no proxy)"),
    Bar("llmchat embedded", "llmchat embedded"),
    Bar("llmchat gunicorn", "llmchat gunicorn (64 threads)"),
    Bar("llmchat gunicorn", "llmchat gunicorn (8 threads)"),
    Bar("LiteLLM", "LiteLLM proxy"),
)
"""The load bench's paths, in its order (its two gunicorn rows: 64 threads, then 8)."""

CHARTS: tuple[Chart, ...] = (
    Chart(
        title="Streaming through the client: frames per second",
        section="Streaming: throughput, per-chunk latency, cancel",
        subsection="Throughput: frames per second through the whole pipeline",
        column="frames / s",
        bars=(
            Bar("llmchat:", "llmchat"),
            Bar("llmchat, the same in a child process", "llmchat (stdlib JSON)"),
            *OTHER_CLIENTS,
        ),
        axis="frames / s (higher is better)",
        headline="**Streaming** through the client, frames / s (higher is better)",
        note="One long stream of token-sized deltas, every frame its own HTTP chunk, from a "
        "server in its own process.",
    ),
    Chart(
        title="Client CPU per stream from a real llama-server",
        section="Real llama-server: streaming tokens/s, first chunk, client CPU",
        subsection=None,
        column="client CPU ms / 512-token stream",
        bars=(
            Bar("llmchat `chat_completion_stream`", "llmchat"),
            Bar("the same, JSON parsed by the stdlib", "llmchat (stdlib JSON)"),
            *OTHER_CLIENTS,
        ),
        axis="client CPU ms / 512-token stream (lower is better)",
        headline="**Client CPU** per 512-token stream from a real llama-server, ms",
        note="Each client in its own process; its CPU is what it takes from generation on "
        "the same cores.",
    ),
    Chart(
        title="The proxy's CPU per delta, by face",
        section="Proxy: CPU per delta and per stream, in its own process",
        subsection="Cost per delta, by face",
        column="proxy CPU µs / delta",
        bars=tuple(Bar(face, face) for face in FACES),
        axis="proxy CPU µs / delta (lower is better)",
        headline="**The proxy's CPU** per streamed delta, in its own process, µs",
        note="The proxy in its own process, read by a raw reader; the relay passes the "
        "upstream's bytes through, the faces translate every delta.",
    ),
    Chart(
        title="The proxy's CPU per 1,000-delta stream, alone and 32 at once",
        section="Proxy: CPU per delta and per stream, in its own process",
        subsection="The proxy's CPU per 1,000-delta stream, 1 and 32 at once",
        column="proxy CPU ms / stream, 1 stream",
        bars=tuple(
            bar
            for face in FACES
            for bar in (Bar(face, f"{face} (alone)"), Bar(face, f"{face} (32 at once)", MANY))
        ),
        axis="proxy CPU ms / stream (lower is better)",
        note="32 client threads, a connection each, started together, against one client alone.",
    ),
    Chart(
        title="Proxy under load: short requests, time to first byte at p99, 64 clients",
        section="Proxy under load: embedded, gunicorn, LiteLLM",
        subsection="Short blocking requests",
        column="TTFB p99 ms",
        where=("clients", "64"),
        bars=LOAD_PATHS,
        axis="TTFB p99 ms (lower is better)",
        headline="**The proxy under load**, 64 clients, short requests, p99 time to first byte, ms",
        note="Upstream, proxy and 64 clients on the same 2 cores; every answer checked.",
    ),
    Chart(
        title="Proxy under load: 1,000-delta streams, time to first delta at p99, 64 clients",
        section="Proxy under load: embedded, gunicorn, LiteLLM",
        subsection="Streams of 1,000 deltas",
        column="TTFB p99 ms",
        where=("clients", "64"),
        bars=LOAD_PATHS,
        axis="TTFB p99 ms (lower is better)",
    ),
    Chart(
        title="Import time, net of bare interpreter start-up",
        section="import llmchat: start-up cost",
        subsection=None,
        column="minus bare start-up ms",
        bars=(
            Bar("`import requests`", "import requests"),
            Bar("`import llmchat`", "import llmchat"),
            Bar("`from llmchat import OpenAICommon`", "from llmchat import OpenAICommon"),
            Bar("`import openai`", "import openai"),
            Bar("`import litellm`", "import litellm"),
        ),
        axis="ms over `python -c pass` (lower is better)",
        headline="**Import time** over bare interpreter start-up, ms",
        note="Each command in a fresh interpreter; `import llmchat` defers the backends to "
        "their first use.",
    ),
)
"""The charts on docs/benchmarks.md, in page order."""


def find_table(tables: list[Table], chart: Chart) -> Table:
    """The first table under the chart's headings with its columns; ValueError naming it if none."""
    # A section can hold several tables with the same first column (the streaming
    # section's per-event and 64 KiB runs): the chart takes the first with its columns.
    wanted = {chart.column, *(bar.column for bar in chart.bars if bar.column)}
    if chart.where:
        wanted.add(chart.where[0])
    for table in tables:
        if (
            table.section == chart.section
            and table.subsection == chart.subsection
            and wanted <= set(table.header)
        ):
            return table
    place = f"## {chart.section}" + (f" / ### {chart.subsection}" if chart.subsection else "")
    raise ValueError(f"chart {chart.title!r}: no table with {chart.column!r} under {place}")


def cells(table: Table, chart: Chart) -> list[tuple[str, str]]:
    """(label, the cell as written) for each of the chart's bars, in order.

    Rows are taken in table order: two bars of one column with the same prefix
    (the two gunicorn rows) take the first and the second matching row. A row
    that is missing is a ValueError naming the chart and the row.
    """
    rows = list(table.rows)
    if chart.where is not None:
        column = table.column(chart.where[0])
        rows = [row for row in rows if row[column] == chart.where[1]]
    used: set[tuple[str, int]] = set()
    out: list[tuple[str, str]] = []
    for bar in chart.bars:
        name = bar.column or chart.column
        index = next(
            (
                n
                for n, row in enumerate(rows)
                if (name, n) not in used and row[0].startswith(bar.prefix)
            ),
            None,
        )
        if index is None:
            raise ValueError(f"chart {chart.title!r}: no row starting {bar.prefix!r}")
        used.add((name, index))
        out.append((bar.label, rows[index][table.column(name)]))
    return out


def bars(table: Table, chart: Chart) -> list[tuple[str, float]]:
    """(label, value) for each of the chart's bars, in order (see `cells`)."""
    return [(label, number(cell)) for label, cell in cells(table, chart)]


def nice_ceiling(value: float) -> float:
    """The axis' end: the smallest round number (1, 1.5, 2, 2.5, 3, 4, 5, 6, 8 x 10^k)
    at least 1.1 x `value`, so the longest bar never touches the frame."""
    if value <= 0:
        return 1.0
    target = value * 1.1
    power = 10.0 ** math.floor(math.log10(target))
    for step in (1, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10):
        if step * power >= target:
            return step * power
    raise AssertionError("unreachable: 10 x power is always enough")


def _figure(value: float) -> str:
    """A value as Mermaid reads it: no thousands separators, no needless decimals."""
    return f"{value:.10g}"


def _quoted(text: str) -> str:
    """A Mermaid string: double quotes, none inside (backticks are markdown, not labels)."""
    return '"' + text.replace('"', "'").replace("`", "") + '"'


def render_chart(table: Table, chart: Chart) -> str:
    """One chart: its heading, the Mermaid block and where its figures come from."""
    data = bars(table, chart)
    top = nice_ceiling(max(value for _, value in data))
    labels = ", ".join(_quoted(label) for label, _ in data)
    values = ", ".join(_figure(value) for _, value in data)
    where = f"section “{table.section}”"
    if table.subsection:
        where += f", under “{table.subsection}”"
    condition = f", rows with {chart.where[0]} = {chart.where[1]}" if chart.where else ""
    measured = f"; measured {table.measured}" if table.measured else ""
    names = dict.fromkeys([chart.column, *(bar.column for bar in chart.bars if bar.column)])
    columns = " and ".join(f"“{name}”" for name in names)
    plural = "s" if len(names) > 1 else ""
    lines = [
        f"### {chart.title}",
        "",
        "```mermaid",
        "xychart-beta horizontal",
        f"    title {_quoted(chart.title)}",
        f"    x-axis [{labels}]",
        f"    y-axis {_quoted(chart.axis)} 0 --> {_figure(top)}",
        f"    bar [{values}]",
        "```",
        "",
    ]
    if chart.note:
        lines += [chart.note, ""]
    lines.append(
        f"_Source: `BENCHMARKS.md`, {where}, column{plural} {columns}{condition}{measured}._"
    )
    return "\n".join(lines)


def render(benchmarks_md: str) -> str:
    """Every chart in `CHARTS`, from the text of BENCHMARKS.md, as the block between the markers."""
    tables = parse_tables(benchmarks_md)
    charts = [render_chart(find_table(tables, chart), chart) for chart in CHARTS]
    note = "<!-- Generated by bench/charts.py from BENCHMARKS.md: edit those, not this block. -->"
    return "\n\n".join([note, *charts])


def render_headlines(benchmarks_md: str) -> str:
    """README.md's headline figures: one line per chart that has a `headline`, as written."""
    tables = parse_tables(benchmarks_md)
    lines = []
    for chart in CHARTS:
        if chart.headline:
            figures = " · ".join(
                f"{label} {cell}" for label, cell in cells(find_table(tables, chart), chart)
            )
            lines.append(f"- {chart.headline}: {figures}.")
    return "\n".join(lines)


def _replace_between(text: str, start: str, end: str, block: str) -> str:
    """`text` with what lies between the markers `start` and `end` replaced by `block`."""
    first, last = text.find(start), text.find(end)
    if first < 0 or last < first:
        raise ValueError(f"the page needs {start} before {end}")
    return f"{text[: first + len(start)]}\n{block}\n{text[last:]}"


def updated_page(page: str, benchmarks_md: str) -> str:
    """`page` with the block between its markers replaced by freshly rendered charts."""
    return _replace_between(page, START, END, render(benchmarks_md) + "\n")


def updated_readme(readme: str, benchmarks_md: str) -> str:
    """`readme` with its headline figures rendered afresh between their markers."""
    return _replace_between(readme, HEADLINE_START, HEADLINE_END, render_headlines(benchmarks_md))


def main(argv: list[str] | None = None) -> int:
    """Rewrite (or with --check, compare) docs/benchmarks.md's charts and README's headline."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare only; exit 1 on a drift")
    parser.add_argument("--benchmarks", type=Path, default=BENCHMARKS_MD)
    parser.add_argument("--page", type=Path, default=DOCS_PAGE)
    parser.add_argument("--readme", type=Path, default=README_MD)
    args = parser.parse_args(argv)
    figures = args.benchmarks.read_text(encoding="utf-8")
    stale = []
    for path, update in ((args.page, updated_page), (args.readme, updated_readme)):
        text = path.read_text(encoding="utf-8")
        new = update(text, figures)
        if new == text:
            continue
        stale.append(path)
        if not args.check:
            path.write_text(new, encoding="utf-8")
            print(f"{path}: figures from {args.benchmarks.name} rewritten")
    if args.check and stale:
        names = ", ".join(str(path) for path in stale)
        print(f"out of date: {names}; run python bench/charts.py", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
