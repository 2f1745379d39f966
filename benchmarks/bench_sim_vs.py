"""The simulator's 1,000-pod rolling restart, an older commit and this tree in turn in one run.

    .venv/bin/python benchmarks/bench_sim_vs.py [--base 7127ad7] [--repeat 2]
        [--pods 1000] [--only N] [--profile DIR]

Each run is a fresh process (``python -c``, ``PYTHONPATH`` the tree's ``operator/``) that
simulates ``scenarios.rolling_restart(pods)`` at 1,000 connectors x 100 tasks, seed 1,
compatible/kooper (bench_sim.py's part 3, without the Parquet), and prints its CPU seconds
(``time.process_time``: comparable on a shared machine, unlike wall time), wall seconds,
events and rounds, and how the CPU splits: ``decide`` is the operator's decision function
(``control.step`` where the tree has one, else ``assignor.plan``, which the first release's
simulator called), ``simulate`` the rest (the simulator's own events, members and
reports). ``--only N``: only N of the pods restart, bench_sim.py's ``--quick``.
Trees alternate (base, this, base, ...). ``--profile DIR`` writes each
run's cProfile stats there and prints its top functions by own time.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import statistics
import sys

import trees

ROOT = pathlib.Path(__file__).resolve().parents[1]

CHILD = """
import cProfile, importlib, json, sys, time
from kooper.core import events as ev
from kooper.sim import runner, scenarios
pods, only, profile = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
try:
    owner, name = importlib.import_module("kooper.control.step"), "step"
except ImportError:
    owner, name = importlib.import_module("kooper.core.assignor"), "plan"
decided, real = [0.0], getattr(owner, name)
def timed(*args, **kwargs):
    started = time.process_time()
    try:
        return real(*args, **kwargs)
    finally:
        decided[0] += time.process_time() - started
setattr(owner, name, timed)
config = runner.Config(pods=pods, connectors=1000, tasks=100, seed=1)
scenario = scenarios.rolling_restart(pods, only=only or None)
profiler = cProfile.Profile() if profile else None
wall, cpu = time.perf_counter(), time.process_time()
if profiler:
    profiler.enable()
result = runner.simulate(config, scenario)
if profiler:
    profiler.disable()
    profiler.dump_stats(profile)
wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
print(json.dumps({"cpu": cpu, "decide": decided[0], "simulate": cpu - decided[0],
                  "wall": wall, "events": len(result.events),
                  "rounds": sum(1 for e in result.events if e.event is ev.Kind.ROUND),
                  "violations": len(result.violations)}))
"""


SECONDS = ("cpu", "decide", "simulate", "wall")
"""The measures in seconds (the others are counts)."""


def run(tree: pathlib.Path, pods: int, only: int, profile: str) -> dict[str, float]:
    out = trees.run(tree, ["-c", CHILD, str(pods), str(only), profile], echo=False)
    found: dict[str, float] = json.loads(out.strip().splitlines()[-1])
    return found


def top(path: str, count: int = 15) -> None:
    import pstats

    stats = pstats.Stats(path, stream=sys.stdout)
    stats.sort_stats("tottime").print_stats(count)


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--base", default="7127ad7", help="the older commit (the first release)")
    parser.add_argument("--repeat", type=int, default=2, help="runs of each tree")
    parser.add_argument("--pods", type=int, default=1000)
    parser.add_argument("--only", type=int, default=0, help="restart only N pods (0: all)")
    parser.add_argument("--profile", metavar="DIR", help="cProfile each run into DIR")
    options = parser.parse_args()
    head = trees.head()
    results: dict[str, list[dict[str, float]]] = {"base": [], "this": []}
    with trees.older(options.base) as base:
        for i in range(options.repeat):
            for name, tree in (("base", base), ("this", ROOT)):
                profile = (str(pathlib.Path(options.profile) / f"{name}-{i}.pstats")
                           if options.profile else "")
                found = run(tree, options.pods, options.only, profile)
                print(f"{name} run {i}: {json.dumps(found)}", file=sys.stderr, flush=True)
                results[name].append(found)
                if profile:
                    top(profile)
    restarted = f"{options.only} of them restarted" if options.only else "all restarted"
    print(f"{options.pods} pods x 1,000 connectors x 100 tasks, seed 1, rolling restart "
          f"({restarted}); "
          f"base {options.base}, this {head} (working tree); {options.repeat} run(s) each, "
          "alternating\n")
    print(f"| measure | {options.base} | {head} |")
    print("|---|---:|---:|")
    for key in ("cpu", "decide", "simulate", "wall", "events", "rounds", "violations"):
        cells = [" / ".join(f"{r[key]:,.1f}" if key in SECONDS else f"{r[key]:,.0f}"
                            for r in results[name]) for name in ("base", "this")]
        medians = [statistics.median(r[key] for r in results[name]) for name in ("base", "this")]
        print(f"| {key} (each run) | {cells[0]} (median {medians[0]:,.1f}) | "
              f"{cells[1]} (median {medians[1]:,.1f}) |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
