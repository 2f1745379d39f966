"""kooper / eager total pause of the simulated StatefulSet roll, per seed, on this tree and
optionally an older commit in the same run.

    .venv/bin/python benchmarks/bench_pause_ratio.py [--seeds 1-3] [--base COMMIT]

10 pods, 3 connectors x 10 tasks (33 resources), restarts 8-15 s, the StatefulSet's
controller rolling every pod (``bench_rollout.py``'s first row, here for several seeds):
per seed kooper's and eager's total pause and their ratio, then the ratio of the sums
(the simulator's 0.047 of docs/benchmarks.md is seeds 1-3 on ``56fe3b4``), the mean and
standard deviation of each protocol's pause, and the rounds per run. ``--base`` runs the
older commit's ``operator/`` (``trees.older``) first, in a child process.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import subprocess
import sys

import trees


def seeds_of(text: str) -> list[int]:
    lo, _, hi = text.partition("-")
    return list(range(int(lo), int(hi or lo) + 1))


def measure(seeds: list[int]) -> None:
    from kooper.core import events as ev
    from kooper.core import model
    from kooper.sim import metrics, rollout, runner, scenarios

    rows = []
    print("| seed | kooper pause ms | eager pause ms | ratio | kooper rounds | eager rounds |")
    print("|---:|---:|---:|---:|---:|---:|")
    for seed in seeds:
        config = runner.Config(pods=10, connectors=3, tasks=10, seed=seed)
        scenario = scenarios.build("rolling-restart", 10, rollout.StatefulSetRoll())
        kooper = runner.simulate(config, scenario)
        eager = runner.simulate(dataclasses.replace(config, protocol=model.Protocol.EAGER),
                                scenario)
        if kooper.violations or eager.violations:
            raise SystemExit(f"seed {seed}: violations")
        k = metrics.run_metrics(kooper.events).total_pause_ms
        e = metrics.run_metrics(eager.events).total_pause_ms
        rounds = [sum(1 for x in run.events if x.event is ev.Kind.ROUND)
                  for run in (kooper, eager)]
        rows.append((k, e, *rounds))
        print(f"| {seed} | {k:,d} | {e:,d} | {k / e:.4f} | {rounds[0]} | {rounds[1]} |",
              flush=True)
    k_all = [r[0] for r in rows]
    e_all = [r[1] for r in rows]

    def spread(xs: list[int]) -> str:
        return f" (sd {statistics.stdev(xs):,.0f})" if len(xs) > 1 else ""

    print(f"\nsum kooper / sum eager: {sum(k_all) / sum(e_all):.4f}; kooper mean "
          f"{statistics.mean(k_all):,.0f}{spread(k_all)}, eager mean "
          f"{statistics.mean(e_all):,.0f}{spread(e_all)}; rounds per run kooper "
          f"{statistics.mean(r[2] for r in rows):.1f}, "
          f"eager {statistics.mean(r[3] for r in rows):.1f}")


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--seeds", default="1-3", help="a seed or a range LO-HI (1-3)")
    parser.add_argument("--base", help="an older commit, run first")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    options = parser.parse_args()
    seeds = seeds_of(options.seeds)
    if options.base and not options.child:
        with trees.older(options.base) as base:
            print(f"== {options.base}", flush=True)
            env = {**os.environ, "PYTHONPATH": str(base / "operator")}
            subprocess.run([sys.executable, __file__, "--child", "--seeds", options.seeds],
                           env=env, check=True)
        print(f"\n== {trees.head()} (working tree)", flush=True)
    measure(seeds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
