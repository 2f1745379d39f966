"""Two operator replicas electing a leader, on the real control plane (issue 22).

``Replicas`` is ``chaos_real.Harness`` on a ``realplane.RealPlane`` with two
``kooper run --leader-election`` processes instead of one. Each reaches the API
through a port of the fault proxy of its own, and its proxy client's name is its
``--identity``: the leader Lease's ``holderIdentity`` names the client a fault (a
trap, a partition) should target, and the proxy's history tells the replicas'
requests apart. The workers, their rows and the invariants are the harness's.

The harness signals the replicas itself (SIGSTOP, SIGCONT) and writes those signals
into its process log like a worker's (``chaos_log.ProcessRow``; a replica has no
runs, so the worker invariants are unaffected).

Everything here reads the API as the admin, around the proxy: a trap or a partition
on a replica's port never hides what the test looks at.
"""

from __future__ import annotations

import contextlib
import functools
import os
import pathlib
import random
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from typing import IO, Any

from e2e import chaos_log, chaos_real, realplane
from kooper.controlplane import host
from kooper.core import events
from kooper.demo import pods, recorder
from kooper.sdk import apierrors
from kooper.shell import leader

REPLICAS = ("operator-a", "operator-b")
"""The replicas' identities, and their clients' names at the proxy."""
LEADER_EPOCH_ANNOTATION = "kooper.dev/leader-epoch"
"""The leader epoch on a ConfigMap (docs/protocol.md, "Fencing the leader"); spelled out
here, not imported, so the harness runs against code from before the fence too."""
STOOD_DOWN = ("stops leading", "standing by")
"""What a replica logs when it stops leading: its elector found another holder (or
could not renew), or a round met a newer epoch (``LostLeadership``)."""


