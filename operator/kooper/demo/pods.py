"""A tiny pod runner: StatefulSet-named Pod objects in the emulator, one worker process each.

The emulator stores objects but runs no kubelet, so this module plays the
StatefulSet controller and the kubelet at once: it creates ``<set>-<ordinal>``
Pods owned by a StatefulSet object and starts ``kooper worker --demo`` for each
as a separate OS process (the real SDK, talking HTTP to the emulator).

Stopping a pod follows a kubelet's order (``stop_pod``): the Pod gets its
``deletionTimestamp`` first, then the container gets SIGTERM, and the Pod object
disappears only after the container exited (or was SIGKILLed when the grace
period ran out); its Lease, if the worker did not release it itself, goes with
it through the emulator's garbage collector. The emulator has no grace periods
(a DELETE removes an object at once unless a finalizer holds it), so every pod
carries the runner's finalizer ``KUBELET_FINALIZER``: a DELETE then only marks
the Pod terminating, and removing the finalizer is the kubelet's final delete.
``kill_pod`` is the hard path (a crash, or ``kubectl delete --force
--grace-period=0``): SIGKILL, then the object goes at once.

As a kubelet records a container's ``startedAt`` and ``finishedAt``, the runner writes
a ``join`` row into each process's events file before it starts the process and a
``leave`` row once it reaped it (``lifecycle_row``): the log then says when each
process could run anything from what the runner saw of the process, not from what the
operator decided (whose ``leave`` may come while the process still runs).
"""

from __future__ import annotations

import dataclasses
import os
import pathlib
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from typing import IO, Any

from kooper.controlplane import processes
from kooper.core import errors, events
from kooper.emulator import cluster as emulated
from kooper.protocol import codec, messages

WORKER_LABEL = "app.kubernetes.io/name"
"""The label key the demo WorkerGroup selects its pods by."""

KUBELET_FINALIZER = "kooper.dev/emulated-kubelet"
REVISION_LABEL = "controller-revision-hash"
"""Holds a deleted Pod object (terminating) until its worker process exited."""


class DemoError(errors.KooperError):
    """A demo process died or the drill could not go on: one line, then exit 1."""


def acts_on_a_document(lease: Mapping[str, Any] | None) -> bool:
    """Whether the report in a worker's Lease says its process applied a document the
    operator wrote for it (a generation, where a new process reports -1): the operator
    has taken it in. A roll that goes on only then never has two pods out of the
    group at once, however far behind the operator is."""
    annotations = ((lease or {}).get("metadata") or {}).get("annotations") or {}
    text = annotations.get(messages.REPORT_ANNOTATION)
    if not text:
        return False
    try:
        return codec.decode_report(text).generation >= 0
    except errors.KooperError:
        return False


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


@dataclasses.dataclass(frozen=True, slots=True)
class Stopped:
    """How a pod's worker ended: its exit code, and whether it exited within the grace period."""

    name: str
    returncode: int
    graceful: bool


def killed(pod: Pod) -> Stopped:
    """SIGKILL ``pod``'s worker (if it still runs) and reap it: it can do nothing more."""
    if pod.process.poll() is None:
        pod.process.kill()
    pod.process.wait()
    pod.log.close()
    lifecycle_row(pod.events_file, pod.name, events.Kind.LEAVE)
    return Stopped(name=pod.name, returncode=int(pod.process.returncode), graceful=False)


