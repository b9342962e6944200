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


def imported_by(module: str) -> dict[str, int]:
    """Modules `import module` loads beyond bare start-up, with cumulative µs each.

    From one `python -X importtime` run. A module listed twice (the nested
    import and the ``from … import`` that triggered it) keeps its larger time.
    """

    def importtime(code: str) -> dict[str, int]:
        done = subprocess.run(
            [sys.executable, "-X", "importtime", "-c", code],
            cwd=ROOT,
            check=True,
            capture_output=True,
            text=True,
        )
        entries: dict[str, int] = {}
        for line in done.stderr.splitlines():
            if not line.startswith("import time:") or "cumulative" in line:
                continue
            _self, cumulative, name = line.removeprefix("import time:").split("|")
            name = name.strip()
            entries[name] = max(entries.get(name, 0), int(cumulative))
        return entries

    startup = importtime("pass")
    return {name: us for name, us in importtime(f"import {module}").items() if name not in startup}


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
        _run(code)
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
        spread = statistics.quantiles(samples[label], n=4) if len(samples[label]) > 1 else [0, 0, 0]
        rows.append(
            [
                f"`{label}`",
                f"{median * 1e3:,.1f}",
                f"{(median - bare) * 1e3:,.1f}",
                f"{spread[0] * 1e3:,.1f}-{spread[2] * 1e3:,.1f}",
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

    loaded = imported_by("llmchat")
    top = _top(loaded)
    outside = _top({n: us for n, us in loaded.items() if n.partition(".")[0] != "llmchat"})
    print(f"`import llmchat` loads {len(loaded)} modules beyond start-up; top cumulative:")
    for name, micros in top:
        print(f"  {name:<40} {micros / 1e3:8.1f} ms")
    print("outside the llmchat package:")
    for name, micros in outside:
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
        ),
    ]
    if not args.no_write:
        write_section(BENCHMARKS_MD, SECTION, "\n".join(markdown))
    return 0


if __name__ == "__main__":
    sys.exit(main())
