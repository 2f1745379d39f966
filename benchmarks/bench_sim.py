"""Simulated drills: pause time by protocol and policy, and simulator speed.

1. The seed-002 shape: 10 pods rolling restart (3 connectors x 10 tasks), eager
   vs compatible(kip415) vs compatible(kooper): total pause, ratio to eager, and
   undisturbed pause on a half roll (5 of 10 pods). Seed 002 measured 37,138 ms
   eager vs 3,522 ms cooperative (0.095) on the embedded cluster.
2. Kafka's rolling-restart pitfall: 4 pods x 4 resources, each pod down 60 s,
   restarted 10 s apart, 300 s max delay: kip415 vs kooper.
3. Simulator time: full rolling restarts of 100 pods x 10,000 tasks (two shapes)
   and of 1,000 pods x 100,000 tasks (1,000 connectors x 100 tasks, the shape of
   ``kooper drill rolling-restart --sim --pods 1000 --connectors 1000 --tasks 100``),
   whose event log is written to Parquet as the CLI does (``--quick``: only
   ``--scale-pods`` of the 1,000 pods restart).

    .venv/bin/python benchmarks/bench_sim.py [--seeds 5] [--quick [--scale-pods 20]] [--no-scale]
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import time
from pathlib import Path

from kooper.commands import drill
from kooper.core import events as ev
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


def scale(quick: bool, scale_pods: int, out: Path | None) -> None:
    print("== 3. simulator time, rolling restart (compatible/kooper, seed 1): wall and CPU "
          "seconds of the simulation; the 1,000-pod roll also writes its event log to "
          "Parquet like `kooper drill --out`")
    for pods, connectors, tasks in ((100, 10, 1_000), (100, 100, 100), (1_000, 1_000, 100)):
        only = scale_pods if quick and pods == 1_000 else None
        config = runner.Config(pods=pods, connectors=connectors, tasks=tasks, seed=1)
        started, cpu = time.perf_counter(), time.process_time()
        result = runner.simulate(config, scenarios.rolling_restart(pods, only=only))
        elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
        rounds = sum(1 for event in result.events if event.event is ev.Kind.ROUND)
        overlaps = len(result.violations)
        line = (f"  {pods:5d} pods x {connectors:5,d} connectors x {tasks:5,d} tasks: "
                f"{len(result.events):>9,d} events, {rounds:5d} rounds, {elapsed:6.1f} s wall "
                f"({cpu:5.1f} s CPU), {result.end_ms / 1000:,.0f} s simulated, "
                f"violations {overlaps}")
        if only is not None:
            line += f"  [only {only} of {pods} pods restarted: --quick]"
        if pods == 1_000 and out is not None:
            started = time.perf_counter()
            drill.write_events(out, result.events)
            line += f"; Parquet written in {time.perf_counter() - started:.1f} s"
        print(line, flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--quick", action="store_true",
                        help="restart only --scale-pods of the 1,000 pods")
    parser.add_argument("--scale-pods", type=int, default=20)
    parser.add_argument("--out", type=Path, default=Path("out/bench-sim-1000.parquet"),
                        help="where the 1,000-pod roll's event log goes")
    parser.add_argument("--no-scale", action="store_true", help="skip part 3")
    args = parser.parse_args()
    seed_002(args.seeds)
    pitfall(args.seeds)
    if not args.no_scale:
        scale(args.quick, args.scale_pods, args.out)


if __name__ == "__main__":
    main()
