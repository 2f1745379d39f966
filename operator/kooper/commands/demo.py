"""``kooper demo``: the embedded-cluster drill, compatible/kooper vs kip415 vs eager.

No Kubernetes needed: an in-process API emulator, the real operator and real
worker processes (see docs/demo.md).
"""

from __future__ import annotations

import argparse
import dataclasses
import pathlib
import time

from kooper.core import errors
from kooper.demo import cluster, drill, plot

HELP = "run the embedded-cluster drill: compatible/kooper vs kip415 vs eager"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``kooper demo``."""
    parser.add_argument("--pods", type=int, default=None,
                        help="worker pods in the StatefulSet (default 6; 3 with --short)")
    parser.add_argument("--short", action="store_true",
                        help="a smaller, faster drill for CI: 3 pods, 2 connectors (4 + 4 tasks)")
    parser.add_argument("--out", type=pathlib.Path, default=pathlib.Path("out"),
                        help="where event logs, process logs and the plot go (default out/)")
    parser.add_argument("--max-delay", type=int, default=None,
                        help="scheduledRebalanceMaxDelay in seconds (default 20; 10 with --short)")
    parser.add_argument("--restart", type=float, default=None,
                        help="seconds between a pod's deletion and its restart (default 2.5)")
    parser.add_argument("--keep", action="store_true",
                        help="after the last run converged, keep its cluster up for "
                             "`kooper status demo` until Ctrl-C")
    parser.add_argument("--runs", default="compatible-kooper,compatible-kip415,eager-kooper",
                        help="comma-separated <protocol>-<policy> runs, in order")


def run(args: argparse.Namespace) -> int:
    """Run the drills, print the table, write the plot."""
    base = drill.Settings()
    if args.short:
        base = dataclasses.replace(base, pods=3, max_delay_s=10, restart_s=2.0,
                                   connectors=(("orders-source", 4), ("payments-source", 4)))
    if args.pods is not None and args.pods < 1:
        raise errors.KooperError("--pods must be at least 1")
    settings = dataclasses.replace(
        base,
        pods=base.pods if args.pods is None else args.pods,
        max_delay_s=base.max_delay_s if args.max_delay is None else args.max_delay,
        restart_s=base.restart_s if args.restart is None else args.restart,
    )
    descriptions = {f"{p}-{q}": d for p, q, d in drill.RUNS}
    wanted = [name.strip() for name in args.runs.split(",") if name.strip()]
    for name in wanted:
        if name.count("-") != 1:
            raise errors.KooperError(f"--runs: {name!r} is not <protocol>-<policy>")
    out: pathlib.Path = args.out
    tasks = " + ".join(str(t) for _, t in settings.connectors)
    print(f"kooper demo: {settings.pods} pods, {len(settings.connectors)} connectors "
          f"({tasks} tasks, {settings.resources} resources with the connector instances)")
    print(f"  short timings for a demo: scheduledRebalanceMaxDelay {settings.max_delay_s}s, "
          f"lease {settings.lease_s}s, restart time {settings.restart_s}s "
          f"(defaults in a real cluster: 300s and 30s); tasks take "
          f"{settings.start_ms}ms to start and {settings.stop_ms}ms to stop")
    started = time.monotonic()
    results = []
    for number, name in enumerate(wanted, start=1):
        protocol, policy = name.split("-")
        hold = _hold if args.keep and number == len(wanted) else None
        results.append(drill.run_one(settings, protocol=protocol, policy=policy, out=out,
                                     converged=hold))
    print()
    print(drill.format_table(results))
    for r in results:
        if r.name in descriptions:
            print(f"  {r.name}: {descriptions[r.name]}")
    png = plot.plot_runs([(r.name, r.rows, r.start_ms, r.end_ms) for r in results],
                         out / "demo-running.png", total=settings.resources)
    print()
    print(f"plot: {png}; event logs: {', '.join(str(r.log_path) for r in results)}")
    print(f"total {time.monotonic() - started:.0f}s")
    return 0


def _hold(embedded: cluster.EmbeddedCluster) -> None:
    """Keep the converged cluster up until Ctrl-C, for ``kooper status``."""
    print(f"\ncluster kept up; in another shell:\n"
          f"  KOOPER_KUBE_API={embedded.url} kooper status {drill.GROUP}\n"
          f"Ctrl-C to finish the demo")
    try:
        while True:
            embedded.check_operator()
            time.sleep(1)
    except KeyboardInterrupt:
        print("finishing")
