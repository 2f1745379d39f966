"""Rolling restart side by side: eager, kip415, kooper, kooper with delay 0 (one run).

The shape of issue 11's table: 10 pods, 3 connectors x 10 tasks (33 resources),
pod restarts 8-15 s, one seed, every row from the same run of this script, so the
ratios are comparable. The same rows as

    kooper drill rolling-restart --sim --pods 10 --connectors 3 --tasks 10 --seed 0 \
        -o json [--protocol eager | --policy kip415 | --policy kooper [--delay-ms 0]]

    .venv/bin/python benchmarks/bench_rollout.py [--seed 0] [--pods 10]
"""

from __future__ import annotations

import argparse
import dataclasses

from kooper.core import model
from kooper.sim import metrics, runner, scenarios

P = model.Protocol
Q = model.Policy
ROWS = (
    ("eager", P.EAGER, Q.KOOPER, None),
    ("compatible/kip415", P.COMPATIBLE, Q.KIP415, None),
    ("compatible/kooper (default)", P.COMPATIBLE, Q.KOOPER, None),
    ("compatible/kooper, delay 0", P.COMPATIBLE, Q.KOOPER, 0),
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--pods", type=int, default=10)
    args = parser.parse_args()
    print(f"== rolling restart, {args.pods} pods, 3 connectors x 10 tasks (33 resources), "
          f"restarts 8-15 s, seed {args.seed}")
    print(f"  {'run':30s} {'total pause':>14s} {'ratio vs eager':>15s} {'moves':>6s} "
          f"{'moves/resource':>15s} {'max pause':>10s} {'overlaps':>8s}")
    eager = 0
    for label, protocol, policy, delay in ROWS:
        config = runner.Config(pods=args.pods, connectors=3, tasks=10, protocol=protocol,
                               policy=policy, seed=args.seed)
        if delay is not None:
            config = dataclasses.replace(config, delay_ms=delay)
        result = runner.simulate(config, scenarios.rolling_restart(args.pods))
        m = metrics.run_metrics(result.events)
        if protocol is P.EAGER:
            eager = m.total_pause_ms
        print(f"  {label:30s} {m.total_pause_ms:>11,d} ms {m.total_pause_ms / eager:>15.4f} "
              f"{m.moves:>6d} {m.moves / m.resources:>15.2f} {m.max_pause_ms:>7,d} ms "
              f"{m.overlaps + len(result.violations):>8d}")


if __name__ == "__main__":
    main()
