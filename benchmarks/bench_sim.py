"""Simulated drills: pause time by protocol and policy, and simulator speed.

1. The seed-002 shape: 10 pods rolling restart (3 connectors x 10 tasks), eager
   vs compatible(kip415) vs compatible(kooper): total pause, ratio to eager, and
   undisturbed pause on a half roll (5 of 10 pods). Seed 002 measured 37,138 ms
   eager vs 3,522 ms cooperative (0.095) on the embedded cluster.
2. Kafka's rolling-restart pitfall: 4 pods x 4 resources, each pod down 60 s,
   restarted 10 s apart, 300 s max delay: kip415 vs kooper.
3. Simulator wall time: rolling restart of 100 pods x 10,000 tasks, and of
   1,000 pods x 100,000 tasks (``--full``; else only the first ``--scale-pods``
   pods of the 1,000 restart and the whole roll is extrapolated per pod).

    .venv/bin/python benchmarks/bench_sim.py [--seeds 5] [--full | --scale-pods 20] [--no-scale]
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import time

from kooper.core import model
from kooper.sim import metrics, runner, scenarios

P = model.Protocol
Q = model.Policy
COMBOS = (("eager", P.EAGER, Q.KOOPER), ("compatible/kip415", P.COMPATIBLE, Q.KIP415),
          ("compatible/kooper", P.COMPATIBLE, Q.KOOPER))


def mean_metrics(config: runner.Config, scenario: scenarios.Scenario,
                 seeds: int) -> dict[str, float]:
    runs = [
        metrics.run_metrics(runner.simulate(dataclasses.replace(config, seed=seed),
                                            scenario).events)
        for seed in range(seeds)
    ]
    return {
        "total": statistics.mean(m.total_pause_ms for m in runs),
        "max": statistics.mean(m.max_pause_ms for m in runs),
        "undisturbed": statistics.mean(m.undisturbed_pause_ms for m in runs),
        "undisturbed_resources": statistics.mean(m.undisturbed_resources for m in runs),
        "converge": statistics.mean(m.converge_ms or 0 for m in runs),
        "moves": statistics.mean(m.moves for m in runs),
        "overlaps": sum(m.overlaps for m in runs),
    }


def seed_002(seeds: int) -> None:
    print("== 1. rolling restart, 10 pods, 3 connectors x 10 tasks "
          f"(mean of {seeds} seeds; restart 8-15 s, start 0.2-0.8 s, stop 0.1-0.4 s)")
    for label, latencies in (("default latencies", runner.Latencies()),
                             ("fast restart 1-3 s", runner.Latencies(
                                 restart=runner.Span(1_000, 3_000))),
                             ("sub-second restart 0.2-0.5 s, ready 0.2-0.5 s", runner.Latencies(
                                 restart=runner.Span(200, 500), ready=runner.Span(200, 500)))):
        print(f"-- {label}")
        full = scenarios.rolling_restart(10)
        half = scenarios.rolling_restart(10, only=5)
        eager_total = 0.0
        for name, protocol, policy in COMBOS:
            config = runner.Config(pods=10, connectors=3, tasks=10, protocol=protocol,
                                   policy=policy, latencies=latencies)
            roll = mean_metrics(config, full, seeds)
            part = mean_metrics(config, half, seeds)
            if protocol is P.EAGER:
                eager_total = roll["total"]
            print(f"  {name:18s} total pause {roll['total']:>11,.0f} ms  ratio vs eager "
                  f"{roll['total'] / eager_total:6.3f}  moves {roll['moves']:5.1f}  "
                  f"overlaps {roll['overlaps']}  | half roll: undisturbed pause "
                  f"{part['undisturbed']:>9,.0f} ms over {part['undisturbed_resources']:.0f} "
                  "resources")


def pitfall(seeds: int) -> None:
    print(f"== 2. Kafka's rolling-restart pitfall: 4 pods x 4 resources, each down 60 s, "
          f"10 s apart, max delay 300 s (mean of {seeds} seeds)")
    scenario = scenarios.rolling_restart(4, down_ms=60_000, spacing_ms=10_000)
    for name, protocol, policy in COMBOS[1:]:
        config = runner.Config(pods=4, connectors=4, tasks=3, protocol=protocol,
                               policy=policy, delay_ms=300_000)
        m = mean_metrics(config, scenario, seeds)
        print(f"  {name:18s} total pause {m['total']:>11,.0f} ms  max pause {m['max']:>9,.0f} ms"
              f"  all running after {m['converge']:>9,.0f} ms")


def scale(full: bool, scale_pods: int) -> None:
    print("== 3. simulator wall time, rolling restart (compatible/kooper)")
    for pods, connectors, tasks, only in ((100, 10, 1_000, None),
                                          (1_000, 100, 1_000, None if full else scale_pods)):
        config = runner.Config(pods=pods, connectors=connectors, tasks=tasks, seed=1)
        if only is not None:
            started = time.perf_counter()
            runner.simulate(config, scenarios.rolling_restart(pods, only=0))
            formed = time.perf_counter() - started
        started = time.perf_counter()
        result = runner.simulate(config, scenarios.rolling_restart(pods, only=only))
        elapsed = time.perf_counter() - started
        m = metrics.run_metrics(result.events)
        line = (f"  {pods:5d} pods x {connectors * tasks:7,d} tasks: "
                f"{len(result.events):>9,d} events, {m.rounds} rounds, {elapsed:6.1f} s wall, "
                f"{result.end_ms / 1000:,.0f} s simulated, overlaps {m.overlaps}")
        if only is not None:
            per_pod = (elapsed - formed) / only
            line += (f"  [{only} of {pods} pods restarted; forming {formed:.1f} s + "
                     f"{per_pod:.2f} s/pod -> whole roll ~{formed + per_pod * pods:,.0f} s]")
        print(line, flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--full", action="store_true",
                        help="restart all 1,000 pods of the scale run (minutes)")
    parser.add_argument("--scale-pods", type=int, default=20)
    parser.add_argument("--no-scale", action="store_true", help="skip part 3")
    args = parser.parse_args()
    seed_002(args.seeds)
    pitfall(args.seeds)
    if not args.no_scale:
        scale(args.full, args.scale_pods)


if __name__ == "__main__":
    main()
