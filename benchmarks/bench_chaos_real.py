"""Chaos with real processes: ``kooper run`` and ``kooper worker --demo`` under faults.

Each run is a fresh group (e2e/chaos_real.py: the operator and 4 workers as OS
processes, 2 connectors, 8 resources) on the API ``--backend`` names: ``real`` (the
default: a local control plane, real kube-apiserver, etcd and kube-controller-manager,
started once for all runs, each run in a namespace of its own, the API faults made by
the fault proxy e2e/fault_proxy.py in front of it) or ``emulator`` (the in-process
emulator over HTTP, its own fault switches). Each run goes through
``--faults`` faults drawn (seeded) from every family, each to convergence: worker
SIGKILL, operator SIGKILL mid-round, HTTP 500 and 429 bursts, a slow API, a frozen
worker (SIGSTOP past its Lease), a frozen worker with the operator SIGKILLed
meanwhile, and a worker frozen until its work ran elsewhere. The invariants come
from the workers' own rows and the harness's process rows (e2e/chaos_log.py).

Prints one line per run, then the count, the time and the violations (exit 1 if
any): overlaps between members that were not frozen, work lost or extra after
quiescence, per-task epochs that did not grow, and convergence later than the
stated bound. Overlaps with a frozen member whose work was started elsewhere at a
higher epoch are counted and printed in their own column (no lease can prevent
them; docs/sdk.md, "Chaos with real processes").

With ``--control`` (real backend only), each run has two ``kooper run
--leader-election`` replicas (e2e/leaders.py) and its faults strike the control side
too: the leader frozen (SIGSTOP) or cut off from the API at the fault proxy at a random
point of a departure round, held until the standby leads under a newer epoch and the
group is whole, then thawed or healed (the control faults come first, then faults drawn
from ``leaders.MIXED_FAULTS``, the leader SIGKILLed among them).

With ``--control --restarts``, the control plane itself fails: kube-apiserver
(``api-restart``) or etcd (``etcd-restart``) SIGKILLed at a drawn point of a departure
round, down for a drawn time (2, 8 or 20 s: past the members' Lease, past the leader
Lease), restarted with the same ports and data; both come first in a seeded order,
then faults drawn from ``leaders.RESTART_MIXED``. The line of a run names each restart
step's time down, whether the leader changed and the workers' logged API failures.

    python benchmarks/bench_chaos_real.py [--backend real|emulator] [--runs 10] [--faults 8]
                                          [--seed 0] [--control [--restarts]]
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import pathlib
import random
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # e2e/ is a package of the repository, not of kooper

from collections.abc import Callable, Iterator  # noqa: E402

from e2e import chaos_real, leaders, realplane  # noqa: E402

from kooper.controlplane import binaries, host  # noqa: E402
from kooper.demo import pods  # noqa: E402
from kooper.sdk import apierrors  # noqa: E402


@contextlib.contextmanager
def backend(name: str, out: pathlib.Path
            ) -> Iterator[Callable[[pathlib.Path], chaos_real.Plane]]:
    """The API backend every run uses (a local cluster is started once, stopped after)."""
    if name == "emulator":
        yield chaos_real.EmulatorPlane
        return
    state = out.resolve() / "cluster"
    host.clean(state)
    started = time.perf_counter()
    try:
        bins = binaries.locate(build=False)
    except binaries.BinariesError as exc:
        raise SystemExit(f"--backend real needs the control plane's binaries (make kube-bins), "
                         f"or use --backend emulator: {exc}") from exc
    handle = host.start(state, bin_dir=bins)
    print(f"local control plane at {handle.server} ({time.perf_counter() - started:.0f} s)",
          flush=True)
    try:
        yield functools.partial(realplane.RealPlane, handle)
    finally:
        handle.stop()


def faults_for(seed: int, count: int, pods: int) -> list[tuple[str, int]]:
    """``count`` faults of run ``seed``: every family before any repeats, then random."""
    rng = random.Random(seed)
    families = list(chaos_real.FAULTS)
    rng.shuffle(families)
    drawn = (families * (count // len(families) + 1))[:count]
    return [(fault, rng.randrange(pods)) for fault in drawn]


def main(argv: list[str] | None = None) -> int:
    """Run, print, and exit 1 on any violation."""
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backend", choices=("real", "emulator"), default="real",
                        help="the API: a real kube-apiserver behind the fault proxy "
                             "(default), or the in-process emulator")
    parser.add_argument("--runs", type=int, default=10, help="groups to run (default 10)")
    parser.add_argument("--faults", type=int, default=len(chaos_real.FAULTS),
                        help="faults per run (default: one of each family)")
    parser.add_argument("--seed", type=int, default=0, help="first seed")
    parser.add_argument("--control", action="store_true",
                        help="two operator replicas, and faults on the leader too "
                             "(real backend only)")
    parser.add_argument("--restarts", action="store_true",
                        help="with --control: kube-apiserver and etcd killed and restarted "
                             "mid-round (leaders.RESTART_FAULTS first)")
    parser.add_argument("--out", type=pathlib.Path, default=ROOT / "out" / "bench-chaos-real",
                        help="where each run's logs go")
    args = parser.parse_args(argv)
    if args.control and args.backend != "real":
        parser.error("--control needs --backend real (the fault proxy, the leader Lease)")
    if args.restarts and not args.control:
        parser.error("--restarts needs --control (two replicas on the real control plane)")
    settings = chaos_real.Settings()
    with backend(args.backend, args.out) as plane:
        return run_all(args, settings, plane)


Scenario = Callable[[int, list[tuple[str, int]], pathlib.Path], chaos_real.Report]


def scenario_for(args: argparse.Namespace, settings: chaos_real.Settings,
                 plane: Callable[[pathlib.Path], chaos_real.Plane]
                 ) -> tuple[Scenario, Callable[[int], list[tuple[str, int]]]]:
    """How one run goes (one operator, or two replicas with ``--control``) and its faults."""
    if args.control:
        assert isinstance(plane, functools.partial)
        cluster = plane.args[0]
        return (lambda seed, faults, workdir: leaders.run_scenario(
                    settings, workdir, faults, cluster=cluster, seed=seed),
                lambda seed: leaders.faults_for(seed, args.faults, settings.pods,
                                                restarts=args.restarts))
    return (lambda seed, faults, workdir: chaos_real.run_scenario(
                settings, workdir, faults, plane=plane),
            lambda seed: faults_for(seed, args.faults, settings.pods))


def run_all(args: argparse.Namespace, settings: chaos_real.Settings,
            plane: Callable[[pathlib.Path], chaos_real.Plane]) -> int:
    """Every run on ``plane``; prints as it goes."""
    started = time.perf_counter()
    totals = {"faults": 0, "overlaps": 0, "frozen": 0, "double": 0, "lost": 0, "epochs": 0,
              "late": 0, "errors": 0, "stale": 0, "landed": 0}
    converge: list[float] = []
    steps: list[chaos_real.Step] = []
    after_thaw = 0
    print(f"{'run':>4} {'faults':>6} {'time':>7} {'overlaps':>8} {'frozen*':>7} {'double':>6} "
          f"{'lost':>4} {'epochs':>6} {'late':>4} {'worst converge':>14}", flush=True)
    scenario, draw = scenario_for(args, settings, plane)
    for seed in range(args.seed, args.seed + args.runs):
        faults = draw(seed)
        run_started = time.perf_counter()
        try:
            report = scenario(seed, faults, args.out / f"run-{seed}")
        except (TimeoutError, pods.DemoError, apierrors.ApiError) as exc:
            totals["errors"] += 1
            print(f"{seed:>4} did not finish: {exc}", flush=True)
            continue
        totals["faults"] += len(report.steps)
        totals["overlaps"] += len(report.overlaps)
        totals["frozen"] += len(report.frozen_overlaps)
        totals["double"] += report.double_ownership
        totals["lost"] += len(report.lost) + len(report.unexpected)
        totals["epochs"] += len(report.epoch_regressions) + len(report.generation_regressions)
        totals["late"] += len(report.late)
        totals["stale"] += sum(s.stale_writes for s in report.steps)
        totals["landed"] += sum(s.stale_landed for s in report.steps)
        after_thaw = max(after_thaw, report.after_thaw_ms)
        worst = max(s.converge_s for s in report.steps)
        converge.extend(s.converge_s for s in report.steps)
        steps.extend(report.steps)
        print(f"{seed:>4} {len(report.steps):>6} {time.perf_counter() - run_started:>6.0f}s "
              f"{len(report.overlaps):>8} {len(report.frozen_overlaps):>7} "
              f"{report.double_ownership:>6} {len(report.lost) + len(report.unexpected):>4} "
              f"{len(report.epoch_regressions) + len(report.generation_regressions):>6} "
              f"{len(report.late):>4} {worst:>13.1f}s"
              + "".join(f"  {s.fault}: stale writes {s.stale_landed}/{s.stale_writes} landed"
                        for s in report.steps if "@" in s.fault and not s.down_s)
              + "".join(f"  {s.fault}: down {s.down_s:.0f}s, pid {s.pids[0]}->{s.pids[1]}, "
                        f"leader {s.leaders[0]}->{s.leaders[1]}, "
                        f"probe {s.outage.split(':')[0] or 'ANSWERED'}, "
                        f"worker API failures {s.worker_errors}"
                        for s in report.steps if s.down_s),
              flush=True)
        if report.violations:
            print(report.describe(), flush=True)
    elapsed = time.perf_counter() - started
    violations = (totals["double"] + totals["lost"] + totals["epochs"] + totals["late"]
                  + totals["errors"] + totals["landed"])
    converge.sort()
    median = converge[len(converge) // 2] if converge else 0.0
    kind = (f"{args.backend}, restart faults" if args.restarts
            else f"{args.backend}, control faults" if args.control else args.backend)
    restarts = [s for s in steps if s.down_s]
    if restarts:
        print(f"restart faults: {len(restarts)} ("
              + ", ".join(f"{f} {sum(1 for s in restarts if s.fault.startswith(f + '@'))}"
                          for f in leaders.RESTART_FAULTS)
              + f"), leader changed in {sum(1 for s in restarts if s.leaders[0] != s.leaders[1])}"
              f", down 20 s in {sum(1 for s in restarts if s.down_s >= 20)}", flush=True)
    print(f"real chaos ({kind}): {args.runs} runs, {totals['faults']} faults, "
          f"{elapsed:.0f} s; "
          f"violations {violations} (double ownership {totals['double']}, lost "
          f"{totals['lost']}, epoch or generation regressions {totals['epochs']}, late "
          f"{totals['late']}, "
          f"runs not finished {totals['errors']}, stale leader's writes landed "
          f"{totals['landed']} of {totals['stale']} sent); overlaps with a frozen member "
          f"{totals['frozen']} (fenced by epoch, longest {after_thaw} ms after SIGCONT); "
          f"convergence median {median:.1f} s, max {max(converge, default=0.0):.1f} s "
          f"(bound {settings.bound_s:.0f} s)", flush=True)
    return 1 if violations else 0


if __name__ == "__main__":
    sys.exit(main())
