"""The embedded drill: a rolling restart of real workers, under one protocol and policy.

One run = a fresh emulator, the real operator (``kooper run``) and N worker
processes (``kooper worker --demo``). The run waits until every resource runs,
marks the drill's start, restarts every pod (highest ordinal first, each after
the previous one rejoined), waits until every resource runs again and nothing
changed for a while, then merges the event log and measures the drill window
with ``kooper.sim.metrics``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import pathlib
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, Protocol

from kooper.core import durations, events, model
from kooper.demo import cluster, pods, recorder
from kooper.sim import metrics

GROUP = "demo"


class Cluster(Protocol):
    """Where a run happens: the embedded emulator, or a namespace of the local control plane."""

    @property
    def namespace(self) -> str: ...
    @property
    def audit_log(self) -> pathlib.Path: ...
    def describe(self) -> str:
        """One progress line: the API and the operator's pid."""
    def check_operator(self) -> None:
        """Raise if the operator process died."""
    def how_to_look(self) -> list[str]:
        """Commands that look at a kept run from another shell (``kooper demo --keep``)."""
    def create(self, ref: str, body: dict[str, Any]) -> dict[str, Any]:
        """Create an object in the run's namespace."""


class Members(Protocol):
    """The worker pods of one StatefulSet and their processes (``pods.PodRunner`` or a real one)."""

    @property
    def workdir(self) -> pathlib.Path: ...
    @property
    def app_label(self) -> str: ...
    @property
    def pods(self) -> Mapping[str, object]: ...
    def start_all(self) -> None:
        """Create the StatefulSet and start every pod."""
    def rolling_restart(self, *, restart_s: float, joined: Callable[[Any], bool],
                        progress: Callable[[str], None]) -> None:
        """Restart every pod, highest ordinal first, each after the previous one ``joined``."""
    def has_joined(self, pod: Any) -> bool:
        """Whether this incarnation of the pod joined the group (its report is in its Lease)."""
    def has_assignment(self, pod: Any) -> bool:
        """Whether it joined and applied a document the operator wrote for it."""
    def events_files(self) -> list[pathlib.Path]:
        """Every worker events file written so far."""
    def check_alive(self) -> None:
        """Raise if a worker died on its own."""
    def shutdown(self) -> None:
        """Stop the workers."""


Site = Callable[[pathlib.Path, str, "Settings"], contextlib.AbstractContextManager[
    tuple[Cluster, Members]]]
"""``site(workdir, run name, settings)``: a run's cluster and its worker pods, torn down on exit."""


@contextlib.contextmanager
def emulated_site(workdir: pathlib.Path, run: str,
                  settings: Settings) -> Iterator[tuple[Cluster, Members]]:
    """The default site: a fresh embedded cluster and the emulator's pod runner."""
    with cluster.EmbeddedCluster(workdir=workdir) as embedded:
        runner = pods.PodRunner(embedded.api, workdir=workdir, replicas=settings.pods,
                                namespace=embedded.namespace,
                                worker_args=worker_args(settings, run=run))
        yield embedded, runner


@dataclasses.dataclass(frozen=True, slots=True)
class Settings:
    """The drill's shape and timings (short ones, so a demo finishes in minutes)."""

    pods: int = 6
    connectors: tuple[tuple[str, int], ...] = (("orders-source", 4), ("payments-source", 4),
                                               ("warehouse-sink", 8))
    """Connector name and tasksMax."""
    max_delay_s: int = 20
    """scheduledRebalanceMaxDelay."""
    restart_s: float = 2.5
    """Time between a pod's deletion and its replacement's start."""
    lease_s: int = 5
    """leaseDurationSeconds (the CRD's minimum)."""
    clock_skew_s: int = 1
    settle_s: float = 2.0
    """How long nothing may change before a run counts as converged."""
    start_ms: int = 1000
    """The demo tasks' start latency: a Connect task opens connections and reads offsets."""
    stop_ms: int = 500
    """The demo tasks' stop latency: flush and commit."""

    @property
    def resources(self) -> int:
        """Connector instances plus tasks: what should run."""
        return sum(1 + tasks for _, tasks in self.connectors)


