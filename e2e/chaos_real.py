"""Chaos with real parts: ``kooper run`` and ``kooper worker --demo`` processes, real faults.

Where the faults come from. The operator (``kooper run``, kopf) and every worker
(``kooper worker --demo``, the SDK) are separate OS processes that talk to the API
over TCP. The API is a *plane* (``Plane``), one of two:

* ``realplane.RealPlane`` (the test in ``make test``, ``bench_chaos_real.py`` by
  default): a real kube-apiserver, etcd and kube-controller-manager
  (``kooper.controlplane``), each run in a namespace of its own, seen by the operator
  and the workers only through the fault proxy (e2e/fault_proxy.py), which terminates
  their TLS with a certificate signed by the cluster's CA and forwards to the API
  server. The workers are pods of that API server with pod-bound ServiceAccount
  tokens, finding the proxy through the SDK's in-cluster configuration.
* ``EmulatorPlane`` (``bench_chaos_real.py --backend emulator``): the emulator
  (``kooper.emulator``) served over HTTP from this process, its own fault switches
  (``emulator.faults``).

The fault switches mean the same on both: a burst of 500s or 429s answers the next N
writes of *any* client (counted under one lock), the slow API holds every request
(watches included) for a while. The processes are signalled for real: SIGKILL of a
worker or of the operator (which is restarted as a new process, mid-round or not),
SIGSTOP/SIGCONT of a worker. Everything else (the faults' sequence, the waits, the
invariants) is one code path; only the plane differs.

The harness plays the StatefulSet controller and the kubelet (``kooper.demo.pods`` on
the emulator, ``realplane.RealPods`` on the real API): a killed or exited worker is
replaced by a new pod of the same name. It writes its own
``ProcessRow`` log (``chaos_log``): every signal it sends and every process exit, with
the time ``waitpid`` returned. The invariants are computed from that and from the
workers' own rows, never from what the operator says (its audit log is only read to
learn when it declared a frozen member departed, so the freeze lasts past that).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import IO, Any, Protocol

from e2e import chaos_log
from kooper.core import durations, events
from kooper.demo import cluster as embedded
from kooper.demo import pods, recorder
from kooper.emulator import cluster as emulated

GROUP = "chaos"


@dataclasses.dataclass(frozen=True, slots=True)
class Settings:
    """The group's shape and timing (short, so that a run takes a minute or two)."""

    pods: int = 4
    connectors: tuple[tuple[str, int], ...] = (("orders", 3), ("payments", 3))
    """Connector name and tasksMax."""
    lease_s: int = 5
    """leaseDurationSeconds (the CRD's minimum)."""
    renew_s: float = 1.0
    skew_s: int = 1
    delay_s: int = 6
    """scheduledRebalanceMaxDelay."""
    start_ms: int = 50
    stop_ms: int = 50
    settle_s: float = 1.5
    """Nothing changed for this long (and every resource runs once): converged."""

    @property
    def expected(self) -> list[str]:
        """Every resource that should run: connector instances and their tasks."""
        return [name for connector, tasks in self.connectors
                for name in (connector, *(f"{connector}-{i}" for i in range(tasks)))]

    @property
    def bound_s(self) -> float:
        """The stated convergence bound after a fault ends.

        A departure is noticed within lease + skew of the last renewal the operator saw,
        its work waits up to the scheduled-rebalance delay, then one round reassigns it
        (revoke, then assign: two rounds with the cooperative protocol); 20 s covers
        process start-up (a Python interpreter and its imports), kopf's start-up after an
        operator kill and the rounds, on a loaded two-core machine.
        """
        return self.lease_s + self.skew_s + self.delay_s + 20.0


def now_ms() -> int:
    """Wall-clock milliseconds: the clock every process on this host stamps rows with."""
    return int(time.time() * 1000)


