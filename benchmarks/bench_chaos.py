"""Chaos with the fault families of issue 12, members as real SDK sessions (``make bench``).

Runs ``--count`` seeds of ``sim.chaos.run_hard`` from ``--start`` (default: 100,000
from 0) and prints the count, the time and the violations: safety (a resource on
two members at once, a per-task epoch that did not grow) and liveness (not
converged within the stated bound, work not running after quiescence). Every
failing seed is written with all its violations to ``--failures`` (one line per
seed, in seed order); the first ``--show`` are also printed. Exits 1 if any run
had a violation. ``--jobs N`` splits the seeds over N processes: each seed's
outcome depends on the seed alone, so the result is the same for any N.
``--progress N`` prints a line every N runs.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from kooper.sim import chaos


def _is_safety(violation: str) -> bool:
    return " while " in violation or " epoch " in violation or "overlaps" in violation \
        or "runs on" in violation


def _outcomes(start: int, count: int, jobs: int) -> Iterator[chaos.Outcome]:
    seeds = range(start, start + count)
    if jobs <= 1:
        yield from map(chaos.run_hard, seeds)
        return
    with multiprocessing.get_context("fork").Pool(jobs) as pool:
        # imap keeps seed order, so the output does not depend on the number of jobs.
        yield from pool.imap(chaos.run_hard, seeds, chunksize=50)


def main(argv: list[str] | None = None) -> int:
    """Run the seeds and print the summary."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--start", type=int, default=0, help="first seed")
    parser.add_argument("--count", type=int, default=100_000, help="number of runs")
    parser.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1),
                        help="worker processes (default: up to 2)")
    parser.add_argument("--failures", type=Path,
                        default=Path(tempfile.gettempdir()) / "kooper-chaos-failures.txt",
                        help="file to write every failing seed and its violations to")
    parser.add_argument("--show", type=int, default=20, help="failing seeds to print")
    parser.add_argument("--progress", type=int, default=0,
                        help="print a progress line every N runs (0: never)")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    safety = liveness = runs = 0
    kinds: dict[str, int] = {}
    with args.failures.open("w") as failures:
        for outcome in _outcomes(args.start, args.count, args.jobs):
            runs += 1
            unsafe = [v for v in outcome.violations if _is_safety(v)]
            safety += bool(unsafe)
            liveness += bool(outcome.violations) and not unsafe
            if outcome.violations:
                failures.write(f"seed {outcome.seed}: {' | '.join(outcome.violations)}\n")
                failures.flush()
                first = (unsafe or list(outcome.violations))[0]
                kind = first.split(":")[0] if first.startswith("end") else (
                    "safety" if unsafe else first[:30])
                kinds[kind] = kinds.get(kind, 0) + 1
                if safety + liveness <= args.show:
                    print(f"seed {outcome.seed}: {first}", flush=True)
            if args.progress and runs % args.progress == 0:
                print(f"... {runs} runs, {time.perf_counter() - started:.0f} s, runs with "
                      f"safety violations {safety}, liveness {liveness}", flush=True)
    elapsed = time.perf_counter() - started
    print(f"chaos (issue 12 families, SDK sessions): {runs} runs (seeds {args.start}.."
          f"{args.start + runs - 1}) in {elapsed:.1f} s with {args.jobs} job(s); runs with "
          f"safety violations {safety}, with liveness violations {liveness}", flush=True)
    if safety or liveness:
        print(f"every failing seed is in {args.failures}; by first violation: "
              + ", ".join(f"{k} {n}" for k, n in sorted(kinds.items())), flush=True)
    return 1 if safety or liveness else 0


if __name__ == "__main__":
    sys.exit(main())
