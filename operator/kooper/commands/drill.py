"""``kooper drill SCENARIO --sim``: simulate a drill, write its event log, print metrics.

``kooper drill chaos --sim --runs N --seed S``: random fault schedules on small
groups; prints the runs, every violation with the seed that reproduces it, and
the slowest convergence. Exit 1 if any run violated a check.
"""

from __future__ import annotations

import argparse
import dataclasses
import multiprocessing
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path

from kooper.commands import options
from kooper.core import defaults, errors, model
from kooper.core import events as ev
from kooper.sim import chaos, metrics, rollout, runner, scenarios

HELP = "simulate a drill (rolling restart, chaos, ...) and write its event log"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the command line."""
    parser.add_argument("scenario", choices=(*scenarios.NAMES, "chaos"), metavar="SCENARIO",
                        help="what happens to the group: "
                             + ", ".join((*scenarios.NAMES, "chaos")) + " (docs/simulator.md)")
    parser.add_argument("--sim", action="store_true",
                        help="run on the discrete-event simulator (the only mode here)")
    parser.add_argument("--pods", type=options.int_at_least(1), default=None, metavar="N",
                        help="group size (default 6; chaos: random 2-5)")
    parser.add_argument("--connectors", type=options.int_at_least(0), default=3, metavar="N",
                        help="connectors (default 3)")
    parser.add_argument("--tasks", default=4, metavar="N",
                        type=options.int_at_least(0, at_most=(
                            defaults.TASKS_MAX_LIMIT, "a Connector's largest tasksMax")),
                        help=f"tasks per connector, at most {defaults.TASKS_MAX_LIMIT} "
                             "(default 4)")
    parser.add_argument("--policy", choices=[p.value for p in model.Policy], default="kooper",
                        help="how lost work is held and handed back (default kooper)")
    parser.add_argument("--protocol", choices=[p.value for p in model.Protocol],
                        default="compatible",
                        help="compatible: cooperative; eager: every round stops everything "
                             "(default compatible)")
    parser.add_argument("--delay", type=options.duration,
                        default=defaults.SCHEDULED_REBALANCE_MAX_DELAY_MS,
                        metavar="DURATION",
                        help="scheduledRebalanceMaxDelay, as on the WorkerGroup: 300s, 5m, "
                             "1m30s, 0s (default 5m)")
    parser.add_argument("--seed", type=int, default=0,
                        help="random seed (chaos: of the first run; default 0)")
    parser.add_argument("--out", type=Path, default=None, metavar="FILE",
                        help="write the event log to FILE, .parquet or .jsonl; its folder "
                             "must exist (not with chaos)")
    parser.add_argument("--runs", type=options.int_at_least(1), default=None, metavar="N",
                        help="chaos only: number of runs (default 1000)")
    parser.add_argument("--sessions", action="store_true",
                        help="drive members through the real SDK session (slower)")
    parser.add_argument("--jobs", type=options.int_at_least(1), default=None, metavar="N",
                        help="chaos only: worker processes (default: all CPUs)")
    parser.add_argument("--workload", choices=("statefulset", "deployment"), default=None,
                        help="rolling-restart only: the pods' controller rolls them to a new "
                             "revision, which the operator sees (default: a scripted restart "
                             "of each pod, no revisions)")
    parser.add_argument("--max-surge", type=options.int_at_least(0), default=None,
                        metavar="N", help="--workload deployment: maxSurge (default 1)")
    parser.add_argument("--max-unavailable", type=options.int_at_least(0), default=None,
                        metavar="N", help="--workload: maxUnavailable (default: statefulset 1, "
                                          "deployment 0)")
    parser.add_argument("--partition", type=options.int_at_least(0), default=None,
                        metavar="N", help="--workload statefulset: ordinals below N keep "
                                          "their revision (default 0)")
    options.add_output(parser)


def _bar(label: str) -> Callable[[float], None]:
    """A text progress bar on stderr: redrawn in place on a terminal, else a line per 25%."""
    shown = [-1]
    terminal = sys.stderr.isatty()
    every = 1 if terminal else 5

    def update(fraction: float) -> None:
        step = int(fraction * 20)
        if step > shown[0] and (step % every == 0 or step == 20):
            shown[0] = step
            text = f"{label} [{'#' * step}{'.' * (20 - step)}] {step * 5:3d}%"
            if terminal:
                print(f"\r{text}", end="\n" if step == 20 else "", file=sys.stderr, flush=True)
            else:
                print(text, file=sys.stderr, flush=True)
    return update


def write_events(path: Path, rows: list[ev.Event]) -> None:
    """Write the event log as Parquet or JSON lines, chosen by the file's suffix."""
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