class EmulatorPlane:
    """The emulator (``kooper.emulator``) over HTTP in this process, its own fault switches."""

    name = "emulator"
    namespace = "default"

    def __init__(self, workdir: pathlib.Path) -> None:
        del workdir
        self.api = emulated.EmulatedCluster(crds=sorted(embedded.CRDS_DIR.glob("*.yaml")))

    def start(self) -> None:
        """Serve the emulator."""
        self.api.start()

    def stop(self) -> None:
        """Stop serving."""
        self.api.stop()

    def pod_runner(self, *, workdir: pathlib.Path, replicas: int,
                   worker_args: tuple[str, ...]) -> pods.PodRunner:
        """The emulator's pod runner (``kooper.demo.pods``)."""
        return pods.PodRunner(self.api, workdir=workdir, replicas=replicas,
                              worker_args=worker_args, grace_s=5.0)

    def create(self, plural: str, body: Mapping[str, Any]) -> None:
        """Create a WorkerGroup or a Connector (directly: faults apply to HTTP only)."""
        self.api.create(plural, dict(body), namespace=self.namespace)

    def operator_command(self) -> tuple[list[str], dict[str, str]]:
        """The operator's extra arguments and environment (the emulator's URL)."""
        return [], pods.child_env(self.api.url)

    def fail_next_writes(self, count: int, *, code: int) -> None:
        """Answer the next ``count`` writes of any client with ``code``."""
        self.api.fail_next_writes(None, count, code=code)

    def pending_failures(self) -> int:
        """Injected errors not served yet."""
        return self.api.pending_failures()

    def set_delay(self, seconds: float) -> None:
        """Hold every answer ``seconds``."""
        self.api.set_delay(seconds)


class Plane(Protocol):
    """What the harness needs of an API backend (``EmulatorPlane``, ``realplane.RealPlane``)."""

    name: str
    namespace: str

    def start(self) -> None: ...
    def stop(self) -> None: ...
    def pod_runner(self, *, workdir: pathlib.Path, replicas: int,
                   worker_args: tuple[str, ...]) -> Any: ...
    def create(self, plural: str, body: Mapping[str, Any]) -> None: ...
    def operator_command(self) -> tuple[list[str], dict[str, str]]: ...
    def fail_next_writes(self, count: int, *, code: int) -> None: ...
    def pending_failures(self) -> int: ...
    def set_delay(self, seconds: float) -> None: ...


