"""A tiny pod runner: StatefulSet-named Pod objects in the emulator, one worker process each.

The emulator stores objects but runs no kubelet, so this module plays the
StatefulSet controller and the kubelet at once: it creates ``<set>-<ordinal>``
Pods owned by a StatefulSet object, starts ``kooper worker --demo`` for each as
a separate OS process (the real SDK, talking HTTP to the emulator), and on a
restart deletes the Pod object first (so the emulator's garbage collector
removes the worker's Lease, as Kubernetes would), then SIGTERMs the process.
"""

from __future__ import annotations

import dataclasses
import os
import pathlib
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from typing import IO, Any

from kooper.core import errors
from kooper.protocol import messages
from kooper.testing import cluster as emulated

WORKER_LABEL = "app.kubernetes.io/name"
"""The label key the demo WorkerGroup selects its pods by."""


class DemoError(errors.KooperError):
    """A demo process died or the drill could not go on: one line, then exit 2."""


def log_tail(path: pathlib.Path, lines: int = 3) -> str:
    """The last lines of a process log, for an error message that points at it."""
    text = path.read_text(errors="replace").strip().splitlines() if path.exists() else []
    return " | ".join(text[-lines:]) + f" (log: {path})"


@dataclasses.dataclass(slots=True)
class Pod:
    """One running pod: its object's uid and its worker process."""

    name: str
    uid: str
    process: subprocess.Popen[bytes]
    events_file: pathlib.Path
    log: IO[bytes]
    started_at: float


def package_root() -> str:
    """The source root that holds ``kooper`` (for child processes' ``PYTHONPATH``)."""
    return str(pathlib.Path(__file__).resolve().parents[2])