class Replicas(chaos_real.Harness):
    """The real plane, ``settings.pods`` workers and two operator replicas."""

    def __init__(self, settings: chaos_real.Settings, workdir: pathlib.Path, *,
                 cluster: host.Handle, run: str = "chaos") -> None:
        super().__init__(settings, workdir, run=run,
                         plane=functools.partial(realplane.RealPlane, cluster))
        assert isinstance(self.plane, realplane.RealPlane)
        self.real: realplane.RealPlane = self.plane
        self.operators: dict[str, subprocess.Popen[bytes]] = {}
        self._logs: dict[str, IO[bytes]] = {}

    # --- the replicas ----------------------------------------------------------------

    def start_operator(self) -> None:
        """Start both replicas (``Harness.__enter__`` calls this once)."""
        for name in REPLICAS:
            self.start_replica(name)

    def start_replica(self, name: str) -> None:
        """``kooper run --leader-election --identity name`` through ``name``'s proxy port."""
        self.operator_starts += 1
        extra, env = self.real.operator_command(client=name)
        log = self._logs.get(name)
        if log is None:
            log = self._logs[name] = self.log_of(name).open("ab")
        namespace = self.plane.namespace
        argv = [sys.executable, "-m", "kooper.cli", "run", *extra, "--namespace", namespace,
                "--leader-election", "--leader-namespace", namespace, "--identity", name,
                "--metrics-port", "0", "--health-port", "0",
                "--audit-log", str(self.workdir / f"{name}.audit.jsonl")]
        self.operators[name] = subprocess.Popen(argv, env=env, stdout=log,
                                                stderr=subprocess.STDOUT)

    def log_of(self, name: str) -> pathlib.Path:
        """Where replica ``name``'s output goes."""
        return self.workdir / f"{name}.log"

    def __exit__(self, *exc: object) -> None:
        for process in self.operators.values():
            if process.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(process.pid, signal.SIGCONT)
                process.kill()
                process.wait()
        for log in self._logs.values():
            log.close()
        super().__exit__(*exc)

    def supervise(self) -> None:
        """The harness's kubelet, and raise if a replica died."""
        for name, process in self.operators.items():
            if process.poll() is not None:
                raise pods.DemoError(f"operator {name} exited with {process.returncode}: "
                                     + pods.log_tail(self.log_of(name)))
        super().supervise()

    def signal_operator(self, name: str, what: str) -> None:
        """SIGSTOP (``sigstop``) or SIGCONT (``sigcont``) replica ``name``, logged."""
        number = {"sigstop": signal.SIGSTOP, "sigcont": signal.SIGCONT}[what]
        os.kill(self.operators[name].pid, number)
        row = chaos_log.ProcessRow(ts_ms=chaos_real.now_ms(), incarnation=name, pod=name,
                                   what=what)
        with self._lock, self.process_log.open("a") as out:
            out.write(row.to_json() + "\n")

    def stood_down(self, name: str) -> bool:
        """Whether replica ``name`` logged that it stopped leading."""
        return self.stand_downs(name) > 0

    def stand_downs(self, name: str) -> int:
        """How many times replica ``name`` logged that it stopped leading."""
        text = self.log_of(name).read_text(errors="replace")
        return sum(1 for line in text.splitlines()
                   if any(phrase in line for phrase in STOOD_DOWN))

    def audit(self) -> list[events.Event]:
        """Both replicas' audit rows, by time (each writes its own log)."""
        rows = [row for name in REPLICAS
                for row in recorder.read_rows(self.workdir / f"{name}.audit.jsonl")]
        return sorted(rows, key=lambda row: row.ts_ms)

    def kill_operator(self, *, restart: bool = True) -> None:
        """SIGKILL the leading replica (whatever it was doing); start it again, a new
        process under the same name, which stands by while the other takes over."""
        name = self.leader() or REPLICAS[0]
        process = self.operators[name]
        process.kill()
        process.wait()
        if restart:
            self.start_replica(name)

    # --- what the API says (as the admin, not through the proxy) --------------------------

    def _get(self, path: str) -> dict[str, Any] | None:
        try:
            return self.real.admin.get(path)
        except apierrors.NotFound:
            return None

    def leader(self) -> str:
        """The leader Lease's holder ("" when there is none yet)."""
        lease = self._get(f"{leader.LEASES.format(namespace=self.plane.namespace)}/"
                          f"{leader.LEASE_NAME}")
        return str(((lease or {}).get("spec") or {}).get("holderIdentity") or "")

    def group_status(self) -> dict[str, Any]:
        """The WorkerGroup's status."""
        group = self._get(f"/apis/kooper.dev/v1alpha1/namespaces/{self.plane.namespace}/"
                          f"workergroups/{chaos_real.GROUP}")
        return dict((group or {}).get("status") or {})

    def status_epoch(self) -> int:
        """``status.leaderEpoch`` (0: none written)."""
        value = self.group_status().get("leaderEpoch", 0)
        return value if isinstance(value, int) else 0

    def configmap_epochs(self) -> dict[str, int]:
        """ConfigMap name -> the leader epoch on it (0: none), for the group's ConfigMaps."""
        found = self.real.admin.get(f"/api/v1/namespaces/{self.plane.namespace}/configmaps")
        out = {}
        for item in found.get("items") or ():
            meta = item.get("metadata") or {}
            if not str(meta.get("name", "")).startswith("kooper-"):
                continue
            epoch = (meta.get("annotations") or {}).get(LEADER_EPOCH_ANNOTATION, "0")
            out[str(meta["name"])] = int(epoch) if str(epoch).isdigit() else 0
        return out

    # --- the workers ------------------------------------------------------------------

    def worker_log_lines(self, phrases: Sequence[str]) -> int:
        """How many lines of every worker's output so far (old incarnations included)
        hold one of ``phrases``."""
        return sum(1 for path in self.workdir.glob(f"{self.runner.set_name}-*.log")
                   for line in path.read_text(errors="replace").splitlines()
                   if any(phrase in line for phrase in phrases))

    def lease_record(self) -> tuple[str, str]:
        """The leader Lease's holder and renewTime (empty: none)."""
        lease = self._get(f"{leader.LEASES.format(namespace=self.plane.namespace)}/"
                          f"{leader.LEASE_NAME}")
        spec = (lease or {}).get("spec") or {}
        return str(spec.get("holderIdentity") or ""), str(spec.get("renewTime") or "")

    def idle(self, seconds: float) -> None:
        """Let ``seconds`` pass (the API is down: no kubelet work), raising if a replica
        died meanwhile."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            for name, process in self.operators.items():
                if process.poll() is not None:
                    raise pods.DemoError(f"operator {name} exited with {process.returncode}: "
                                         + pods.log_tail(self.log_of(name)))
            time.sleep(min(0.2, max(0.0, deadline - time.monotonic())))

    def incarnation(self, ordinal: int) -> str:
        """The incarnation of ``ordinal``'s current pod."""
        return chaos_real.incarnation_of(self.pod(ordinal).events_file)

    def started(self, incarnation: str) -> set[str]:
        """What ``incarnation`` started so far (its own rows)."""
        return {run.resource for run in self.runs() if run.incarnation == incarnation}

    def whole(self, *, since_ms: int) -> bool:
        """Whether every resource runs exactly once now (the workers' rows)."""
        return chaos_log.settled_at(self.runs(), self.settings.expected, after_ms=since_ms,
                                    until_ms=chaos_real.now_ms()) is not None

    def wait(self, what: str, check: Callable[[], object], timeout_s: float) -> None:
        """Poll ``check`` (the kubelet going on meanwhile) until true, or ``TimeoutError``."""
        deadline = time.monotonic() + timeout_s
        while not check():
            self.supervise()
            if time.monotonic() > deadline:
                raise TimeoutError(f"timed out after {timeout_s:.0f}s waiting for {what} "
                                   f"(logs in {self.workdir})")
            time.sleep(0.1)