class Harness:
    """One API backend, one operator process, ``settings.pods`` worker processes."""

    def __init__(self, settings: Settings, workdir: pathlib.Path, *, run: str = "chaos",
                 plane: Callable[[pathlib.Path], Plane] = EmulatorPlane) -> None:
        """``plane`` makes the API backend for ``workdir`` (default: the emulator)."""
        self.settings = settings
        self.workdir = workdir
        self.run = run
        self.plane = plane(workdir)
        self.audit_log = workdir / "operator.audit.jsonl"
        self.process_log = workdir / "processes.jsonl"
        self.operator: subprocess.Popen[bytes] | None = None
        self.operator_starts = 0
        self._operator_log: IO[bytes] | None = None
        self._lock = threading.Lock()
        self._reapers: list[threading.Thread] = []
        self.runner: Any = None

    # --- lifecycle -----------------------------------------------------------------

    def __enter__(self) -> Harness:
        self.workdir.mkdir(parents=True, exist_ok=True)
        for stale in self.workdir.glob("*"):
            if stale.is_dir():
                shutil.rmtree(stale)
            else:
                stale.unlink()
        self.plane.start()
        try:
            self.runner = self.plane.pod_runner(workdir=self.workdir,
                                                replicas=self.settings.pods,
                                                worker_args=self._worker_args())
            self.start_operator()
            self._create_objects()
            self.runner.create_statefulset()
            for ordinal in range(self.settings.pods):
                self._start_pod(ordinal)
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        runner = self.runner
        if runner is not None:
            for pod in list(runner.pods.values()):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pod.process.pid, signal.SIGCONT)  # a stopped process ignores TERM
            runner.shutdown()
        if self.operator is not None and self.operator.poll() is None:
            self.operator.kill()
            self.operator.wait()
        if self._operator_log is not None:
            self._operator_log.close()
        for reaper in self._reapers:
            reaper.join(timeout=10)
        self.plane.stop()

    def _worker_args(self) -> tuple[str, ...]:
        s = self.settings
        return ("--demo", "--run", self.run, "--lease-duration", f"{s.lease_s}s",
                "--renew-interval", durations.format_ms(round(s.renew_s * 1000)),
                "--tick-interval", "200ms",
                "--start-latency", durations.format_ms(s.start_ms),
                "--stop-latency", durations.format_ms(s.stop_ms))

    def _create_objects(self) -> None:
        assert self.runner is not None
        s = self.settings
        self.plane.create("workergroups", {
            "apiVersion": "kooper.dev/v1alpha1", "kind": "WorkerGroup",
            "metadata": {"name": GROUP},
            "spec": {"selector": {"matchLabels": {pods.WORKER_LABEL: self.runner.app_label}},
                     "protocol": "compatible", "policy": "kooper",
                     "scheduledRebalanceMaxDelay": f"{s.delay_s}s",
                     "leaseDurationSeconds": s.lease_s, "clockSkewSeconds": s.skew_s},
        })
        for connector, tasks in s.connectors:
            self.plane.create("connectors", {
                "apiVersion": "kooper.dev/v1alpha1", "kind": "Connector",
                "metadata": {"name": connector},
                "spec": {"workerGroup": GROUP, "tasksMax": tasks, "config": {"type": "counter"}},
            })

    # --- the process log -------------------------------------------------------------

    def _note(self, pod: pods.Pod, what: str, code: int | None = None,
              ts_ms: int | None = None) -> None:
        row = chaos_log.ProcessRow(ts_ms=now_ms() if ts_ms is None else ts_ms,
                                   incarnation=incarnation_of(pod.events_file), pod=pod.name,
                                   what=what, code=code)
        with self._lock, self.process_log.open("a") as out:
            out.write(row.to_json() + "\n")

    def _start_pod(self, ordinal: int) -> pods.Pod:
        assert self.runner is not None
        pod = self.runner.start_pod(ordinal)
        self._note(pod, "spawn")

        def reap() -> None:
            code = pod.process.wait()
            self._note(pod, "exit", code)

        reaper = threading.Thread(target=reap, name=f"reap-{pod.name}", daemon=True)
        reaper.start()
        self._reapers.append(reaper)
        return pod

    def pod(self, ordinal: int) -> pods.Pod:
        """The current pod of ``ordinal``."""
        assert self.runner is not None
        return self.runner.pods[self.runner.pod_name(ordinal)]

    # --- the operator ----------------------------------------------------------------

    def start_operator(self) -> None:
        """Start ``kooper run`` (again): a new process, the same audit log."""
        self.operator_starts += 1
        if self._operator_log is None:
            self._operator_log = (self.workdir / "operator.log").open("ab")
        extra, env = self.plane.operator_command()
        argv = [sys.executable, "-m", "kooper.cli", "run", *extra,
                "--namespace", self.plane.namespace,
                "--metrics-port", "0", "--health-port", "0", "--audit-log", str(self.audit_log),
                "--identity", f"operator-{self.operator_starts}"]
        self.operator = subprocess.Popen(argv, env=env,
                                         stdout=self._operator_log, stderr=subprocess.STDOUT)

    # --- faults ----------------------------------------------------------------------

    def kill_worker(self, ordinal: int) -> None:
        """SIGKILL the worker; its pod is replaced (a new incarnation of the same name)."""
        assert self.runner is not None
        pod = self.pod(ordinal)
        self._note(pod, "sigkill")
        self.runner.kill_pod(ordinal)
        self._start_pod(ordinal)

    def kill_operator(self, *, restart: bool = True) -> None:
        """SIGKILL the operator process (whatever it was doing), then start a new one."""
        assert self.operator is not None
        self.operator.kill()
        self.operator.wait()
        if restart:
            self.start_operator()

    def api_errors(self, code: int, count: int) -> None:
        """Answer the next ``count`` writes of any client with ``code`` (500, 429...)."""
        self.plane.fail_next_writes(count, code=code)

    def api_errors_served(self) -> bool:
        """Whether every injected error was answered."""
        return self.plane.pending_failures() == 0

    @contextlib.contextmanager
    def slow_api(self, seconds: float) -> Iterator[None]:
        """Every answer (reads, writes, watch starts) held ``seconds`` while inside."""
        self.plane.set_delay(seconds)
        try:
            yield
        finally:
            self.plane.set_delay(0)

    def freeze_worker(self, ordinal: int) -> pods.Pod:
        """SIGSTOP the worker (call ``thaw_worker`` after)."""
        pod = self.pod(ordinal)
        os.kill(pod.process.pid, signal.SIGSTOP)
        self._note(pod, "sigstop")
        return pod

    def thaw_worker(self, pod: pods.Pod) -> None:
        """SIGCONT a frozen worker."""
        os.kill(pod.process.pid, signal.SIGCONT)
        self._note(pod, "sigcont")

    def audit(self) -> list[events.Event]:
        """The operator's audit rows (``leaders.Replicas``: both replicas', by time)."""
        return recorder.read_rows(self.audit_log)

    def audit_rows(self) -> int:
        """How many rows the operator's audit log holds."""
        return len(self.audit())

    def taken_over(self, incarnation: str, *, since_ms: int) -> bool:
        """Whether another incarnation started, after ``since_ms``, something that
        ``incarnation`` runs (its run has not ended)."""
        all_runs = self.runs()
        held = {r.resource for r in all_runs
                if r.incarnation == incarnation and r.end_ms == chaos_log.OPEN}
        return any(r.resource in held and r.incarnation != incarnation
                   and r.start_ms >= since_ms for r in all_runs)

    def holding(self, ordinal: int) -> int:
        """``ordinal`` if its pod runs something now, else the pod that runs the most."""
        assert self.runner is not None
        now = chaos_log.running_at(self.runs(), now_ms())
        load = {i: sum(1 for held in now.values() for run in held
                       if run.incarnation == incarnation_of(self.pod(i).events_file))
                for i in range(self.settings.pods)}
        return ordinal if load.get(ordinal) else max(load, key=lambda i: load[i])

    def departed_in_audit(self, member: str, *, since_ms: int) -> bool:
        """Whether the operator logged ``member`` leaving after ``since_ms``."""
        return any(row.event is events.Kind.LEAVE and row.member == member
                   and row.ts_ms >= since_ms
                   for row in self.audit())

    def others_started_their_work(self, member: str, *, since_ms: int) -> bool:
        """Whether every start the operator logged since ``since_ms`` for a member other
        than ``member`` was carried out: that member started the resource since then, or
        the operator logged stopping it there later (it was revoked before it started).

        Used to thaw a frozen member only once the round that gave its work away has
        been carried out: a thaw while the successors are starting it races them (a
        successor's start a few milliseconds after SIGCONT, before the thawed process
        had a chance to end itself, is not "while frozen").
        """
        rows = self.audit()
        starts = [r for r in rows if r.event is events.Kind.START and r.member != member
                  and r.ts_ms >= since_ms]
        if not starts:
            return True
        started = {(run.pod, run.resource, run.start_ms) for run in self.runs()
                   if run.start_ms >= since_ms}
        for row in starts:
            if any(pod == row.member and resource == row.resource and at >= row.ts_ms
                   for pod, resource, at in started):
                continue
            if any(later.event is events.Kind.STOP and later.member == row.member
                   and later.resource == row.resource and later.ts_ms > row.ts_ms
                   for later in rows):
                continue
            return False
        return True

    # --- the kubelet -----------------------------------------------------------------

    def supervise(self) -> None:
        """Replace worker processes that ended by themselves; raise if the operator died."""
        if self.operator is not None and self.operator.poll() is not None:
            raise pods.DemoError(f"the operator exited with {self.operator.returncode}: "
                                 + pods.log_tail(self.workdir / "operator.log"))
        assert self.runner is not None
        for ordinal in range(self.settings.pods):
            pod = self.runner.pods.get(self.runner.pod_name(ordinal))
            if pod is not None and pod.process.poll() is not None:
                self.runner.kill_pod(ordinal)  # reaped already: removes the Pod object
                self._start_pod(ordinal)

    # --- the log ---------------------------------------------------------------------

    def worker_rows(self) -> dict[str, list[events.Event]]:
        """incarnation -> the rows its process wrote."""
        assert self.runner is not None
        return {incarnation_of(path): [row for row in recorder.read_rows(path)
                                       if row.event in recorder.WORKER_KINDS]
                for path in self.runner.events_files()}

    def processes(self) -> list[chaos_log.ProcessRow]:
        """The harness's own rows."""
        return chaos_log.read_process_rows(self.process_log)

    def runs(self) -> list[chaos_log.Run]:
        """Every run so far (``chaos_log.runs``)."""
        return chaos_log.runs(self.worker_rows(), self.processes())

    def wait_converged(self, *, after_ms: int, timeout_s: float | None = None,
                       extra: Callable[[], None] = lambda: None) -> int:
        """Wait until every resource runs exactly once and nothing changed for
        ``settings.settle_s``; returns when, by the workers' rows, it became whole."""
        timeout = self.settings.bound_s * 2 if timeout_s is None else timeout_s
        deadline = time.monotonic() + timeout
        last, stable_since = -1, time.monotonic()
        while True:
            self.supervise()
            extra()
            all_runs = self.runs()
            whole = chaos_log.settled_at(all_runs, self.settings.expected, after_ms=after_ms,
                                         until_ms=now_ms())
            size = sum(len(rows) for rows in self.worker_rows().values())
            if size != last:
                last, stable_since = size, time.monotonic()
            if whole is not None and time.monotonic() - stable_since >= self.settings.settle_s:
                return whole
            if time.monotonic() > deadline:
                missing = chaos_log.lost(all_runs, self.settings.expected, at_ms=now_ms())
                raise TimeoutError(f"not converged after {timeout:.0f}s: not running exactly "
                                   f"once: {missing} (logs in {self.workdir})")
            time.sleep(0.2)

    def joined(self, ordinal: int) -> bool:
        """Whether the current pod of ``ordinal`` joined (its Lease carries its report)."""
        assert self.runner is not None
        return self.runner.has_joined(self.pod(ordinal))


