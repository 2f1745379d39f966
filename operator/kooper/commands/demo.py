"""``kooper demo``: the embedded-cluster drill, compatible/kooper vs kip415 vs eager.

No Kubernetes needed: an in-process API emulator, the real operator and real
worker processes (see docs/demo.md). ``--control-plane real`` runs the same
drill on the real local control plane (``kooper.demo.localplane``).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import dataclasses
import pathlib
import time
from collections.abc import Iterator

from kooper.commands import options
from kooper.core import errors, model
from kooper.demo import drill, localplane, plot

HELP = "run the embedded-cluster drill: compatible/kooper vs kip415 vs eager"


DESCRIPTION = """\
Run the same rolling restart on a fresh embedded cluster once per protocol and
policy, then print a comparison table and write a plot. Each run starts an
in-process Kubernetes API emulator, the real operator (`kooper run`) and one
`kooper worker --demo` process per pod; the pods are deleted the way a kubelet
does it (terminating Pod, SIGTERM, the object goes after the worker exited).
The runs are independent clusters and run side by side (--sequential: one
after the other). No Kubernetes, Docker or network needed; about 1-2 minutes
on 2 cores (the processes mostly wait: tasks sleep to start and stop).

The table covers each run's drill window (rolling restart to convergence):
total and longest pause, operator rounds, moves, time to converge, overlaps
(must be 0) and resources running at the end (docs/demo.md).
"""

EPILOG = """\
runs: <protocol>-<policy>, protocol compatible|eager, policy kooper|kip415
writes under --out: <run>.events.jsonl (event logs, readable by `kooper analyze`),
  <run>/ (process logs), demo-running.png (resources running over time)
