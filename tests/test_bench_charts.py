"""bench/charts.py: docs/benchmarks.md's charts are BENCHMARKS.md's figures, never drawn by hand.

Pure: the generator reads text and writes text; these tests run it on the
committed files and on small tables written here.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

from charts import (  # noqa: E402
    CHARTS,
    END,
    HEADLINE_END,
    HEADLINE_START,
    START,
    Bar,
    Chart,
    bars,
    find_table,
    main,
    nice_ceiling,
    number,
    parse_tables,
    render,
    render_headlines,
    updated_page,
    updated_readme,
)

BENCHMARKS = (ROOT / "BENCHMARKS.md").read_text(encoding="utf-8")
PAGE = (ROOT / "docs" / "benchmarks.md").read_text(encoding="utf-8")
README = (ROOT / "README.md").read_text(encoding="utf-8")

SMALL = """\
# Benchmarks

## Speed

_Measured 2026-01-02 on CPython 3.11.7._

| client | ms | x floor |
| --- | ---: | ---: |
| llmchat: `stream()` | 1,234.5 | 0.97x |
| raw floor: requests | 1,200.0 | 1.00x |
| server | 2 | +3.5 |

### Under load

| path | clients | p99 ms |
| --- | ---: | ---: |
| proxy | 1 | 5 |
| proxy, lean | 1 | 4 |
| proxy | 64 | 50 |
| proxy, lean | 64 | 40 |

## Other

| client | ms |
| --- | ---: |
| llmchat: elsewhere | 9 |
"""


def chart(**fields: object) -> Chart:
    """A chart of SMALL's first table unless `fields` say otherwise."""
    base: dict[str, object] = {
        "title": "Speed",
        "section": "Speed",
        "subsection": None,
        "column": "ms",
        "bars": (Bar("llmchat", "llmchat"), Bar("raw floor", "floor")),
        "axis": "ms",
    }
    base.update(fields)
    return Chart(**base)  # type: ignore[arg-type]


def test_the_committed_page_and_readme_are_what_the_committed_figures_give() -> None:
    # A bench run that rewrites BENCHMARKS.md without `python bench/charts.py` fails here.
    assert updated_page(PAGE, BENCHMARKS) == PAGE, "run: python bench/charts.py"
    assert updated_readme(README, BENCHMARKS) == README, "run: python bench/charts.py"
    assert main(["--check"]) == 0


def test_the_readme_headline_is_one_line_per_headline_chart_with_every_bar() -> None:
    block = README[README.index(HEADLINE_START) + len(HEADLINE_START) : README.index(HEADLINE_END)]
    lines = block.strip().splitlines()
    specs = [spec for spec in CHARTS if spec.headline]
    assert 3 <= len(lines) == len(specs) <= 5, "the README keeps 3 to 5 headline lines"
    tables = parse_tables(BENCHMARKS)
    for line, spec in zip(lines, specs, strict=True):
        assert line.startswith(f"- {spec.headline}: ")
        for label, value in bars(find_table(tables, spec), spec):
            assert f"{label} " in line and value >= 0
    assert render_headlines(BENCHMARKS) == block.strip()


@pytest.mark.parametrize("spec", CHARTS, ids=[c.title for c in CHARTS])
def test_every_charted_table_and_bar_is_found_in_benchmarks_md(spec: Chart) -> None:
    table = find_table(parse_tables(BENCHMARKS), spec)
    assert table.section == spec.section and table.subsection == spec.subsection
    assert table.measured is not None, "each charted section says when it was measured"
    drawn = bars(table, spec)
    assert [label for label, _ in drawn] == [bar.label for bar in spec.bars]
    # Every bar is a figure of a row the chart asked for, in the column it asked for.
    for bar, (_, value) in zip(spec.bars, drawn, strict=True):
        column = table.column(bar.column or spec.column)
        cells = [number(row[column]) for row in table.rows if row[0].startswith(bar.prefix)]
        assert value in cells, (bar, cells)
        assert value >= 0