def incarnation_of(events_file: pathlib.Path) -> str:
    """``workers-1.3.events.jsonl`` -> ``workers-1.3`` (pod name and spawn number)."""
    return events_file.name.removesuffix(".events.jsonl")


@dataclasses.dataclass(frozen=True, slots=True)
class Step:
    """One fault of a scenario and when the group was whole again."""

    fault: str
    started_ms: int
    ended_ms: int
    converged_ms: int
    stale_writes: int = 0
    """Control faults (e2e/leaders.py): writes of ConfigMaps and the WorkerGroup status
    the stale leader sent once the standby led, as the fault proxy answered them."""
    stale_landed: int = 0
    """Of ``stale_writes``, those the API accepted (2xx): a fence that did not hold."""
    down_s: float = 0.0
    """Restart faults (e2e/leaders.py): how long the killed process stayed down."""
    pids: tuple[int, int] = (0, 0)
    """Restart faults: the killed process's pid, and its successor's."""
    leaders: tuple[str, str] = ("", "")
    """Restart faults: the leader before the fault, and once the group was whole again."""
    worker_errors: int = 0
    """Restart faults: failed Lease renewals and watches the workers logged meanwhile."""
    outage: str = ""
    """Restart faults: how a read of the API failed just after the kill ("" if it did not)."""

    @property
    def converge_s(self) -> float:
        """From the fault's end to the group being whole (the workers' rows)."""
        return (self.converged_ms - self.ended_ms) / 1000


