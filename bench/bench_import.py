"""Time `import llmchat` in a fresh interpreter against `import requests` and bare startup.

A CLI or a short script pays the import on every run, so llmchat should cost
about what its one HTTP dependency, requests, costs (target: at most 1.2x).
Each command runs in its own subprocess, interleaved round by round so that
machine noise hits all of them alike; medians are reported. `openai` and
`litellm`, when installed, are timed in the same rounds for comparison.

    python bench/bench_import.py
"""

from __future__ import annotations

import argparse
import importlib.util
import itertools
import statistics
import subprocess
import sys
import time

from _report import BENCHMARKS_MD, NOT_INSTALLED, ROOT, stamp, table, write_section

SECTION = "import llmchat: start-up cost"
ROUNDS = 15
TARGET_RATIO = 1.2


def _run(code: str) -> float:
    """Seconds for one `python -c code` from spawn to exit (run in the repository root)."""
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True)
    return time.perf_counter() - start


def _importable(name: str) -> bool:
    return importlib.util.find_spec(name) is not None


def importtime(code: str) -> dict[str, tuple[int, int]]:
    """Every module `python -X importtime -c code` loads: name -> (self µs, cumulative µs).

    A module listed twice (the nested import and the ``from … import`` that
    triggered it) keeps its larger figures.
    """
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", code],
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
    )
    entries: dict[str, tuple[int, int]] = {}
    for line in done.stderr.splitlines():
        if not line.startswith("import time:") or "cumulative" in line:
            continue
        own, cumulative, name = line.removeprefix("import time:").split("|")
        name = name.strip()
        old = entries.get(name, (0, 0))
        entries[name] = (max(old[0], int(own)), max(old[1], int(cumulative)))
    return entries


def _cells(entry: tuple[str, int] | None) -> list[str]:
    return ["", ""] if entry is None else [f"`{entry[0]}`", f"{entry[1] / 1e3:,.1f}"]


def _top(entries: dict[str, int], count: int = 5) -> list[tuple[str, int]]:
    return sorted(entries.items(), key=lambda entry: -entry[1])[:count]


def main(argv: list[str] | None = None) -> int:
    """Run the interleaved rounds, print the medians and record them."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=ROUNDS)
    parser.add_argument("--no-write", action="store_true", help="do not update BENCHMARKS.md")
    args = parser.parse_args(argv)

    commands = {"python -c pass": "pass", "import requests": "import requests"}
    commands["import llmchat"] = "import llmchat"
    missing: dict[str, str] = {}
    for optional in ("openai", "litellm"):
        if _importable(optional):
            commands[f"import {optional}"] = f"import {optional}"
        else:
            missing[f"import {optional}"] = NOT_INSTALLED

    for code in commands.values():  # warm-up: byte-code caches and the OS file cache
        for attempt in range(3):  # a module mid-edit by someone else may fail to import
            try:
                _run(code)
                break
            except subprocess.CalledProcessError:
                if attempt == 2:
                    raise
                time.sleep(5)
    samples: dict[str, list[float]] = {label: [] for label in commands}
    for _ in range(args.rounds):
        for label, code in commands.items():
            samples[label].append(_run(code))

    medians = {label: statistics.median(times) for label, times in samples.items()}
    bare = medians["python -c pass"]
    requests = medians["import requests"]
    ratio = medians["import llmchat"] / requests
    net_ratio = (medians["import llmchat"] - bare) / (requests - bare)

    rows: list[list[str]] = []
    for label, median in medians.items():
        quartiles = statistics.quantiles(samples[label], n=4) if args.rounds > 1 else None
        rows.append(
            [
                f"`{label}`",
                f"{median * 1e3:,.1f}",
                f"{(median - bare) * 1e3:,.1f}",
                f"{quartiles[0] * 1e3:,.1f}-{quartiles[2] * 1e3:,.1f}" if quartiles else "—",
                f"{median / requests:.2f}x",
            ]
        )
    rows += [[f"`{label}`", note, "", "", ""] for label, note in missing.items()]
    header = ["command", "median ms", "minus bare start-up ms", "IQR ms", "x requests"]
    for cells in [header, *rows]:
        print(f"{cells[0]:<22} {cells[1]:>14} {cells[2]:>24} {cells[3]:>16} {cells[4]:>11}")
    verdict = "within" if ratio <= TARGET_RATIO else "ABOVE"
    print(
        f"llmchat / requests = {ratio:.2f}x ({verdict} the {TARGET_RATIO:g}x target); "
        f"net of bare start-up {net_ratio:.2f}x"
    )

    startup = importtime("pass")
    with_requests = importtime("import requests")
    mine = importtime("import llmchat")
    loaded = {n: cum for n, (_own, cum) in mine.items() if n not in startup}
    top = _top(loaded)
    outside = _top({n: us for n, us in loaded.items() if n.partition(".")[0] != "llmchat"})
    extra = {n: own for n, (own, _cum) in mine.items() if n not in with_requests}
    extra_ms = sum(extra.values()) / 1e3
    print(f"`import llmchat` loads {len(loaded)} modules beyond start-up; top cumulative:")
    for name, micros in top:
        print(f"  {name:<40} {micros / 1e3:8.1f} ms")
    print("outside the llmchat package:")
    for name, micros in outside:
        print(f"  {name:<40} {micros / 1e3:8.1f} ms")
    print(f"beyond what `import requests` loads: {len(extra)} modules, {extra_ms:.1f} ms own time:")
    for name, micros in _top(extra):
        print(f"  {name:<40} {micros / 1e3:8.1f} ms")

    markdown = [
        stamp(),
        "",
        f"Each command in a fresh `{sys.executable.rsplit('/', 1)[-1]} -c …` subprocess, "
        f"{args.rounds} interleaved rounds after one warm-up round; wall time from spawn "
        "to exit.",
        "",
        table(header, rows),
        "",
        f"**llmchat / requests = {ratio:.2f}x** ({verdict} the {TARGET_RATIO:g}x target); "
        f"net of bare interpreter start-up, {net_ratio:.2f}x.",
        "",
        f'`python -X importtime -c "import llmchat"` (one run): {len(loaded)} modules loaded '
        "beyond interpreter start-up. The five with the largest cumulative time, and the "
        "five largest from outside the llmchat package (what it pulls in):",
        "",
        table(
            ["module", "cumulative ms", "outside llmchat", "cumulative ms"],
            [_cells(a) + _cells(b) for a, b in itertools.zip_longest(top, outside)],
            align="lrlr",
        ),
        "",
        f"Beyond what `import requests` itself loads, `import llmchat` adds {len(extra)} "
        f"modules, {extra_ms:.1f} ms of their own import time; the largest: "
        + ", ".join(f"`{n}` {us / 1e3:.1f} ms" for n, us in _top(extra))
        + ".",
    ]
    if not args.no_write:
        write_section(BENCHMARKS_MD, SECTION, "\n".join(markdown))
    return 0


if __name__ == "__main__":
    sys.exit(main())