def child_env(api_url: str, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of a child process: ours plus the API URL and the package path."""
    env = dict(os.environ)
    env["KOOPER_KUBE_API"] = api_url
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root(), env.get("PYTHONPATH"))
                                        if p)
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra or {})
    return env


class PodRunner:
    """Creates, restarts and deletes the pods of one StatefulSet in an emulated cluster."""

    def __init__(
        self,
        cluster: emulated.EmulatedCluster,
        *,
        workdir: pathlib.Path,
        set_name: str = "workers",
        app_label: str = "kooper-demo-worker",
        namespace: str = "default",
        replicas: int = 6,
        worker_args: tuple[str, ...] = ("--demo",),
        worker_env: Mapping[str, str] | None = None,
        command: tuple[str, ...] | None = None,
        grace_s: float = 10.0,
    ) -> None:
        """Prepare a runner; ``command`` replaces ``python -m kooper.cli worker`` (tests)."""
        self.cluster = cluster
        self.workdir = workdir
        self.set_name = set_name
        self.app_label = app_label
        self.namespace = namespace
        self.replicas = replicas
        self.worker_args = worker_args
        self.worker_env = dict(worker_env or {})
        self.command = command or (sys.executable, "-m", "kooper.cli", "worker")
        self.grace_s = grace_s
        self.pods: dict[str, Pod] = {}
        self._generation = 0
        self._set_uid = ""

    # -- naming ------------------------------------------------------------------------

    def pod_name(self, ordinal: int) -> str:
        """StatefulSet naming: ``<set>-<ordinal>``."""
        return f"{self.set_name}-{ordinal}"

    def names(self) -> list[str]:
        """Every pod name of the set, ordinal order."""
        return [self.pod_name(i) for i in range(self.replicas)]

    # -- the StatefulSet -----------------------------------------------------------------

    def create_statefulset(self) -> None:
        """Create the StatefulSet object the pods are owned by (the operator reads replicas)."""
        body = {
            "metadata": {"name": self.set_name, "labels": {WORKER_LABEL: self.app_label}},
            "spec": {"replicas": self.replicas, "serviceName": self.set_name,
                     "selector": {"matchLabels": {WORKER_LABEL: self.app_label}},
                     "template": {"metadata": {"labels": {WORKER_LABEL: self.app_label}}}},
        }
        created = self.cluster.create("statefulsets", body, namespace=self.namespace)
        self._set_uid = str(created["metadata"]["uid"])

    # -- one pod -------------------------------------------------------------------------

    def start_pod(self, ordinal: int) -> Pod:
        """Create the Pod object, then start its worker process."""
        name = self.pod_name(ordinal)
        body: dict[str, Any] = {
            "metadata": {
                "name": name,
                "labels": {WORKER_LABEL: self.app_label,
                           "statefulset.kubernetes.io/pod-name": name},
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "StatefulSet",
                                     "name": self.set_name, "uid": self._set_uid,
                                     "controller": True, "blockOwnerDeletion": True}],
            },
            "spec": {"containers": [{"name": "worker", "image": "kooper-worker"}]},
            "status": {"phase": "Running"},
        }
        created = self.cluster.create("pods", body, namespace=self.namespace)
        uid = str(created["metadata"]["uid"])
        self._generation += 1
        stem = f"{name}.{self._generation}"
        events_file = self.workdir / f"{stem}.events.jsonl"
        log = (self.workdir / f"{stem}.log").open("wb")
        env = child_env(self.cluster.url, {"POD_NAME": name, "POD_NAMESPACE": self.namespace,
                                           "POD_UID": uid, **self.worker_env})
        argv = [*self.command, *self.worker_args, "--events-file", str(events_file)]
        process = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT)
        pod = Pod(name=name, uid=uid, process=process, events_file=events_file, log=log,
                  started_at=time.monotonic())
        self.pods[name] = pod
        return pod

    def stop_pod(self, ordinal: int) -> None:
        """Delete the Pod object (its Lease goes with it), then SIGTERM and reap the worker."""
        name = self.pod_name(ordinal)
        self.cluster.delete("pods", name, namespace=self.namespace)
        pod = self.pods.pop(name, None)
        if pod is not None:
            _terminate(pod.process, self.grace_s)
            pod.log.close()

    def restart_pod(self, ordinal: int, *, restart_s: float) -> Pod:
        """Stop a pod, wait ``restart_s`` (image pull, scheduling...), start it again."""
        self.stop_pod(ordinal)
        time.sleep(restart_s)
        return self.start_pod(ordinal)

    # -- the whole set -------------------------------------------------------------------

    def start_all(self) -> None:
        """Create the StatefulSet and every pod (``podManagementPolicy: Parallel``)."""
        self.create_statefulset()
        for ordinal in range(self.replicas):
            self.start_pod(ordinal)

    def rolling_restart(
        self,
        *,
        restart_s: float,
        joined: Callable[[Pod], bool],
        join_timeout_s: float = 30.0,
        progress: Callable[[str], None] = lambda _: None,
    ) -> None:
        """Restart every pod, highest ordinal first, each after the previous one rejoined."""
        for ordinal in reversed(range(self.replicas)):
            progress(f"restarting {self.pod_name(ordinal)}")
            pod = self.restart_pod(ordinal, restart_s=restart_s)
            deadline = time.monotonic() + join_timeout_s
            while not joined(pod):
                self.check_alive()
                if time.monotonic() > deadline:
                    raise TimeoutError(f"{pod.name} did not rejoin in {join_timeout_s}s")
                time.sleep(0.1)

    def lease_of(self, pod: Pod) -> dict[str, Any] | None:
        """The worker's Lease ``kooper-<pod>`` if it exists."""
        return self.cluster.get("leases", f"kooper-{pod.name}", namespace=self.namespace)

    def has_joined(self, pod: Pod) -> bool:
        """Whether the pod's worker is alive and reported in its Lease (its JoinGroup).

        The Lease must belong to this incarnation of the pod (its owner's uid):
        the previous incarnation's Lease may not be garbage-collected yet.
        """
        if pod.process.poll() is not None:
            return False
        lease = self.lease_of(pod)
        if lease is None:
            return False
        metadata = lease.get("metadata", {})
        owners = {ref.get("uid") for ref in metadata.get("ownerReferences", [])}
        if owners and pod.uid not in owners:
            return False
        return messages.REPORT_ANNOTATION in (metadata.get("annotations") or {})

    def check_alive(self) -> None:
        """Raise if a worker process exited on its own (with the tail of its log)."""
        for pod in self.pods.values():
            if pod.process.poll() is not None:
                pod.log.flush()
                raise DemoError(f"worker {pod.name} exited with {pod.process.returncode}: "
                                + log_tail(pathlib.Path(pod.log.name)))

    def events_files(self) -> list[pathlib.Path]:
        """Every worker events file written so far (old incarnations included)."""
        return sorted(self.workdir.glob("*.events.jsonl"))

    def shutdown(self) -> None:
        """Stop every worker process (Pod objects are left; the cluster goes away anyway)."""
        for pod in list(self.pods.values()):
            _terminate(pod.process, self.grace_s)
            pod.log.close()
        self.pods.clear()


def _terminate(process: subprocess.Popen[bytes], grace_s: float) -> None:
    if process.poll() is not None:
        return
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(grace_s)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