@dataclasses.dataclass(frozen=True, slots=True)
class Report:
    """A run's steps and the invariants' findings."""

    steps: Sequence[Step]
    overlaps: Sequence[chaos_log.Overlap]
    """Every overlap, frozen members included."""
    frozen_overlaps: Sequence[chaos_log.Overlap]
    """Those of ``overlaps`` that are a frozen member's work taken over while it was
    stopped, the successor at a higher epoch (``chaos_log.while_frozen``)."""
    after_thaw_ms: int
    """The longest a frozen member ran a taken-over resource after its SIGCONT."""
    lost: Sequence[str]
    unexpected: Sequence[str]
    epoch_regressions: Sequence[tuple[chaos_log.Run, chaos_log.Run]]
    generation_regressions: Sequence[tuple[events.Event, events.Event]]
    late: Sequence[Step]
    """Steps that converged later than ``Settings.bound_s`` after the fault ended."""
    frozen_runs: int
    """Runs that were open while their process was frozen (the check counted them)."""

    @property
    def double_ownership(self) -> int:
        """Overlaps that are not a frozen member's work taken over at a higher epoch."""
        return len(self.overlaps) - len(self.frozen_overlaps)

    @property
    def violations(self) -> int:
        """Every finding but the frozen members' fenced overlaps, counted once."""
        return (self.double_ownership + len(self.lost) + len(self.unexpected)
                + len(self.epoch_regressions) + len(self.generation_regressions)
                + len(self.late))

    def describe(self) -> str:
        """The findings, one per line."""
        lines = [f"overlap: {o.describe()}" + (" [frozen, fenced by epoch]"
                                               if o in self.frozen_overlaps else "")
                 for o in self.overlaps]
        lines += [f"lost at the end: {r}" for r in self.lost]
        lines += [f"running but not wanted: {r}" for r in self.unexpected]
        lines += [f"epoch did not grow: {a.resource} {a.incarnation}@{a.epoch} then "
                  f"{b.incarnation}@{b.epoch}" for a, b in self.epoch_regressions]
        lines += [f"generation went back: {a.member} {a.generation} then {b.generation}"
                  for a, b in self.generation_regressions]
        lines += [f"late: {s.fault} converged {s.converge_s:.1f}s after it ended"
                  for s in self.late]
        return "\n".join(lines)


