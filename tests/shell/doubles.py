"""A test double for worker pods: speaks the codec through the emulator's store.

Each ``FakeMember`` owns a Pod and its Lease. A driver thread renews Leases and
applies assignments: a member reads its ConfigMap, runs exactly ``assigned``
(stops everything else) and reports the generation it applied. Members can be
frozen (stop applying and renewing), made eager-only, or made to lie.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import threading
import time
import uuid
from typing import Any

from kooper.core import model
from kooper.protocol import codec, messages

LEASES = "coordination.k8s.io/v1/leases"


def now_micro() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclasses.dataclass
class FakeMember:
    name: str
    protocols: frozenset[model.Protocol] = frozenset({model.Protocol.EAGER,
                                                      model.Protocol.COMPATIBLE})
    incarnation: str = dataclasses.field(default_factory=lambda: uuid.uuid4().hex[:8])
    owned: model.ConnectorsAndTasks = model.EMPTY
    generation: int = -1
    frozen: bool = False
    applying: bool = True
    extra_claims: model.ConnectorsAndTasks = model.EMPTY
    history: list[messages.Assignment] = dataclasses.field(default_factory=list)
    failing: dict[str, str] = dataclasses.field(default_factory=dict)
    """Resources whose start fails here, with the error (a start is tried once per
    generation that assigns them, as the SDK does)."""
    assigned: model.ConnectorsAndTasks = model.EMPTY
    failed: dict[str, str] = dataclasses.field(default_factory=dict)
    failure_counts: dict[str, int] = dataclasses.field(default_factory=dict)

    def apply(self, doc: messages.Assignment) -> None:
        self.history.append(doc)
        self.assigned = doc.assigned
        broken = {r for r in self.failing
                  if r in doc.assigned.connectors or r in doc.assigned.tasks}
        self.owned = doc.assigned.difference(model.ConnectorsAndTasks(
            frozenset(broken), frozenset(broken)))
        self.failed = {r: self.failing[r] for r in broken}
        for resource in broken:
            self.failure_counts[resource] = self.failure_counts.get(resource, 0) + 1
        self.generation = doc.generation

    def report_text(self) -> str:
        return codec.encode_report(messages.Report(
            member=self.name, incarnation=self.incarnation, protocols=self.protocols,
            generation=self.generation, owned=self.owned.union(self.extra_claims),
            failed=dict(self.failed),
            failure_counts={r: self.failure_counts[r] for r in self.failed},
        ))


class Fleet:
    """Pods + Leases + a driver thread that plays the workers."""

    def __init__(self, cluster: Any, *, namespace: str = "default", labels: dict[str, str],
                 lease_seconds: int = 5, owner: tuple[str, str, str] | None = None) -> None:
        self.cluster = cluster
        self.namespace = namespace
        self.labels = labels
        self.lease_seconds = lease_seconds
        self.owner = owner  # (kind, name, uid) of the pods' controller
        self.members: dict[str, FakeMember] = {}
        self.lock = threading.RLock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._drive, daemon=True, name="fleet")
        self.interval = 0.05
        self.violations: list[str] = []

    # --- lifecycle ---------------------------------------------------------------

    def __enter__(self) -> Fleet:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)

    def add(self, name: str, **kwargs: Any) -> FakeMember:
        member = FakeMember(name, **kwargs)
        meta: dict[str, Any] = {"name": name, "labels": dict(self.labels)}
        if self.owner:
            kind, owner_name, uid = self.owner
            meta["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": kind,
                                        "name": owner_name, "uid": uid, "controller": True}]
        pod = self.cluster.create("pods", {"metadata": meta, "spec": {}},
                                  namespace=self.namespace)
        self._create_lease(member, pod["metadata"]["uid"])
        with self.lock:
            self.members[name] = member
        return member

    def _create_lease(self, member: FakeMember, pod_uid: str) -> None:
        self.cluster.create(LEASES, {
            "metadata": {
                "name": f"kooper-{member.name}",
                "labels": {"kooper.dev/member": member.name},
                "annotations": {messages.REPORT_ANNOTATION: member.report_text()},
                "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": member.name,
                                     "uid": pod_uid}],
            },
            "spec": {"holderIdentity": f"{member.name}/{member.incarnation}",
                     "leaseDurationSeconds": self.lease_seconds, "renewTime": now_micro()},
        }, namespace=self.namespace)

    def kill(self, name: str) -> None:
        """The pod is deleted (its Lease goes with it)."""
        with self.lock:
            self.members.pop(name, None)
        self.cluster.delete("pods", name, namespace=self.namespace)
        self.cluster.delete(LEASES, f"kooper-{name}", namespace=self.namespace)

    def restart(self, name: str, **kwargs: Any) -> FakeMember:
        """Same pod name, new pod and new process (a StatefulSet restart)."""
        self.kill(name)
        return self.add(name, **kwargs)

    def freeze(self, name: str) -> None:
        """The process hangs: no renewals, no reports."""
        with self.lock:
            self.members[name].frozen = True

    # --- the driver ------------------------------------------------------------------

    def _drive(self) -> None:
        last_renew = 0.0
        while not self._stop.is_set():
            renew = time.monotonic() - last_renew > 1.0
            if renew:
                last_renew = time.monotonic()
            with self.lock:
                members = list(self.members.values())
            for member in members:
                # The emulator may be busy with a fault: try again next tick.
                with contextlib.suppress(Exception):
                    self._step(member, renew=renew)
            self._check_overlaps(members)
            self._stop.wait(self.interval)

    def _step(self, member: FakeMember, *, renew: bool) -> None:
        if member.frozen:
            return
        changed = False
        if member.applying:
            cm = self.cluster.get("configmaps", f"kooper-{member.name}",
                                  namespace=self.namespace)
            text = (cm or {}).get("data", {}).get(messages.CONFIGMAP_KEY)
            if text:
                doc = codec.decode_assignment(text)
                if doc.generation != member.generation or doc.assigned != member.assigned:
                    member.apply(doc)
                    changed = True
        if changed or renew:
            patch: dict[str, Any] = {"spec": {"renewTime": now_micro()}}
            if changed:
                patch["metadata"] = {"annotations": {
                    messages.REPORT_ANNOTATION: member.report_text()}}
            self.cluster.patch(LEASES, f"kooper-{member.name}", patch,
                               namespace=self.namespace)

    def _check_overlaps(self, members: list[FakeMember]) -> None:
        seen: dict[str, str] = {}
        for member in members:
            if member.frozen:
                continue
            for resource in (*member.owned.connectors, *member.owned.tasks):
                other = seen.setdefault(resource, member.name)
                if other != member.name:
                    self.violations.append(f"{resource} run by {other} and {member.name}")

    def push_report(self, name: str) -> None:
        with self.lock:
            member = self.members[name]
        self.cluster.patch(LEASES, f"kooper-{name}", {"metadata": {"annotations": {
            messages.REPORT_ANNOTATION: member.report_text()}}}, namespace=self.namespace)

    def set_annotation(self, name: str, text: str) -> None:
        self.cluster.patch(LEASES, f"kooper-{name}", {"metadata": {"annotations": {
            messages.REPORT_ANNOTATION: text}}}, namespace=self.namespace)

    # --- views for assertions ------------------------------------------------------------

    def owned(self) -> dict[str, model.ConnectorsAndTasks]:
        with self.lock:
            return {name: m.owned for name, m in self.members.items()}