# --- control-side chaos (bench_chaos_real.py --control) -------------------------------

WRITES = ("/configmaps/", "/workergroups/")
"""The writes a leader's round makes (ConfigMaps and the WorkerGroup status)."""
CONTROL_FAULTS = ("leader-frozen", "leader-partitioned")
"""Faults on the leading replica, at a drawn point of a round (``inject``, ``POINTS``)."""
MIXED_FAULTS = (*CONTROL_FAULTS, "worker-sigkill", "operator-sigkill", "api-500", "slow-api",
                "frozen-worker")
"""What a control-side run draws from: the control faults and the worker families that
make sense with two replicas (``operator-sigkill`` kills the leader)."""
RESTART_FAULTS = ("api-restart", "etcd-restart")
"""The control plane itself down and back (``restart``): kube-apiserver or etcd SIGKILLed
at a drawn point of a departure round, restarted after a drawn time (``DOWN_S``)."""
RESTARTED = {"api-restart": "kube-apiserver", "etcd-restart": "etcd"}
RESTART_MIXED = (*RESTART_FAULTS, *MIXED_FAULTS)
"""What a restart run (``bench_chaos_real.py --restarts``) draws from after the restarts."""
DOWN_S = (2.0, 8.0, 20.0)
"""How long a restart fault keeps its process down (drawn): shorter than the members'
Lease (5 s); past it (the members fence themselves); past the operator's leader Lease
(15 s) too (no replica can renew: the leader stops leading, a term may change hands)."""
RESTART_POINTS = ("before-round", "first-write", "after-round")
"""Where in the departure round a restart fault strikes (drawn): as soon as the worker
is killed; when the leader sends the round's first ConfigMap PUT (held at the proxy
until the process is down, then forwarded into the dead server); or once the leader
logged the round."""
WORKER_ERRORS = ("lease renewal failed", "assignment watch failed", "relisting",
                 "cannot re-read the assignment")
"""What a worker logs when the API fails it (``kooper.sdk``): counted per restart fault."""
TAKEOVER_S = 90.0
"""Bound of a takeover wait: the leader Lease (15 s) stood still, read every 5 s, then
the new term fences, plans and the workers start."""
POINTS = ("before-round", "first-write-held", "first-write-sent", "after-round")
"""Where in the departure round a control fault strikes (drawn per fault): as soon as
the worker is killed (the leader has not noticed yet); when the leader sends its first
ConfigMap PUT of the round, the proxy holding that write until the takeover (it reaches
the API server only then, stale) or forwarding it at once (its answer waits in the
frozen or cut-off leader's socket); or once the leader logged the round (its writes are
out, its status and memory not yet, or just)."""