SLOW_API_S = 0.5
"""How long the slow API holds every answer. A worker renews its Lease ``renew_s``
after the previous renewal *returned* and counts from when it was *sent*, so each
renewal costs ``renew_s`` + 2 x latency of the fencing budget (``lease - stop timeout -
margin``: 3 s with a 5 s lease): at 1 s per answer and ``renew_s`` 1 the workers fence
themselves every cycle and the group never settles (docs/sdk.md, "Chaos with real
processes")."""

BURST = 20
"""How many writes an ``api-500`` or ``api-429`` burst answers with the error."""

FAULTS = ("worker-sigkill", "operator-sigkill", "api-500", "api-429", "slow-api",
          "frozen-worker", "frozen-operator-sigkill", "frozen-past-delay")
"""What ``inject`` knows. ``frozen-past-delay`` is the one fault no lease can cover: the
process is held stopped until its work was started elsewhere, so the overlap check
must report it (with the frozen member named); see docs/sdk.md, "Chaos with real
processes"."""


def inject(h: Harness, fault: str, ordinal: int) -> Step:
    """Run one fault to its end and wait until the group is whole again."""
    started = now_ms()
    if fault == "worker-sigkill":
        h.kill_worker(ordinal)
    elif fault == "operator-sigkill":
        # Mid-round: a worker dies, and the operator is killed as soon as its audit log
        # shows it acting on that (the round's first writes are out, the rest are not).
        audited = h.audit_rows()
        h.kill_worker(ordinal)
        _wait(h, "the operator's next round", lambda: h.audit_rows() > audited)
        h.kill_operator()
    elif fault in ("api-500", "api-429"):
        # A worker dies as a burst of errors starts: the operator's reaction, the
        # replacement's join and every renewal meet the errors until they are served.
        h.api_errors(int(fault[-3:]), BURST)
        h.kill_worker(ordinal)
        _wait(h, f"{fault} burst served", h.api_errors_served)
    elif fault == "slow-api":
        # A worker dies while every answer takes SLOW_API_S: the group heals slowly.
        with h.slow_api(SLOW_API_S):
            h.kill_worker(ordinal)
            h.wait_converged(after_ms=started)
    elif fault == "frozen-worker":
        # Frozen past its Lease: held stopped until the operator declared it departed
        # (and the other members started what that round gave them).
        pod = h.freeze_worker(h.holding(ordinal))
        _wait(h, f"{pod.name} declared departed while frozen",
              lambda: h.departed_in_audit(pod.name, since_ms=started))
        _wait_handed_over(h, pod.name, started)
        h.thaw_worker(pod)
    elif fault == "frozen-operator-sigkill":
        # Frozen, and the operator SIGKILLed while it is: the new operator has never
        # seen the frozen member's Lease change, so it times the expiry from its own
        # start (never from the renewTime the worker wrote); thawed once it declared it.
        pod = h.freeze_worker(h.holding(ordinal))
        h.kill_operator()
        _wait(h, f"{pod.name} declared departed by the restarted operator",
              lambda: h.departed_in_audit(pod.name, since_ms=started))
        _wait_handed_over(h, pod.name, started)
        h.thaw_worker(pod)
    elif fault == "frozen-past-delay":
        # Frozen past its Lease and the scheduled-rebalance delay: held stopped until
        # another member started something the frozen one still runs (and everything
        # that round gave away).
        pod = h.freeze_worker(h.holding(ordinal))
        frozen = incarnation_of(pod.events_file)
        _wait(h, f"{pod.name}'s work started elsewhere while it is frozen",
              lambda: h.taken_over(frozen, since_ms=started))
        _wait_handed_over(h, pod.name, started)
        h.thaw_worker(pod)
    else:
        raise ValueError(f"unknown fault {fault!r} (known: {FAULTS})")
    ended = now_ms()
    converged = h.wait_converged(after_ms=ended)
    return Step(fault, started, ended, converged)