@dataclasses.dataclass(frozen=True, slots=True)
class RunResult:
    """One run's event log, its drill window and the window's metrics."""

    name: str
    protocol: str
    policy: str
    rows: Sequence[events.Event]
    start_ms: int
    end_ms: int
    metrics: metrics.RunMetrics
    """``kooper.sim.metrics`` over the window ``[start_ms, end_ms]``."""
    resources: int
    """Resources that should run (connector instances plus tasks)."""
    log_path: pathlib.Path


def now_ms() -> int:
    """Wall-clock milliseconds: the clock the workers stamp their rows with."""
    return int(time.time() * 1000)


def _worker_rows(runner: Members) -> list[events.Event]:
    rows: list[events.Event] = []
    for path in runner.events_files():
        rows.extend(row for row in recorder.read_rows(path)
                    if row.event in recorder.WORKER_KINDS)
    rows.sort(key=lambda row: (row.ts_ms, row.event is events.Kind.START))
    return rows


def wait_converged(runner: Members, embedded: Cluster, *,
                   expected: int, settle_s: float, timeout_s: float,
                   balanced: bool = False) -> None:
    """Every resource runs on exactly one member and nothing changed for ``settle_s``.

    ``balanced`` also waits until the pods' connector and task counts each
    differ by at most one (a group that just formed may still be moving work
    to the members that joined last).
    """
    deadline = time.monotonic() + timeout_s
    last_count = -1
    stable_since = time.monotonic()
    while True:
        embedded.check_operator()
        runner.check_alive()
        rows = _worker_rows(runner)
        running = metrics.running(rows, at_ms=now_ms())
        healthy = (sum(1 for m in running.values() if len(m) == 1) == expected
                   and all(len(m) <= 1 for m in running.values()))
        if healthy and balanced:
            healthy = _balanced(running, members=list(runner.pods))
        if len(rows) != last_count:
            last_count, stable_since = len(rows), time.monotonic()
        if healthy and time.monotonic() - stable_since >= settle_s:
            return
        if time.monotonic() > deadline:
            busy = sum(1 for m in running.values() if m)
            raise TimeoutError(f"not converged after {timeout_s}s: {busy}/{expected} running "
                               f"(logs in {runner.workdir})")
        time.sleep(0.2)


def _balanced(running: dict[metrics.Key, set[str]], *, members: Sequence[str]) -> bool:
    """Connector instances and tasks each spread over ``members`` within one of each other."""
    for tasks in (False, True):
        load = dict.fromkeys(members, 0)
        for (_, resource), owners in running.items():
            if (model.resource_sort_key(resource)[1] > 0) is tasks:
                for member in owners:
                    load[member] = load.get(member, 0) + 1
        if load and max(load.values()) - min(load.values()) > 1:
            return False
    return True


def run_one(settings: Settings, *, protocol: str, policy: str, out: pathlib.Path,
            progress: Callable[[str], None] = print,
            converged: Callable[[Any], None] | None = None,
            site: Site = emulated_site) -> RunResult:
    """One rolling-restart run on a fresh site (default: an embedded cluster).

    Writes ``out/<name>.events.jsonl``. ``converged`` is called with the
    still-running cluster once the drill converged (``kooper demo --keep`` waits
    there for the user's ``kooper status``).
    """
    name = f"{protocol}-{policy}"
    workdir = out / name
    workdir.mkdir(parents=True, exist_ok=True)
    for stale in workdir.glob("*"):
        if stale.is_file():
            stale.unlink()
    with site(workdir, name, settings) as (embedded, runner):
        progress(f"[{name}] {embedded.describe()}")
        try:
            create_objects(embedded, settings, protocol=protocol, policy=policy,
                           app_label=runner.app_label)
            runner.start_all()
            progress(f"[{name}] {settings.pods} pods started; waiting for "
                     f"{settings.resources} resources to run")
            wait_converged(runner, embedded, expected=settings.resources,
                           settle_s=settings.settle_s, timeout_s=90, balanced=True)
            start_ms = now_ms()
            progress(f"[{name}] converged; rolling restart (highest ordinal first)")
            runner.rolling_restart(
                restart_s=settings.restart_s, joined=runner.has_assignment,
                progress=lambda line: progress(f"[{name}]   {line}"))
            progress(f"[{name}] every pod restarted; waiting for convergence")
            wait_converged(runner, embedded, expected=settings.resources,
                           settle_s=settings.settle_s,
                           timeout_s=settings.max_delay_s + settings.lease_s * 3 + 30)
            end_ms = now_ms()
            if converged is not None:
                converged(embedded)
        finally:
            runner.shutdown()
    rows = recorder.collect(worker_files=runner.events_files(), audit_file=embedded.audit_log,
                            run=name, group=GROUP, protocol=protocol, policy=policy)
    log_path = recorder.write(rows, out / f"{name}.events.jsonl")
    measured = metrics.run_metrics(rows, start_ms=start_ms, end_ms=end_ms)
    progress(f"[{name}] done in {(end_ms - start_ms) / 1000:.1f}s; event log {log_path}")
    return RunResult(name=name, protocol=protocol, policy=policy, rows=rows,
                     start_ms=start_ms, end_ms=end_ms, metrics=measured,
                     resources=settings.resources, log_path=log_path)


