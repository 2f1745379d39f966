"""Chaos with the fault families of issue 12, members as real SDK sessions (``make bench``).

Runs ``--count`` seeds of ``sim.chaos.run_hard`` from ``--start`` (default: 100,000
from 0) and prints the count, the time and the violations: safety (a resource on
two members at once, a per-task epoch that did not grow) and liveness (not
converged within the stated bound, work not running after quiescence). Exits 1 if
any run had a violation. ``--progress N`` prints a line every N runs.
"""

from __future__ import annotations

import argparse
import sys
import time

from kooper.sim import chaos


def main(argv: list[str] | None = None) -> int:
    """Run the seeds and print the summary."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--start", type=int, default=0, help="first seed")
    parser.add_argument("--count", type=int, default=100_000, help="number of runs")
    parser.add_argument("--progress", type=int, default=0,
                        help="print a progress line every N runs (0: never)")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    safety = liveness = runs = 0
    failed: list[int] = []
    for seed in range(args.start, args.start + args.count):
        outcome = chaos.run_hard(seed)
        runs += 1
        unsafe = [v for v in outcome.violations
                  if " while " in v or " epoch " in v or "overlaps" in v]
        safety += bool(unsafe)
        liveness += bool(outcome.violations) and not unsafe
        if outcome.violations:
            failed.append(seed)
            if len(failed) <= 20:
                print(f"seed {seed}: {outcome.violations[0]}", flush=True)
        if args.progress and runs % args.progress == 0:
            print(f"... {runs} runs, {time.perf_counter() - started:.0f} s, runs with safety "
                  f"violations {safety}, liveness {liveness}", flush=True)
    elapsed = time.perf_counter() - started
    print(f"chaos (issue 12 families, SDK sessions): {runs} runs (seeds {args.start}.."
          f"{args.start + runs - 1}) in {elapsed:.1f} s; runs with safety violations "
          f"{safety}, with liveness violations {liveness}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
