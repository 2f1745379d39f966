"""Unplanned departures (issue 11 item 3): per-departure grace and wait-or-move, simulated.

1. Kill and scale drills, 10 pods x 3 connectors x 10 tasks (default latencies: pods
   restart in 8-15 s, a handoff costs about 0.9 s), compatible/kooper, 300 s delay:
   total pause, longest pause, moves (mean over seeds). ``kill-one``, ``kill-many``,
   ``flapping``, ``scale-up`` and ``scale-down`` are ``kooper drill SCENARIO --sim``'s
   scenarios; ``kill-roll`` kills every pod in turn (a rolling restart by SIGKILL).
2. The per-departure grace repro: pod 2 is killed at t0 and pod 3 at t0 + 290 s, both
   staying away for an hour. The grace pod 3's work got: from its kill to the first
   start of its work elsewhere (KIP-415's single deadline gives it 10 s).

    .venv/bin/python benchmarks/bench_grace.py [--seeds 5]

It runs against whatever ``kooper`` is importable, so the same command measures a
checkout before and after a change.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics

from kooper.core import events as ev
from kooper.core import model
from kooper.sim import metrics, runner, scenarios

A = scenarios.Action
HOUR = 3_600_000
CONFIG = runner.Config(pods=10, connectors=3, tasks=10, delay_ms=300_000)


def drills() -> dict[str, scenarios.Scenario]:
    found = {name: scenarios.build(name, CONFIG.pods)
             for name in ("kill-one", "kill-many", "flapping", "scale-up", "scale-down")}
    found["kill-roll"] = scenarios.rolling_restart(CONFIG.pods, action=A.KILL)
    return found


def grace_of_the_second(result: runner.Result, second: str) -> float:
    """Seconds from ``second``'s departure until the first of its work starts elsewhere."""
    held: set[str] = set()
    left_at: int | None = None
    for event in result.events:
        if left_at is None:
            if event.member == second and event.event is ev.Kind.STOP:
                held.add(event.resource)
            if event.member == second and event.event is ev.Kind.LEAVE:
                left_at = event.ts_ms
            continue
        if event.event is ev.Kind.START and event.resource in held:
            return (event.ts_ms - left_at) / 1000
    return float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5)
    args = parser.parse_args()
    seeds = range(args.seeds)
    print(f"== 1. drills, {CONFIG.pods} pods x {CONFIG.connectors} x {CONFIG.tasks}, "
          f"compatible/kooper, delay 300 s (mean of {args.seeds} seeds)")
    for name, scenario in drills().items():
        runs = [metrics.run_metrics(runner.simulate(
            dataclasses.replace(CONFIG, seed=seed), scenario).events) for seed in seeds]
        print(f"  {name:11s} total pause {statistics.mean(m.total_pause_ms for m in runs):>11,.0f}"
              f" ms  max pause {statistics.mean(m.max_pause_ms for m in runs):>9,.0f} ms"
              f"  moves {statistics.mean(m.moves for m in runs):5.1f}"
              f"  overlaps {sum(m.overlaps for m in runs)}", flush=True)
    print("== 2. per-departure grace: pod 2 killed at t0, pod 3 at t0 + 290 s, both away 1 h")
    two = scenarios.Scenario("two-departures", (
        scenarios.Step(A.KILL, pod=2, down_ms=HOUR),
        scenarios.Step(A.KILL, pod=3, delay_ms=290_000, down_ms=HOUR)))
    for policy in (model.Policy.KIP415, model.Policy.KOOPER):
        graces = [grace_of_the_second(runner.simulate(
            dataclasses.replace(CONFIG, seed=seed, policy=policy), two), "sim-3")
            for seed in seeds]
        print(f"  {policy!s:7s} pod 3's work waited {statistics.mean(graces):6.1f} s "
              f"(min {min(graces):.1f}, max {max(graces):.1f})", flush=True)


if __name__ == "__main__":
    main()