def worker_args(settings: Settings, *, run: str) -> tuple[str, ...]:
    """``kooper worker`` flags: the demo connectors with the drill's short timings."""
    return ("--demo", "--run", run,
            "--lease-duration", f"{settings.lease_s}s",
            "--renew-interval", durations.format_ms(max(500, settings.lease_s * 1000 // 5)),
            "--tick-interval", "200ms",
            "--start-latency", durations.format_ms(settings.start_ms),
            "--stop-latency", durations.format_ms(settings.stop_ms))


def create_objects(embedded: Cluster, settings: Settings, *, protocol: str,
                   policy: str, app_label: str) -> None:
    """The WorkerGroup ``demo`` (selecting ``app_label``) and the settings' Connectors."""
    embedded.create("workergroups", {
        "apiVersion": "kooper.dev/v1alpha1", "kind": "WorkerGroup",
        "metadata": {"name": GROUP},
        "spec": {"selector": {"matchLabels": {pods.WORKER_LABEL: app_label}},
                 "protocol": protocol, "policy": policy,
                 "scheduledRebalanceMaxDelay": f"{settings.max_delay_s}s",
                 "leaseDurationSeconds": settings.lease_s,
                 "clockSkewSeconds": settings.clock_skew_s},
    })
    for index, (connector, tasks) in enumerate(settings.connectors):
        embedded.create("connectors", {
            "apiVersion": "kooper.dev/v1alpha1", "kind": "Connector",
            "metadata": {"name": connector},
            "spec": {"workerGroup": GROUP, "tasksMax": tasks,
                     # The SDK's demo connector types: counter sources, one sleep sink.
                     "config": {"type": "sleep" if index == 2 else "counter",
                                "start.ms": str(settings.start_ms),
                                "stop.ms": str(settings.stop_ms)}},
        })


RUNS: tuple[tuple[str, str, str], ...] = (
    ("compatible", "kooper", "cooperative, the default kooper policy"),
    ("compatible", "kip415", "cooperative, KIP-415's policy exactly"),
    ("eager", "kooper", "eager: every round stops everything"),
)
"""(protocol, policy, description) of the demo's three runs, in order."""


def format_table(results: Sequence[RunResult]) -> str:
    """The comparison table, one row per run (``kooper.sim.metrics`` over each drill window).

    ``vs eager``: the run's total pause over the eager run's (``-`` without an eager run).
    """
    header = (f"{'run':<18} {'total pause':>12} {'vs eager':>9} {'longest':>9} {'rounds':>7} "
              f"{'moves':>6} {'converge':>9} {'overlaps':>9} {'running':>8}")
    lines = [header, "-" * len(header)]
    eager = next((r.metrics.total_pause_ms for r in results if r.protocol == "eager"
                  or r.name.startswith("eager")), None)
    for r in results:
        m = r.metrics
        converge = "-" if m.converge_ms is None else f"{m.converge_ms / 1000:.1f}s"
        ratio = f"{m.total_pause_ms / eager:.2f}" if eager else "-"
        lines.append(f"{r.name:<18} {m.total_pause_ms / 1000:>11.1f}s {ratio:>9}"
                     f" {m.max_pause_ms / 1000:>8.1f}s {m.rounds:>7} {m.moves:>6}"
                     f" {converge:>9} {m.overlaps:>9}"
                     f" {m.running_at_end:>4}/{r.resources:<3}")
    return "\n".join(lines)