def check_out(path: Path) -> Path:
    """``--out``: a .jsonl or .parquet file in a folder that exists (nothing is created)."""
    if path.suffix not in (".jsonl", ".parquet"):
        raise errors.KooperError(f"--out {path}: use a .parquet or .jsonl file")
    return options.writable_file(path, "--out")


def run(args: argparse.Namespace) -> int:
    """Run the drill or the chaos runs."""
    if not args.sim:
        raise errors.KooperError(
            "only --sim is available here; the embedded-cluster drill is `kooper demo`")
    if args.scenario == "chaos":
        if args.out is not None:
            raise errors.KooperError("--out: chaos writes no event log; reproduce a seed "
                                     "with --runs 1 --seed N, or drill one scenario with --out")
        return _chaos(args)
    for flag, value in (("--runs", args.runs), ("--jobs", args.jobs)):
        if value is not None:
            raise errors.KooperError(f"{flag} applies to chaos only, not {args.scenario}")
    if args.out is not None:
        check_out(args.out)
    pods = args.pods if args.pods is not None else 6
    config = runner.Config(
        pods=pods, connectors=args.connectors, tasks=args.tasks,
        policy=model.Policy(args.policy), protocol=model.Protocol(args.protocol),
        delay_ms=args.delay, seed=args.seed, sessions=args.sessions,
    )
    scenario = scenarios.build(args.scenario, pods, workload(args))
    started = time.perf_counter()
    result = runner.simulate(config, scenario, _bar(args.scenario))
    elapsed = time.perf_counter() - started
    if args.out is not None:
        write_events(args.out, result.events)
    row = metrics.run_metrics(result.events)
    note = idle_note(row, pods=pods, connectors=args.connectors, tasks=args.tasks)
    if note:
        options.progress(note)
    if args.output != "table":
        print(options.dump({
            "scenario": args.scenario,
            "pods": pods,
            "metrics": options.exact(dataclasses.asdict(row)),
            "events": len(result.events),
            "simulated_ms": result.end_ms,
            "out": None if args.out is None else str(args.out),
            "violations": list(result.violations),
        }, args.output))
        return 1 if result.violations else 0
    print(metrics_table([row]))
    print(f"{len(result.events)} events, {options.seconds(result.end_ms)} simulated "
          f"in {elapsed:.2f} s" + (f", written to {args.out}" if args.out else ""))
    for violation in result.violations:
        print(f"VIOLATION {violation}")
    return 1 if result.violations else 0


