"""The same paths timed on two versions of llmchat in one run: did a change cost speed?

    python bench/bench_before_after.py [--before REV] [--after REV] [--rounds N] [--repeat M]
                                       [--no-write]

`REV`'s ``llmchat/`` is unpacked (``git archive``) into a temporary folder;
the other side is this checkout's working tree, or `--after REV` unpacked the
same way. Each round starts one `_before_after_probe.py` process per side,
in alternating order (so a busy moment of the machine falls on both sides),
and each process times every path
from the same measuring code: llmchat direct to a loopback server (a
2,000-frame stream in 64 KiB writes and with a write per frame, a short
blocking request), and raw readers of each face of `llmchat proxy` (1,000
deltas) plus a short Ollama request through it. A figure is the median over
rounds of each process's best. The default `REV` is the last commit before
the restructuring step (issue 26), so the section answers "did the new layout
cost anything".
"""

from __future__ import annotations

import argparse
import io
import json
import statistics
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

from _report import BENCHMARKS_MD, ROOT, stamp, table, write_section

BEFORE = "d7c0b54"
"""The last commit before step 3 (issue 26) moved anything."""

PROBE = Path(__file__).resolve().parent / "_before_after_probe.py"
TITLE = "Before and after the restructure (step 3)"


def unpack(rev: str, into: Path) -> str:
    """Write `rev`'s ``llmchat/`` under `into`; return the commit's short hash."""
    commit = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short", rev],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", "--format=tar", commit, "llmchat"],
        check=True,
        capture_output=True,
    ).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")
    return commit


def probe(tree: Path, repeat: int) -> dict[str, float]:
    """One probe process's best seconds per path, with llmchat imported from `tree`."""
    out = subprocess.run(
        [sys.executable, str(PROBE), str(tree), "--repeat", str(repeat)],
        check=True,
        capture_output=True,
        text=True,
        cwd=PROBE.parent,
    ).stdout
    result = json.loads(out.strip().splitlines()[-1])
    imported = Path(result["llmchat"]).resolve()
    if not imported.is_relative_to(tree.resolve()):
        raise RuntimeError(f"the probe imported {imported}, not the tree under test {tree}")
    return {name: float(value) for name, value in result["seconds"].items()}


def head() -> str:
    """This checkout's commit, marked when the working tree has changes."""
    commit = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    dirty = subprocess.run(
        ["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no", "llmchat"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    return commit + (" + uncommitted changes" if dirty else "")


def main(argv: list[str] | None = None) -> int:
    """Time both sides in alternating rounds; print and record the medians and ratios."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", default=BEFORE, help="the commit to compare against")
    parser.add_argument(
        "--after", default=None, help="a commit for the other side (default: this working tree)"
    )
    parser.add_argument("--rounds", type=int, default=7, help="probe processes per side")
    parser.add_argument("--repeat", type=int, default=5, help="timed runs per path per process")
    parser.add_argument("--no-write", action="store_true", help="do not update BENCHMARKS.md")
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="llmchat-before-") as folder:
        before_tree, after_tree = Path(folder, "before"), Path(folder, "after")
        before = unpack(args.before, before_tree)
        if args.after is None:
            after, after_tree = head(), ROOT
        else:
            after = unpack(args.after, after_tree)
        sides = {"before": before_tree, "after": after_tree}
        runs: dict[str, list[dict[str, float]]] = {"before": [], "after": []}
        for index in range(args.rounds):
            order = ["before", "after"] if index % 2 == 0 else ["after", "before"]
            for side in order:
                runs[side].append(probe(sides[side], args.repeat))
            print(f"round {index + 1}/{args.rounds} done", flush=True)

    names = list(runs["after"][0])
    rows = []
    for name in names:
        old = statistics.median(run[name] for run in runs["before"])
        new = statistics.median(run[name] for run in runs["after"])
        unit, scale = ("µs", 1e6) if new < 0.01 else ("ms", 1e3)
        rows.append(
            [name, f"{old * scale:,.1f} {unit}", f"{new * scale:,.1f} {unit}", f"{new / old:.3f}"]
        )
        print(
            f"  {name:<30} before {old * scale:10.1f} {unit}  after {new * scale:10.1f} {unit}"
            f"  after/before {new / old:.3f}"
        )

    markdown = "\n".join(
        [
            stamp(),
            "",
            f"Before: `{before}`; after: `{after}`. {args.rounds} probe processes per side in "
            f"alternating order, each the best of {args.repeat} runs per path; the median "
            "over processes. The same measuring code for both sides "
            "(`bench/_before_after_probe.py`); only the imported llmchat differs.",
            "",
            table(["path", "before", "after", "after / before"], rows, align="lrrr"),
            "",
            "A ratio within a few percent of 1.000 is noise on this machine; the streams are "
            "1,000 (proxy) or 2,000 (direct) deltas each.",
        ]
    )
    if not args.no_write:
        write_section(BENCHMARKS_MD, TITLE, markdown)
        print(f"wrote the section {TITLE!r} of {BENCHMARKS_MD.name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