def lifecycle_row(path: pathlib.Path, member: str, kind: events.Kind) -> None:
    """Append the runner's ``join`` (the process is about to start) or ``leave`` (it was
    reaped) row for ``member`` to that process's events file, stamped on the clock the
    workers stamp their rows with."""
    row = events.Event(ts_ms=int(time.time() * 1000), run="", group="", member=member,
                       resource="", event=kind)
    with path.open("a", encoding="utf-8") as out:
        out.write(row.to_json() + "\n")


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
        worker_args_for: Callable[[int], Sequence[str]] | None = None,
        worker_env: Mapping[str, str] | None = None,
        command: tuple[str, ...] | None = None,
        grace_s: float = 10.0,
    ) -> None:
        """Prepare a runner; ``command`` replaces ``python -m kooper.cli worker`` (tests).

        ``worker_args_for(ordinal)``, when given, replaces ``worker_args`` per pod
        (e.g. a health port each, as every pod of a real cluster has its own IP).
        """
        self.cluster = cluster
        self.workdir = workdir
        self.set_name = set_name
        self.app_label = app_label
        self.namespace = namespace
        self.replicas = replicas
        self.worker_args = worker_args
        self.worker_args_for = worker_args_for
        self.worker_env = dict(worker_env or {})
        self.command = command or (sys.executable, "-m", "kooper.cli", "worker")
        self.grace_s = grace_s
        self.pods: dict[str, Pod] = {}
        self._generation = 0
        self._set_uid = ""
        self._revisions = 1
        self._revision = f"{set_name}-{self._revisions}"

    # -- naming ------------------------------------------------------------------------

    def pod_name(self, ordinal: int) -> str:
        """StatefulSet naming: ``<set>-<ordinal>``."""
        return f"{self.set_name}-{ordinal}"

    def names(self) -> list[str]:
        """Every pod name of the set, ordinal order."""
        return [self.pod_name(i) for i in range(self.replicas)]

    # -- the StatefulSet -----------------------------------------------------------------

    def create_statefulset(self, body: Mapping[str, Any] | None = None) -> None:
        """Create the StatefulSet object the pods are owned by (the operator reads replicas).

        ``body`` (e.g. a manifest from examples/) replaces the minimal one; its
        name and replicas must be the runner's.
        """
        if body is None:
            body = {
                "metadata": {"name": self.set_name, "labels": {WORKER_LABEL: self.app_label}},
                "spec": {"replicas": self.replicas, "serviceName": self.set_name,
                         "selector": {"matchLabels": {WORKER_LABEL: self.app_label}},
                         "template": {"metadata": {"labels": {WORKER_LABEL: self.app_label}}}},
            }
        elif (body["metadata"]["name"], body["spec"]["replicas"]) != (self.set_name,
                                                                      self.replicas):
            raise DemoError(f"StatefulSet {body['metadata']['name']} x{body['spec']['replicas']}"
                            f" is not the runner's {self.set_name} x{self.replicas}")
        created = self.cluster.create("statefulsets", body, namespace=self.namespace)
        self._set_uid = str(created["metadata"]["uid"])
        self._set_revision(current=self._revision)

    def _set_revision(self, *, current: str) -> None:
        """The StatefulSet controller's revisions: pods labelled ``controller-revision-hash``
        with another revision than ``status.updateRevision`` are due to be replaced (the
        operator prefers updated members while a roll runs, ``control.rollout``)."""
        self.cluster.patch("statefulsets", self.set_name,
                           {"status": {"updateRevision": self._revision,
                                       "currentRevision": current,
                                       "replicas": self.replicas}},
                           namespace=self.namespace, subresource="status")

    # -- one pod -------------------------------------------------------------------------

    def start_pod(self, ordinal: int) -> Pod:
        """Create the Pod object, then start its worker process."""
        name = self.pod_name(ordinal)
        body: dict[str, Any] = {
            "metadata": {
                "name": name,
                "labels": {WORKER_LABEL: self.app_label,
                           "statefulset.kubernetes.io/pod-name": name,
                           REVISION_LABEL: self._revision},
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "StatefulSet",
                                     "name": self.set_name, "uid": self._set_uid,
                                     "controller": True, "blockOwnerDeletion": True}],
                "finalizers": [KUBELET_FINALIZER],
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
        args = self.worker_args if self.worker_args_for is None else self.worker_args_for(ordinal)
        argv = [*self.command, *args, "--events-file", str(events_file)]
        lifecycle_row(events_file, name, events.Kind.JOIN)
        process = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT)
        pod = Pod(name=name, uid=uid, process=process, events_file=events_file, log=log,
                  started_at=time.monotonic())
        self.pods[name] = pod
        return pod

    def stop_pod(self, ordinal: int) -> Stopped | None:
        """Delete the pod as a kubelet does: mark it, SIGTERM, wait for exit, then remove it.

        1. DELETE the Pod: it stays, terminating (``deletionTimestamp`` set);
        2. SIGTERM the worker and wait up to ``grace_s`` for it to exit (it stops
           its work, reports owning nothing and deletes its own Lease), SIGKILL
           after that;
        3. only then drop the runner's finalizer: the Pod object goes, and the
           garbage collector takes its Lease if the worker left one behind.

        Returns how the worker ended (None if the runner had no process for it).
        """
        name = self.pod_name(ordinal)
        self.cluster.delete("pods", name, namespace=self.namespace)
        pod = self.pods.pop(name, None)
        stopped = None
        if pod is not None:
            graceful = processes.terminate(pod.process, self.grace_s)
            pod.log.close()
            lifecycle_row(pod.events_file, name, events.Kind.LEAVE)
            stopped = Stopped(name=name, returncode=int(pod.process.returncode), graceful=graceful)
        self._release(name)
        return stopped

    def kill_pod(self, ordinal: int) -> Stopped | None:
        """The hard path (a crash, or a forced delete): SIGKILL the worker, remove the Pod now.

        The worker gets no chance to stop anything or release its Lease; the Lease
        goes with the Pod object (garbage collection), as in Kubernetes. The
        process is reaped before the object goes, so it cannot recreate its Lease.
        """
        name = self.pod_name(ordinal)
        pod = self.pods.pop(name, None)
        stopped = None if pod is None else killed(pod)
        self._release(name)
        self.cluster.delete("pods", name, namespace=self.namespace)
        return stopped

    def _release(self, name: str) -> None:
        """The kubelet's final delete: drop our finalizer, so a terminating Pod goes."""
        body = self.cluster.get("pods", name, namespace=self.namespace)
        if body is None:
            return
        finalizers = list(body["metadata"].get("finalizers") or [])
        if KUBELET_FINALIZER in finalizers:
            finalizers.remove(KUBELET_FINALIZER)
            self.cluster.patch("pods", name, {"metadata": {"finalizers": finalizers}},
                               namespace=self.namespace)

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
        """Restart every pod, highest ordinal first, each after the previous one rejoined.

        As ``kubectl rollout restart`` does, the roll is a new revision of the pod
        template: the StatefulSet's ``updateRevision`` moves first, and each pod comes
        back labelled with it.
        """
        previous = self._revision
        self._revisions += 1
        self._revision = f"{self.set_name}-{self._revisions}"
        self._set_revision(current=previous)
        for ordinal in reversed(range(self.replicas)):
            progress(f"restarting {self.pod_name(ordinal)}")
            pod = self.restart_pod(ordinal, restart_s=restart_s)
            deadline = time.monotonic() + join_timeout_s
            while not joined(pod):
                self.check_alive()
                if time.monotonic() > deadline:
                    raise TimeoutError(f"{pod.name} did not rejoin in {join_timeout_s}s")
                time.sleep(0.1)
        self._set_revision(current=self._revision)

    def lease_of(self, pod: Pod) -> dict[str, Any] | None:
        """The worker's Lease ``kooper-<pod>`` if it exists."""
        return self.cluster.get("leases", f"kooper-{pod.name}", namespace=self.namespace)

    def joined_lease(self, pod: Pod) -> dict[str, Any] | None:
        """The pod's Lease if its worker is alive and reported in it (its JoinGroup), else None.

        The Lease must belong to this incarnation of the pod (its owner's uid): a
        Lease left by an earlier incarnation of the name must never count.
        """
        if pod.process.poll() is not None:
            return None
        lease = self.lease_of(pod)
        if lease is None:
            return None
        metadata = lease.get("metadata", {})
        owners = {ref.get("uid") for ref in metadata.get("ownerReferences", [])}
        if owners and pod.uid not in owners:
            return None
        return lease if messages.REPORT_ANNOTATION in (metadata.get("annotations") or {}) else None

    def has_joined(self, pod: Pod) -> bool:
        """Whether this incarnation's worker reported in its Lease (``joined_lease``)."""
        return self.joined_lease(pod) is not None

    def has_assignment(self, pod: Pod) -> bool:
        """Whether this incarnation joined and applied a document the operator wrote
        for it (``acts_on_a_document``): where the demo's roll goes on."""
        return acts_on_a_document(self.joined_lease(pod))

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
            processes.terminate(pod.process, self.grace_s)
            pod.log.close()
        self.pods.clear()