examples:
  kooper demo                              # the three runs (what `make demo` does)
  kooper demo --short --runs compatible-kooper,eager-kooper
  kooper demo --runs compatible-kooper --keep   # then `kooper status demo`, kubectl
  kooper demo --control-plane real --short      # on kube-apiserver, etcd, controller-manager
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``kooper demo``."""
    parser.description = DESCRIPTION
    parser.epilog = EPILOG
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.add_argument("--pods", type=options.int_at_least(1), default=None, metavar="N",
                        help="worker pods in the StatefulSet (default 6; 3 with --short)")
    parser.add_argument("--short", action="store_true",
                        help="a smaller, faster drill for CI: 3 pods, 2 connectors (4 + 4 tasks), "
                             "10 s delay, 2 s restarts")
    parser.add_argument("--out", type=pathlib.Path, default=pathlib.Path("out"), metavar="DIR",
                        help="where event logs, process logs and the plot go (default out/; "
                             "created if its parent folder exists)")
    parser.add_argument("--max-delay", type=options.int_at_least(0), default=None,
                        metavar="SECONDS",
                        help="scheduledRebalanceMaxDelay (default 20; 10 with --short; "
                             "300 in a real cluster)")
    parser.add_argument("--restart", type=options.non_negative_float, default=None,
                        metavar="SECONDS",
                        help="time between a pod's deletion and its replacement's start "
                             "(image pull, scheduling; default 2.5; 2 with --short)")
    parser.add_argument("--keep", action="store_true",
                        help="after the last run converged, keep its cluster up for "
                             "`kooper status demo` until Ctrl-C (implies --sequential)")
    parser.add_argument("--sequential", action="store_true",
                        help="one run after the other instead of side by side (slower; "
                             "no run shares the CPU with another)")
    parser.add_argument("--control-plane", choices=("emulator", "real"), default="emulator",
                        help="emulator (default): the in-process API emulator; real: the real "
                             "local control plane (kube-apiserver, etcd, kube-controller-manager "
                             "built by `make kube-bins`, pods as processes; each run in "
                             "namespace demo-<run>)")
    parser.add_argument("--cluster-dir", type=pathlib.Path, default=None, metavar="DIR",
                        help="with --control-plane real: use the cluster `kooper cluster up "
                             "--dir DIR` runs (default: start one under --out, stopped at "
                             "the end)")
    parser.add_argument("--runs", default=",".join(f"{p}-{q}" for p, q, _ in drill.RUNS),
                        metavar="LIST",
                        help="comma-separated <protocol>-<policy> runs, in order "
                             "(default: %(default)s)")
    options.add_output(parser)


def parse_runs(text: str) -> list[tuple[str, str]]:
    """``"compatible-kooper,eager-kooper"`` -> ``[(protocol, policy), ...]``, checked."""
    runs = []
    for name in (part.strip() for part in text.split(",")):
        if not name:
            continue
        protocol, _, policy = name.partition("-")
        if protocol not in {str(p) for p in model.Protocol} or (
                policy not in {str(q) for q in model.Policy}):
            raise errors.KooperError(
                f"--runs: {name!r} is not <protocol>-<policy> (protocols "
                f"{', '.join(model.Protocol)}; policies {', '.join(model.Policy)})")
        if (protocol, policy) in runs:  # two clusters would write the same logs
            raise errors.KooperError(f"--runs: {name!r} is named twice")
        runs.append((protocol, policy))
    if not runs:
        raise errors.KooperError("--runs: name at least one run")
    return runs


def run(args: argparse.Namespace) -> int:
    """Run the drills, print the table, write the plot; progress goes to stderr."""
    base = drill.Settings()
    if args.short:
        base = dataclasses.replace(base, pods=3, max_delay_s=10, restart_s=2.0,
                                   connectors=(("orders-source", 4), ("payments-source", 4)))
    settings = dataclasses.replace(
        base,
        pods=base.pods if args.pods is None else args.pods,
        max_delay_s=base.max_delay_s if args.max_delay is None else args.max_delay,
        restart_s=base.restart_s if args.restart is None else args.restart,
    )
    descriptions = {f"{p}-{q}": d for p, q, d in drill.RUNS}
    wanted = parse_runs(args.runs)
    if args.cluster_dir is not None and args.control_plane != "real":
        raise errors.KooperError("--cluster-dir needs --control-plane real")
    if args.control_plane == "real" and args.cluster_dir is None:
        localplane.binaries_or_hint()  # before anything starts: one line if they are missing
    out: pathlib.Path = args.out
    if not out.is_dir() and not out.parent.is_dir():
        raise errors.KooperError(f"--out {out}: its folder {out.parent} does not exist "
                                 f"(create it first)")
    if out.exists() and not out.is_dir():
        raise errors.KooperError(f"--out {out}: is a file, expected a folder")
    tasks = " + ".join(str(t) for _, t in settings.connectors)
    options.progress(
        f"kooper demo: {settings.pods} pods, {len(settings.connectors)} connectors "
        f"({tasks} tasks, {settings.resources} resources with the connector instances)")
    options.progress(
        f"  short timings for a demo: scheduledRebalanceMaxDelay {settings.max_delay_s} s, "
        f"lease {settings.lease_s} s, restart time {settings.restart_s} s "
        f"(defaults in a real cluster: 300 s and 30 s); tasks take "
        f"{settings.start_ms / 1000} s to start and {settings.stop_ms / 1000} s to stop")
    options.progress(f"  runs: {', '.join(f'{p}-{q}' for p, q in wanted)} "
                     f"(about a minute each on 2 cores)")
    started = time.monotonic()
    with _site(args, out) as site:
        if args.keep or args.sequential or len(wanted) == 1:
            # --keep waits for Ctrl-C, which only the main thread receives.
            results = []
            for number, (protocol, policy) in enumerate(wanted, start=1):
                results.append(drill.run_one(
                    settings, protocol=protocol, policy=policy, out=out, site=site,
                    progress=options.progress,
                    converged=_hold if args.keep and number == len(wanted) else None))
                options.progress(f"  {protocol}-{policy}: done "
                                 f"({time.monotonic() - started:.0f} s)")
        else:
            with concurrent.futures.ThreadPoolExecutor(len(wanted)) as pool:
                futures = {pool.submit(drill.run_one, settings, protocol=protocol,
                                       policy=policy, out=out, site=site,
                                       progress=options.progress): f"{protocol}-{policy}"
                           for protocol, policy in wanted}
                for future in concurrent.futures.as_completed(futures):
                    future.result()
                    options.progress(f"  {futures[future]}: done "
                                     f"({time.monotonic() - started:.0f} s)")
                results = [future.result() for future in futures]
    png = plot.plot_runs([(r.name, r.rows, r.start_ms, r.end_ms) for r in results],
                         out / "demo-running.png", total=settings.resources)
    if args.output != "table":
        print(options.dump(document(results, png), args.output))
    else:
        print(drill.format_table(results))
        for r in results:
            if r.name in descriptions:
                print(f"  {r.name}: {descriptions[r.name]}")
        print()
        print(f"plot: {png}; event logs: {', '.join(str(r.log_path) for r in results)}")
    options.progress(f"total {time.monotonic() - started:.0f} s")
    return 0


def document(results: list[drill.RunResult], png: pathlib.Path) -> dict[str, object]:
    """What ``-o json|yaml`` prints: each run's window metrics, exact, and the files."""
    return {
        "runs": [{
            "run": r.name,
            "protocol": r.protocol,
            "policy": r.policy,
            "window_start_ms": r.start_ms,
            "window_end_ms": r.end_ms,
            "resources": r.resources,
            "metrics": options.exact(dataclasses.asdict(r.metrics)),
            "event_log": str(r.log_path),
        } for r in results],
        "plot": str(png),
    }


@contextlib.contextmanager
def _site(args: argparse.Namespace, out: pathlib.Path) -> Iterator[drill.Site]:
    """Where the runs happen: fresh embedded clusters, or namespaces of a local cluster."""
    if args.control_plane == "emulator":
        yield drill.emulated_site
        return
    out.mkdir(exist_ok=True)
    with localplane.local_cluster(out, cluster_dir=args.cluster_dir,
                                  progress=options.progress) as handle:
        yield localplane.site(handle, keep_namespaces=args.cluster_dir is not None and args.keep)


def _hold(embedded: drill.Cluster) -> None:
    """Keep the converged cluster up until Ctrl-C, for ``kooper status`` and kubectl."""
    looks = "".join(f"  {line}\n" for line in embedded.how_to_look())
    options.progress(f"\ncluster kept up; in another shell:\n{looks}Ctrl-C to finish the demo")
    try:
        while True:
            embedded.check_operator()
            time.sleep(1)
    except KeyboardInterrupt:
        options.progress("finishing")
