"""``kooper drill SCENARIO --sim``: simulate a drill, write its event log, print metrics.

``kooper drill chaos --sim --runs N --seed S``: random fault schedules on small
groups; prints the runs, every violation with the seed that reproduces it, and
the slowest convergence. Exit 1 if any run violated a check.
"""

from __future__ import annotations

import argparse
import multiprocessing
import sys
import time
from collections.abc import Callable
from pathlib import Path

from kooper.core import errors, model
from kooper.core import events as ev
from kooper.sim import chaos, metrics, runner, scenarios

HELP = "simulate a drill (rolling restart, chaos, ...) and write its event log"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the command line."""
    parser.add_argument("scenario", choices=(*scenarios.NAMES, "chaos"))
    parser.add_argument("--sim", action="store_true",
                        help="run on the discrete-event simulator (the only mode here)")
    parser.add_argument("--pods", type=int, default=None,
                        help="group size (default 6; chaos: random 2-5)")
    parser.add_argument("--connectors", type=int, default=3)
    parser.add_argument("--tasks", type=int, default=4, help="tasks per connector")
    parser.add_argument("--policy", choices=[p.value for p in model.Policy], default="kooper")
    parser.add_argument("--protocol", choices=[p.value for p in model.Protocol],
                        default="compatible")
    parser.add_argument("--delay-ms", type=int, default=300_000,
                        help="scheduled.rebalance.max.delay.ms")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=None,
                        help="event log: .parquet or .jsonl")
    parser.add_argument("--runs", type=int, default=1000, help="chaos: number of runs")
    parser.add_argument("--sessions", action="store_true",
                        help="drive members through the real SDK session (slower)")
    parser.add_argument("--jobs", type=int, default=0,
                        help="chaos: worker processes (default: all CPUs)")


def _bar(label: str) -> Callable[[float], None]:
    """A text progress bar on stderr, one line per 5%."""
    shown = [-1]

    def update(fraction: float) -> None:
        step = int(fraction * 20)
        if step > shown[0]:
            shown[0] = step
            print(f"{label} [{'#' * step}{'.' * (20 - step)}] {step * 5:3d}%",
                  file=sys.stderr, flush=True)
    return update


def write_events(path: Path, rows: list[ev.Event]) -> None:
    """Write the event log as Parquet or JSON lines, chosen by the file's suffix."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix == ".jsonl":
        with path.open("w", encoding="utf-8") as handle:
            handle.writelines(ev.dump_lines(rows))
    elif path.suffix == ".parquet":
        try:
            import pyarrow  # optional: only Parquet output needs it
            import pyarrow.parquet
        except ImportError as exc:
            raise errors.KooperError("Parquet output needs pyarrow (pip install "
                                     "'kooper[analytics]'); use .jsonl instead") from exc
        columns = {name: [getattr(e, name) for e in rows] for name in ev.COLUMNS}
        columns["event"] = [str(kind) for kind in columns["event"]]
        pyarrow.parquet.write_table(pyarrow.table(columns), path)
    else:
        raise errors.KooperError(f"--out {path}: use a .parquet or .jsonl file")


def run(args: argparse.Namespace) -> int:
    """Run the drill or the chaos runs."""
    if not args.sim:
        raise errors.KooperError(
            "only --sim is available here; the embedded-cluster drill is `kooper demo`")
    if args.scenario == "chaos":
        return _chaos(args)
    pods = args.pods if args.pods is not None else 6
    if pods < 1 or args.connectors < 0 or args.tasks < 0 or args.delay_ms < 0:
        raise errors.KooperError("--pods must be >= 1; counts and --delay-ms must be >= 0")
    config = runner.Config(
        pods=pods, connectors=args.connectors, tasks=args.tasks,
        policy=model.Policy(args.policy), protocol=model.Protocol(args.protocol),
        delay_ms=args.delay_ms, seed=args.seed, sessions=args.sessions,
    )
    scenario = scenarios.build(args.scenario, pods)
    started = time.perf_counter()
    result = runner.simulate(config, scenario, _bar(args.scenario))
    elapsed = time.perf_counter() - started
    if args.out is not None:
        write_events(args.out, result.events)
    print(metrics.table([metrics.run_metrics(result.events)]))
    print(f"{len(result.events)} events, {result.end_ms} ms simulated in {elapsed:.2f} s"
          + (f", written to {args.out}" if args.out else ""))
    for violation in result.violations:
        print(f"VIOLATION {violation}")
    return 1 if result.violations else 0


def _chaos_one(job: tuple[int, int | None, bool]) -> chaos.Outcome:
    return chaos.run_one(job[0], pods=job[1], sessions=job[2])


def _chaos(args: argparse.Namespace) -> int:
    if args.runs < 1:
        raise errors.KooperError("--runs must be >= 1")
    jobs = [(args.seed + index, args.pods, args.sessions) for index in range(args.runs)]
    bar = _bar("chaos")
    outcomes: list[chaos.Outcome] = []
    started = time.perf_counter()
    processes = args.jobs or multiprocessing.cpu_count()
    if processes > 1 and len(jobs) >= 50:
        with multiprocessing.Pool(processes) as pool:
            for outcome in pool.imap_unordered(_chaos_one, jobs, chunksize=20):
                outcomes.append(outcome)
                bar(len(outcomes) / len(jobs))
    else:
        for job in jobs:
            outcomes.append(_chaos_one(job))
            bar(len(outcomes) / len(jobs))
    elapsed = time.perf_counter() - started
    bad = sorted((o for o in outcomes if o.violations), key=lambda o: o.seed)
    slowest = max(outcomes, key=lambda o: o.converge_ms)
    print(f"runs: {len(outcomes)} in {elapsed:.1f} s ({processes} processes)")
    print(f"violations: {len(bad)}")
    for outcome in bad:
        print(f"  seed {outcome.seed}: {'; '.join(outcome.violations[:3])}")
        print(f"    reproduce: kooper drill chaos --sim --runs 1 --seed {outcome.seed}"
              + (" --sessions" if args.sessions else ""))
    print(f"slowest convergence: {slowest.converge_ms} ms (seed {slowest.seed})")
    return 1 if bad else 0
