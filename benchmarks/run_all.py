"""Run every benchmark in turn and print its output (``make bench``).

A benchmark script that does not exist (yet) is skipped with a line.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
BENCHMARKS = (
    "bench_assignor.py",
    "bench_codec.py",
    "bench_sim.py",
    "bench_chaos.py",
    "bench_chaos_real.py",
    "bench_rollout.py",
    "bench_grace.py",
    "bench_operator.py",
    "bench_join_writes.py",
    "bench_memory.py",
    "bench_analytics.py",
    "bench_kind.py",
)


def main() -> int:
    """Run each benchmark with this interpreter; exit non-zero if any failed."""
    failed = []
    for name in BENCHMARKS:
        path = HERE / name
        if not path.exists():
            print(f"### {name}: not present, skipped", flush=True)
            continue
        print(f"### {name}", flush=True)
        started = time.perf_counter()
        code = subprocess.call([sys.executable, str(path)], cwd=HERE.parent)
        print(f"### {name}: exit {code} after {time.perf_counter() - started:.1f} s", flush=True)
        if code:
            failed.append(name)
    if failed:
        print(f"failed: {', '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