def inject(h: Replicas, fault: str, ordinal: int, rng: random.Random) -> chaos_real.Step:
    """Run one fault (``MIXED_FAULTS``) to its end and wait until the group is whole.

    The control faults: a worker is SIGKILLed (a departure round to interrupt) and, at
    a point of that round drawn from ``POINTS``, the leader is frozen (``leader-frozen``,
    SIGSTOP) or cut off from the API at the fault proxy (``leader-partitioned``). It
    stays so until the standby leads under a newer epoch and the group is whole under
    it; then a held write is let go, the leader is thawed or healed, and it must stand
    down. The proxy's record says how many of its writes it sent after the takeover
    and how many landed (``Step.stale_writes``, ``Step.stale_landed``).
    """
    if fault in RESTART_FAULTS:
        return restart(h, fault, ordinal, rng)
    if fault not in CONTROL_FAULTS:
        return chaos_real.inject(h, fault, ordinal)
    h.wait("a leader", h.leader, TAKEOVER_S)
    old = h.leader()
    proxy = h.real.proxy
    epoch = h.status_epoch()
    stand_downs = h.stand_downs(old)
    audited = h.audit_rows()
    point = rng.choice(POINTS)

    frozen = fault == "leader-frozen"

    def strike() -> None:
        if frozen:
            h.signal_operator(old, "sigstop")
        else:
            proxy.partition(old)

    def undo() -> None:
        if frozen:
            h.signal_operator(old, "sigcont")
        else:
            proxy.heal(old)

    trap = None
    if point.startswith("first-write"):
        trap = proxy.trap(old, "PUT", "/configmaps/", on_trap=strike)
    started = chaos_real.now_ms()
    h.kill_worker(ordinal)
    try:
        if point == "before-round":
            strike()
        elif point == "after-round":
            h.wait(f"{old} to log the departure round", lambda: h.audit_rows() > audited,
                   TAKEOVER_S)
            strike()
        else:
            assert trap is not None
            h.wait(f"{old}'s first ConfigMap write of the round", trap.fired.is_set,
                   TAKEOVER_S)
            if point == "first-write-sent":
                trap.release()
        h.wait("the standby to lead under a newer epoch",
               lambda: h.leader() not in ("", old) and h.status_epoch() > epoch, TAKEOVER_S)
        took_over = len(proxy.history())
        h.wait("the group whole under the new leader", lambda: (
            h.joined(ordinal) and h.whole(since_ms=started)), TAKEOVER_S)
        if trap is not None and not trap.released_ms:
            # The held write reaches the API server now, after the new term fenced;
            # answered before the thaw, so the server decides its fate, not timers.
            answered = len(proxy.history())
            trap.release()
            if frozen:
                h.wait("the held write answered",
                       lambda: any(e.trapped for e in proxy.history()[answered:]), TAKEOVER_S)
    finally:
        if trap is not None:
            trap.release()
        undo()
    ended = chaos_real.now_ms()
    h.wait(f"{old} to stand down", lambda: h.stand_downs(old) > stand_downs, TAKEOVER_S)
    converged = h.wait_converged(after_ms=ended)
    stale = [e for e in proxy.history()[took_over:]
             if e.client == old and e.write and e.status and any(w in e.path for w in WRITES)]
    return chaos_real.Step(f"{fault}@{point}", started, ended, converged,
                           stale_writes=len(stale),
                           stale_landed=sum(1 for e in stale if 200 <= e.status < 300))