def test_the_page_holds_one_mermaid_chart_per_spec_with_every_bar() -> None:
    block = PAGE[PAGE.index(START) : PAGE.index(END)]
    charts = re.findall(r"```mermaid\n(.*?)```", block, re.S)
    assert len(charts) == len(CHARTS)
    for source, spec in zip(charts, CHARTS, strict=True):
        assert source.startswith("xychart-beta horizontal\n")
        labels = re.search(r"x-axis \[(.*)\]", source)
        values = re.search(r"bar \[(.*)\]", source)
        top = re.search(r"y-axis \".*\" 0 --> ([\d.]+)", source)
        assert labels and values and top, source
        assert len(re.findall(r'"[^"]*"', labels.group(1))) == len(spec.bars)
        figures = [float(v) for v in values.group(1).split(", ")]
        assert len(figures) == len(spec.bars)
        assert max(figures) < float(top.group(1)), "the longest bar fits inside the axis"


def test_tables_are_found_under_their_headings_with_the_measured_date() -> None:
    tables = parse_tables(SMALL)
    assert [(t.section, t.subsection, t.header[0]) for t in tables] == [
        ("Speed", None, "client"),
        ("Speed", "Under load", "path"),
        ("Other", None, "client"),
    ]
    assert tables[0].rows[0] == ("llmchat: `stream()`", "1,234.5", "0.97x")
    assert [t.measured for t in tables] == ["2026-01-02", "2026-01-02", None]


def test_bars_take_rows_by_prefix_in_order_and_rows_with_the_same_prefix_in_turn() -> None:
    tables = parse_tables(SMALL)
    assert bars(find_table(tables, chart()), chart()) == [("llmchat", 1234.5), ("floor", 1200.0)]
    under_load = chart(
        subsection="Under load",
        column="p99 ms",
        where=("clients", "64"),
        bars=(Bar("proxy", "first"), Bar("proxy", "second")),
    )
    assert bars(find_table(tables, under_load), under_load) == [("first", 50.0), ("second", 40.0)]
    two_columns = chart(bars=(Bar("llmchat", "ms"), Bar("llmchat", "ratio", "x floor")))
    assert bars(find_table(tables, two_columns), two_columns) == [("ms", 1234.5), ("ratio", 0.97)]


def test_a_table_or_row_that_moved_is_an_error_naming_the_chart() -> None:
    tables = parse_tables(SMALL)
    with pytest.raises(ValueError, match="chart 'Speed': no table with 'µs'"):
        find_table(tables, chart(column="µs"))
    with pytest.raises(ValueError, match=r"chart 'Speed': no table .* under ## Speed / ### Gone"):
        find_table(tables, chart(subsection="Gone"))
    missing = chart(bars=(Bar("openai", "openai"),))
    with pytest.raises(ValueError, match="chart 'Speed': no row starting 'openai'"):
        bars(find_table(tables, missing), missing)
    with pytest.raises(ValueError, match="not a figure: 'n/a'"):
        number("n/a")


def test_figures_parse_as_written_and_axes_end_on_a_round_number_past_the_longest_bar() -> None:
    assert [number(c) for c in ("2,449.1", "+7.2", "0.97x", "-38", "0")] == [
        2449.1,
        7.2,
        0.97,
        -38.0,
        0.0,
    ]
    assert [nice_ceiling(v) for v in (120388, 583.6, 29, 0.3, 0)] == [150000, 800, 40, 0.4, 1]


def test_regenerating_replaces_only_the_block_between_the_markers() -> None:
    page = f"# Title\n\nProse.\n\n{START}\nstale\n{END}\n\nMore prose.\n"
    new = updated_page(page, BENCHMARKS)
    assert new.startswith(f"# Title\n\nProse.\n\n{START}\n")
    assert new.endswith(f"\n{END}\n\nMore prose.\n")
    assert "stale" not in new and render(BENCHMARKS) in new
    assert updated_page(new, BENCHMARKS) == new
    with pytest.raises(ValueError, match="charts:start"):
        updated_page("# no markers\n", BENCHMARKS)
