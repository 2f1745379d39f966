"""Chaos with the fault families of issue 12, members as real SDK sessions (``make bench``).

Runs ``--count`` seeds of ``sim.chaos.run_hard`` from ``--start`` (default: 100,000
from 0) and prints the count, the time and the runs with each kind of violation
(``CATEGORIES``): double ownership (a resource on two members at once), an epoch
reused (a per-task epoch that did not grow), a delay broken (lost work handed to
another member before the promised delay ran out) and liveness (not converged
within the stated bound, work not running or unbalanced after quiescence). Every
failing seed is written with all its violations to ``--failures`` (one line per
seed, in seed order); the first ``--show`` are also printed. Exits 1 if any run
had a violation. ``--jobs N`` splits the seeds over N processes: each seed's
outcome depends on the seed alone, so the result is the same for any N.
``--progress N`` prints a line every N runs. ``--families N`` picks the version of the
fault families (``chaos.run_hard``; 4: leader terms, stalled leaders, API restarts).
"""

from __future__ import annotations

import argparse
import functools
import multiprocessing
import os
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from kooper.sim import chaos

CATEGORIES = ("double ownership", "epoch reused", "delay broken", "liveness")
"""What a violation breaks, most serious first (a run counts once per category)."""


def category(violation: str) -> str:
    """The category of one of ``chaos.run_hard``'s violation messages."""
    if violation.startswith("delay:"):
        return "delay broken"
    if " epoch " in violation:
        return "epoch reused"
    if " while " in violation or "overlaps" in violation or "runs on" in violation:
        return "double ownership"
    return "liveness"  # lost after quiescence, not quiet in time, unbalanced


def _outcomes(start: int, count: int, jobs: int, families: int) -> Iterator[chaos.Outcome]:
    seeds = range(start, start + count)
    run = functools.partial(chaos.run_hard, families=families)
    if jobs <= 1:
        yield from map(run, seeds)
        return
    with multiprocessing.get_context("fork").Pool(jobs) as pool:
        # imap keeps seed order, so the output does not depend on the number of jobs.
        yield from pool.imap(run, seeds, chunksize=50)


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
    parser.add_argument("--families", type=int, default=4,
                        help="version of the fault families (chaos.run_hard; default 4)")
    parser.add_argument("--progress", type=int, default=0,
                        help="print a progress line every N runs (0: never)")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    runs = 0
    counts = dict.fromkeys(CATEGORIES, 0)
    kinds: dict[str, int] = {}

    def summary() -> str:
        return ", ".join(f"{name} {counts[name]}" for name in CATEGORIES)

    with args.failures.open("w") as failures:
        for outcome in _outcomes(args.start, args.count, args.jobs, args.families):
            runs += 1
            if outcome.violations:
                found = {category(v) for v in outcome.violations}
                for name in found:
                    counts[name] += 1
                failures.write(f"seed {outcome.seed}: {' | '.join(outcome.violations)}\n")
                failures.flush()
                worst = min(found, key=CATEGORIES.index)
                kinds[worst] = kinds.get(worst, 0) + 1
                if sum(kinds.values()) <= args.show:
                    first = next(v for v in outcome.violations if category(v) == worst)
                    print(f"seed {outcome.seed}: {first}", flush=True)
            if args.progress and runs % args.progress == 0:
                print(f"... {runs} runs, {time.perf_counter() - started:.0f} s, runs with "
                      f"{summary()}", flush=True)
    elapsed = time.perf_counter() - started
    print(f"chaos (families {args.families}, SDK sessions): {runs} runs (seeds {args.start}.."
          f"{args.start + runs - 1}) in {elapsed:.1f} s with {args.jobs} job(s); runs with "
          f"{summary()}", flush=True)
    if kinds:
        print(f"every failing seed is in {args.failures}", flush=True)
    return 1 if kinds else 0


if __name__ == "__main__":
    sys.exit(main())