def restart(h: Replicas, fault: str, ordinal: int, rng: random.Random) -> chaos_real.Step:
    """kube-apiserver (``api-restart``) or etcd (``etcd-restart``) SIGKILLed mid-round,
    down for a drawn time, restarted; then the group must be whole again.

    A worker is SIGKILLed (a departure round for the leader to run) and, at a point
    drawn from ``RESTART_POINTS``, the process goes down for a time drawn from
    ``DOWN_S``: every client of the cluster (both replicas, every worker, through the
    fault proxy) sees its connections refused or dropped (api-restart) or the API
    server's errors and timeouts (etcd-restart); watches break. It is restarted with
    the same ports, flags and data (``kooper.controlplane.cluster.ControlPlane.restart``,
    which returns once it serves), the leader Lease must be written again (a renewal
    or a takeover), then the group must converge. ``Step`` records the pids, the time
    down, what a read of the API as the admin met at the start of the outage (it must
    fail), the leader before and after, and the workers' logged API failures.
    """
    process = RESTARTED[fault]
    h.wait("a leader", h.leader, TAKEOVER_S)
    old = h.leader()
    audited = h.audit_rows()
    errors_before = h.worker_log_lines(WORKER_ERRORS)
    point, down_s = rng.choice(RESTART_POINTS), rng.choice(DOWN_S)
    trap = h.real.proxy.trap(old, "PUT", "/configmaps/") if point == "first-write" else None
    started = chaos_real.now_ms()
    h.kill_worker(ordinal)
    killed, outage = 0, ""
    try:
        if point == "after-round":
            h.wait(f"{old} to log the departure round", lambda: h.audit_rows() > audited,
                   TAKEOVER_S)
        elif trap is not None:
            h.wait(f"{old}'s first ConfigMap write of the round", trap.fired.is_set,
                   TAKEOVER_S)
        started_down = chaos_real.now_ms()
        killed = h.real.kill_control(process)
        if trap is not None:
            trap.release()
        outage = h.real.probe()
        h.idle(down_s - (chaos_real.now_ms() - started_down) / 1000)
    finally:
        if trap is not None:
            trap.release()
        if killed:
            successor = h.real.restart_control(process)
    ended = chaos_real.now_ms()
    record = h.lease_record()
    h.wait("the leader Lease written after the restart",
           lambda: h.lease_record() != record and h.leader() != "", TAKEOVER_S)
    converged = h.wait_converged(after_ms=ended, timeout_s=TAKEOVER_S)
    return chaos_real.Step(f"{fault}@{point}", started, ended, converged, down_s=down_s,
                           pids=(killed, successor), leaders=(old, h.leader()), outage=outage,
                           worker_errors=h.worker_log_lines(WORKER_ERRORS) - errors_before)


def faults_for(seed: int, count: int, pods: int, *, restarts: bool = False
               ) -> list[tuple[str, int]]:
    """``count`` faults of control run ``seed``: the control faults first (one each,
    in a seeded order), then drawn from ``MIXED_FAULTS``; with ``restarts``, the
    restart faults first, then drawn from ``RESTART_MIXED``."""
    rng = random.Random(seed)
    first = list(RESTART_FAULTS if restarts else CONTROL_FAULTS)
    rng.shuffle(first)
    mixed = RESTART_MIXED if restarts else MIXED_FAULTS
    drawn = (first + [rng.choice(mixed) for _ in range(count)])[:count]
    return [(fault, rng.randrange(pods)) for fault in drawn]


class Drawn(random.Random):
    """A ``random.Random`` whose ``choice`` answers ``values`` in order first: a scenario
    with chosen points and times (``Drawn(["before-round", 8.0])``: a restart fault
    before the round, down 8 s)."""

    def __init__(self, values: Sequence[object], seed: int = 0) -> None:
        super().__init__(seed)
        self.values = list(values)

    def choice(self, seq: Sequence[Any]) -> Any:
        return self.values.pop(0) if self.values else super().choice(seq)


def run_scenario(settings: chaos_real.Settings, workdir: pathlib.Path,
                 faults: Sequence[tuple[str, int]], *, cluster: host.Handle, seed: int,
                 progress: Callable[[str], None] = lambda _: None,
                 rng: random.Random | None = None) -> chaos_real.Report:
    """One group with two replicas, the faults in order (each to convergence), then the
    invariants (``chaos_real.check``: the workers' rows). ``rng``: the draws (default:
    ``random.Random(seed)``)."""
    rng = rng if rng is not None else random.Random(seed)
    h = Replicas(settings, workdir, cluster=cluster)
    with h:
        h.wait_converged(after_ms=chaos_real.now_ms(), timeout_s=180)
        h.wait("a leader", h.leader, TAKEOVER_S)
        progress("converged")
        steps = []
        for fault, ordinal in faults:
            step = inject(h, fault, ordinal, rng)
            progress(f"{fault} (pod {ordinal}): whole again {step.converge_s:.1f}s after")
            steps.append(step)
        return chaos_real.check(h, steps)
