"""Run every benchmark in turn, each in its own interpreter, refreshing all of BENCHMARKS.md.

Separate processes keep one script's imports and heap (litellm's, above all)
from slowing the next one down. Then the charts of docs/benchmarks.md are
regenerated from the new figures (bench/charts.py).

    python bench/run_all.py
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
SCRIPTS = (
    "bench_wire_json.py",
    "bench_normalize.py",
    "bench_import.py",
    "bench_request.py",
    "bench_stream.py",
    "bench_keepalive.py",
    "bench_dialects.py",
    "bench_proxy.py",
    "bench_proxy_cpu.py",  # the proxy in its own process: CPU per delta, at 1 and 32 streams
    "bench_ops.py",
    "bench_proxy_load.py",  # several minutes; LiteLLM's proxy needs the bench extra
    "bench_memory.py",
    "bench_stalled.py",
    "bench_routing.py",
    "bench_routing_real.py",  # three real llama-servers behind the routed proxy (the "real" extra)
    "bench_routing_workers.py",  # max_conns across two gunicorn workers on a real llama-server
    "bench_before_after.py",  # this tree against the commit before the restructure (git)
    "bench_real_llamacpp.py",  # needs the "real" extra; says so and fails alone without it
)


def main() -> int:
    """Run the scripts in order with this interpreter; return non-zero if any failed."""
    failed: list[str] = []
    for script in SCRIPTS:
        print(f"== {script}", flush=True)
        start = time.perf_counter()
        done = subprocess.run([sys.executable, str(HERE / script)], check=False)
        print(
            f"== {script}: exit {done.returncode} in {time.perf_counter() - start:.0f} s\n",
            flush=True,
        )
        if done.returncode:
            failed.append(script)
    # The charts are drawn from whatever figures BENCHMARKS.md now holds, even after a
    # failed script (its section keeps its last figures), so the page never lags the file.
    if subprocess.run([sys.executable, str(HERE / "charts.py")], check=False).returncode:
        failed.append("charts.py")
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    print("BENCHMARKS.md and the charts of docs/benchmarks.md updated")
    return 0


if __name__ == "__main__":
    sys.exit(main())
