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
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from typing import IO, Any

from e2e import chaos_log, chaos_real, realplane
from kooper.controlplane import host
from kooper.demo import pods
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
        text = self.log_of(name).read_text(errors="replace")
        return any(phrase in text for phrase in STOOD_DOWN)

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