def _wait_handed_over(h: Harness, member: str, since_ms: int) -> None:
    _wait(h, f"the other members to start what the operator gave them of {member}'s work",
          lambda: h.others_started_their_work(member, since_ms=since_ms))


def _wait(h: Harness, what: str, check: Callable[[], bool]) -> None:
    deadline = time.monotonic() + h.settings.bound_s * 2
    while not check():
        h.supervise()
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out waiting for {what} (logs in {h.workdir})")
        time.sleep(0.1)


def check(h: Harness, steps: Sequence[Step]) -> Report:
    """The invariants over everything the run logged."""
    processes = h.processes()
    worker_rows = h.worker_rows()
    all_runs = chaos_log.runs(worker_rows, processes)
    frozen = chaos_log.freezes(processes)
    frozen_runs = sum(1 for run in all_runs
                      if any(run.start_ms < b and a < run.end_ms
                             for a, b in frozen.get(run.incarnation, ())))
    overlaps = chaos_log.overlaps(all_runs, processes)
    fenced = [o for o in overlaps if chaos_log.while_frozen(o, processes)]
    after_thaw = [o.to_ms - thawed for o in fenced for name in o.frozen
                  if (thawed := chaos_log.thawed_at(name, processes)) is not None]
    return Report(
        steps=steps,
        overlaps=overlaps,
        frozen_overlaps=fenced,
        after_thaw_ms=max([0, *after_thaw]),
        lost=chaos_log.lost(all_runs, h.settings.expected),
        unexpected=chaos_log.unexpected(all_runs, h.settings.expected),
        epoch_regressions=chaos_log.epoch_regressions(all_runs),
        generation_regressions=chaos_log.generation_regressions(worker_rows),
        late=[s for s in steps if s.converge_s > h.settings.bound_s],
        frozen_runs=frozen_runs,
    )


def run_scenario(settings: Settings, workdir: pathlib.Path,
                 faults: Sequence[tuple[str, int]], *,
                 progress: Callable[[str], None] = lambda _: None,
                 plane: Callable[[pathlib.Path], Plane] = EmulatorPlane) -> Report:
    """One group, the faults in order (each to convergence), then the invariants."""
    with Harness(settings, workdir, plane=plane) as h:
        h.wait_converged(after_ms=now_ms(), timeout_s=120)
        progress("converged")
        steps = []
        for fault, ordinal in faults:
            step = inject(h, fault, ordinal)
            progress(f"{fault} (pod {ordinal}): whole again {step.converge_s:.1f}s after")
            steps.append(step)
        report = check(h, steps)
        (workdir / "report.json").write_text(json.dumps(
            {"violations": report.violations, "overlaps": len(report.overlaps),
             "frozen_overlaps": len(report.frozen_overlaps), "findings": report.describe(),
             "steps": [dataclasses.asdict(s) for s in steps]}, indent=1))
        return report