def workload(args: argparse.Namespace) -> rollout.Spec | None:
    """The ``--workload`` whose controller rolls the pods (None: scripted restarts)."""
    given = {"--max-surge": args.max_surge, "--max-unavailable": args.max_unavailable,
             "--partition": args.partition}
    if args.workload is None:
        for flag, value in given.items():
            if value is not None:
                raise errors.KooperError(f"{flag} needs --workload")
        return None
    if args.scenario != "rolling-restart":
        raise errors.KooperError(f"--workload applies to rolling-restart only, not "
                                 f"{args.scenario}")
    if args.workload == "statefulset":
        if args.max_surge is not None:
            raise errors.KooperError("--max-surge: a StatefulSet does not surge")
        return rollout.StatefulSetRoll(
            max_unavailable=max(1, args.max_unavailable if args.max_unavailable is not None
                                else 1),
            partition=args.partition or 0)
    if args.partition is not None:
        raise errors.KooperError("--partition: a Deployment has no partition")
    surge = args.max_surge if args.max_surge is not None else 1
    unavailable = args.max_unavailable if args.max_unavailable is not None else 0
    if surge == 0 and unavailable == 0:
        raise errors.KooperError("--max-surge and --max-unavailable cannot both be 0")
    return rollout.DeploymentRoll(max_surge=surge, max_unavailable=unavailable)


def metrics_table(rows: list[metrics.RunMetrics]) -> str:
    """The drill's metrics for people: durations in seconds."""
    header = ("run", "protocol", "policy", "total pause", "longest pause",
              "undisturbed pause", "moves", "overlaps", "rounds", "converge")
    return options.table(header, [
        (m.run, m.protocol, m.policy, options.seconds(m.total_pause_ms),
         options.seconds(m.max_pause_ms), options.seconds(m.undisturbed_pause_ms),
         str(m.moves), str(m.overlaps), str(m.rounds), options.seconds(m.converge_ms))
        for m in rows
    ], left=3)


def idle_note(row: metrics.RunMetrics, *, pods: int, connectors: int, tasks: int) -> str | None:
    """Why a drill reports nothing paused and nothing moved, when fewer resources than pods
    left the pods it touched idle (None otherwise)."""
    resources = connectors * (1 + tasks)
    if resources >= pods or row.moves or row.total_pause_ms:
        return None
    enough = -(-pods // (1 + tasks))
    return (f"note: nothing paused or moved: {resources} resources ({connectors} connectors "
            f"x (1 + {tasks} tasks)) leave {pods - resources} of {pods} pods idle, and the "
            f"drill touched only idle pods; for work on every pod pass --connectors {enough}")


def _leave_ctrl_c_to_the_parent() -> None:
    """A pool worker ignores SIGINT: Ctrl-C reaches the whole process group, and the
    parent alone answers it (one line, exit 130) and ends the pool."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _chaos_one(job: tuple[int, int | None, bool]) -> chaos.Outcome:
    return chaos.run_one(job[0], pods=job[1], sessions=job[2])


def _chaos(args: argparse.Namespace) -> int:
    runs = 1000 if args.runs is None else args.runs
    jobs = [(args.seed + index, args.pods, args.sessions) for index in range(runs)]
    bar = _bar("chaos")
    outcomes: list[chaos.Outcome] = []
    started = time.perf_counter()
    processes = args.jobs or multiprocessing.cpu_count()
    if processes > 1 and len(jobs) >= 50:
        with multiprocessing.Pool(processes, _leave_ctrl_c_to_the_parent) as pool:
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
    sessions = " --sessions" if args.sessions else ""
    if args.output != "table":
        print(options.dump({
            "runs": len(outcomes),
            "first_seed": args.seed,
            "violations": [{"seed": o.seed, "violations": list(o.violations),
                            "reproduce": f"kooper drill chaos --sim --runs 1 --seed {o.seed}"
                                         + sessions} for o in bad],
            "slowest_converge_ms": slowest.converge_ms,
            "slowest_seed": slowest.seed,
        }, args.output))
        return 1 if bad else 0
    print(f"runs: {len(outcomes)} in {elapsed:.1f} s ({processes} processes)")
    print(f"violations: {len(bad)}")
    for outcome in bad:
        print(f"  seed {outcome.seed}: {'; '.join(outcome.violations[:3])}")
        print(f"    reproduce: kooper drill chaos --sim --runs 1 --seed {outcome.seed}"
              + sessions)
    print(f"slowest convergence: {options.seconds(slowest.converge_ms)} (seed {slowest.seed})")
    return 1 if bad else 0
