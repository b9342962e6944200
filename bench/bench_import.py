"""Time `import llmchat` in a fresh interpreter against `import requests` and bare startup.

A CLI or a short script pays the import on every run, so llmchat should cost
about what its one HTTP dependency, requests, costs (target: at most 1.2x).
Each command runs in its own subprocess, interleaved round by round so that
machine noise hits all of them alike; medians are reported. `openai` and
`litellm`, when installed, are timed in the same rounds for comparison.

`import llmchat` alone imports no backend (each public name is imported when
first named), so the rounds also time ``from llmchat import OpenAICommon``,
what a script that talks to a server runs, against the same 1.2x target.

    python bench/bench_import.py [--quick] [--no-write]
"""

from __future__ import annotations

import argparse
import importlib.util
import itertools
import os
import statistics
import subprocess
import sys
import time

from _report import BENCHMARKS_MD, NOT_INSTALLED, ROOT, stamp, table, write_section

SECTION = "import llmchat: start-up cost"
ROUNDS = 15
QUICK_ROUNDS = 5
TARGET_RATIO = 1.2
BACKEND_IMPORT = "from llmchat import OpenAICommon"
# Children write byte-code caches even when this process may not: requests is
# installed with its caches, and a checkout's llmchat without them would be
# timed compiling its source on every run.
_ENV = {name: value for name, value in os.environ.items() if name != "PYTHONDONTWRITEBYTECODE"}


def _run(code: str) -> float:
    """Seconds for one `python -c code` from spawn to exit (run in the repository root)."""
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=_ENV, check=True)
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
        env=_ENV,
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


def _breakdown() -> list[str]:
    """Print, and return as Markdown, what the imports load (`python -X importtime`, one run)."""
    startup = importtime("pass")
    with_requests = importtime("import requests")
    alone = [n for n in importtime("import llmchat") if n not in startup]
    mine = importtime(BACKEND_IMPORT)
    loaded = {n: cum for n, (_own, cum) in mine.items() if n not in startup}
    top = _top(loaded)
    outside = _top({n: us for n, us in loaded.items() if n.partition(".")[0] != "llmchat"})
    extra = {n: own for n, (own, _cum) in mine.items() if n not in with_requests}
    extra_ms = sum(extra.values()) / 1e3
    print(f"`import llmchat` loads {len(alone)} modules beyond start-up: {', '.join(alone)}")
    print(f"`{BACKEND_IMPORT}` loads {len(loaded)} modules beyond start-up; top cumulative:")
    for name, micros in top:
        print(f"  {name:<40} {micros / 1e3:8.1f} ms")
    print("outside the llmchat package:")
    for name, micros in outside:
        print(f"  {name:<40} {micros / 1e3:8.1f} ms")
    print(f"beyond what `import requests` loads: {len(extra)} modules, {extra_ms:.1f} ms own time:")
    for name, micros in _top(extra):
        print(f"  {name:<40} {micros / 1e3:8.1f} ms")
    return [
        f"`python -X importtime` (one run): `import llmchat` alone loads {len(alone)} modules "
        f"beyond interpreter start-up ({', '.join(f'`{n}`' for n in alone)}); "
        f"`{BACKEND_IMPORT}` loads {len(loaded)}. The five with the largest cumulative "
        "time, and the five largest from outside the llmchat package (what it pulls in):",
        "",
        table(
            ["module", "cumulative ms", "outside llmchat", "cumulative ms"],
            [_cells(a) + _cells(b) for a, b in itertools.zip_longest(top, outside)],
            align="lrlr",
        ),
        "",
        f"Beyond what `import requests` itself loads, `{BACKEND_IMPORT}` adds {len(extra)} "
        f"modules, {extra_ms:.1f} ms of their own import time; the largest: "
        + ", ".join(f"`{n}` {us / 1e3:.1f} ms" for n, us in _top(extra))
        + ".",
    ]


def main(argv: list[str] | None = None) -> int:
    """Run the interleaved rounds, print the medians and record them."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=ROUNDS)
    parser.add_argument("--quick", action="store_true", help=f"a smoke run: {QUICK_ROUNDS} rounds")
    parser.add_argument("--no-write", action="store_true", help="do not update BENCHMARKS.md")
    args = parser.parse_args(argv)
    if args.quick:
        args.rounds = QUICK_ROUNDS

    commands = {"python -c pass": "pass", "import requests": "import requests"}
    commands["import llmchat"] = "import llmchat"
    commands[BACKEND_IMPORT] = BACKEND_IMPORT
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
        print(f"{cells[0]:<36} {cells[1]:>14} {cells[2]:>24} {cells[3]:>16} {cells[4]:>11}")
    verdicts = []
    for label in ("import llmchat", BACKEND_IMPORT):
        ratio = medians[label] / requests
        net_ratio = (medians[label] - bare) / (requests - bare)
        verdict = "within" if ratio <= TARGET_RATIO else "ABOVE"
        verdicts.append(
            f"`{label}` / `import requests` = **{ratio:.2f}x** ({verdict} the "
            f"{TARGET_RATIO:g}x target); net of bare interpreter start-up, {net_ratio:.2f}x."
        )
        print(verdicts[-1].replace("*", "").replace("`", ""))

    markdown = [
        stamp(),
        "",
        f"Each command in a fresh `{sys.executable.rsplit('/', 1)[-1]} -c …` subprocess, "
        f"{args.rounds} interleaved rounds after one warm-up round; wall time from spawn "
        "to exit, with byte-code caches written (as an installed package has them).",
        "",
        table(header, rows),
        "",
        *[f"{line}\n" for line in verdicts],
        *_breakdown(),
    ]
    if not args.no_write:
        write_section(BENCHMARKS_MD, SECTION, "\n".join(markdown))
    return 0


if __name__ == "__main__":
    sys.exit(main())
