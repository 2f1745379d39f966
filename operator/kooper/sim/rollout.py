"""Rollouts on the simulator: a StatefulSet's and a Deployment's rolling update.

The two controllers decide, as Kubernetes' do, which pod to replace next; the
runner (``sim.runner``) carries out what they ask (terminate a pod, create one) on
its virtual clock and tells them what happened (a pod became Ready, a pod object
was removed). The step sees what the operator reads from the API: each pod's
revision label and owner, and each owner's update revision (``Inputs.rollouts``,
``control.rollout``).

* **StatefulSet** (``RollingUpdate``): pods keep their names (``<group>-<ordinal>``)
  and their ``controller-revision-hash``; from the highest ordinal down to the
  ``partition``, the controller terminates pods behind ``status.updateRevision``
  while fewer than ``max_unavailable`` pods are unavailable (not Ready, terminating
  or missing), and re-creates each one under its name on the update revision once
  the old pod object is gone. ``max_unavailable`` 1 is the default
  ``OrderedReady`` behaviour: one pod at a time, waiting for it to be Ready.
* **Deployment**: the new ReplicaSet's pods get new names (``<group>-<revision>-<n>``:
  returning identity never applies). The controller creates new pods while all
  pods number fewer than ``replicas + max_surge``, and terminates old ones while
  that keeps ``replicas - max_unavailable`` pods available (Ready), counting the
  new pods that are not Ready yet against it, as the deployment controller does.

``terminationGracePeriodSeconds`` (``grace_ms``): a terminated pod's worker stops
what it runs (the stop latency) and leaves (deletes its Lease); if stopping takes
longer than the grace period, the kubelet kills it at the grace period and its
Lease goes with the pod.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping

from kooper.control.inputs import Owner, RolloutFacts
from kooper.core import ids

OLD = "r1"
NEW = "r2"


@dataclasses.dataclass(frozen=True, slots=True)
class StatefulSetRoll:
    """A StatefulSet ``RollingUpdate``."""

    max_unavailable: int = 1
    partition: int = 0
    """Ordinals below it keep their revision."""
    grace_ms: int = 30_000
    """``terminationGracePeriodSeconds``."""


@dataclasses.dataclass(frozen=True, slots=True)
class DeploymentRoll:
    """A Deployment ``RollingUpdate`` (absolute numbers, not percentages)."""

    max_surge: int = 1
    max_unavailable: int = 0
    grace_ms: int = 30_000
    """``terminationGracePeriodSeconds``."""


Spec = StatefulSetRoll | DeploymentRoll


@dataclasses.dataclass(frozen=True, slots=True)
class PodFacts:
    """What the API shows of a pod besides its member: its owner and revision label."""

    owner_kind: str
    owner_name: str
    labels: Mapping[str, str]


@dataclasses.dataclass(slots=True)
class _Pod:
    name: ids.WorkerId
    revision: str
    ready: bool = False
    terminating: bool = False


class Actions:
    """What a controller asks of the runner (callbacks)."""

    def __init__(self, *, terminate: Callable[[ids.WorkerId, int], None],
                 create: Callable[[ids.WorkerId, int], None]) -> None:
        self.terminate = terminate
        """Terminate the pod gracefully, with this grace period (ms)."""
        self.create = create
        """Create a pod with this name, numbered (the ordinal, or a counter)."""


class Controller:
    """A workload's rolling update; ``start`` begins it, events drive it."""

    def __init__(self, spec: Spec, *, group: str, replicas: int, actions: Actions) -> None:
        self.spec = spec
        self.group = group
        self.replicas = replicas
        self.actions = actions
        self.started = False
        self.pods: dict[ids.WorkerId, _Pod] = {}
        self.created = 0
        self._facts: dict[Owner, RolloutFacts] = {}
        self._facts = self._compute_facts()

    # -- what the API shows ------------------------------------------------------------

    @property
    def statefulset(self) -> bool:
        """Whether this is a StatefulSet (else a Deployment)."""
        return isinstance(self.spec, StatefulSetRoll)

    def initial_name(self, ordinal: int) -> ids.WorkerId:
        """The name of the ``ordinal``-th pod before the roll."""
        if self.statefulset:
            return ids.WorkerId(f"{self.group}-{ordinal}")
        return ids.WorkerId(f"{self.group}-{OLD}-{ordinal}")

    def pod_facts(self, name: ids.WorkerId) -> PodFacts:
        """Owner and labels of pod ``name`` (as created: its revision never changes)."""
        revision = self.pods[name].revision if name in self.pods else OLD
        if self.statefulset:
            return PodFacts("StatefulSet", self.group,
                            {"controller-revision-hash": f"{self.group}-{revision}"})
        return PodFacts("ReplicaSet", f"{self.group}-{revision}",
                        {"pod-template-hash": revision})

    def facts(self) -> Mapping[Owner, RolloutFacts]:
        """The owners' update revisions (``Inputs.rollouts``): the same object until it changes."""
        return self._facts

    def _compute_facts(self) -> dict[Owner, RolloutFacts]:
        target = NEW if self.started else OLD
        if isinstance(self.spec, StatefulSetRoll):
            return {("StatefulSet", self.group): RolloutFacts(
                f"{self.group}-{target}", partition=self.spec.partition)}
        return {("ReplicaSet", f"{self.group}-{revision}"): RolloutFacts(target)
                for revision in (OLD, NEW)}

    def replicas_of(self, owner: Owner) -> int | None:
        """``spec.replicas`` of a StatefulSet owner (for departure judging)."""
        return self.replicas if owner == ("StatefulSet", self.group) else None

    # -- events ------------------------------------------------------------------------------

    def add(self, name: ids.WorkerId, *, revision: str = OLD) -> None:
        """A pod exists (created by the runner before the roll, or on our request)."""
        self.pods[name] = _Pod(name, revision)

    def start(self) -> None:
        """The workload's template changed: roll."""
        self.started = True
        self._facts = self._compute_facts()
        self.tick()

    def ready(self, name: ids.WorkerId) -> None:
        """Pod ``name`` became Ready."""
        pod = self.pods.get(name)
        if pod is not None and not pod.terminating:
            pod.ready = True
            self.tick()

    def gone(self, name: ids.WorkerId) -> None:
        """Pod ``name``'s object was removed."""
        pod = self.pods.pop(name, None)
        if pod is None:
            return
        if isinstance(self.spec, StatefulSetRoll) and self.started:
            self.pods[name] = _Pod(name, NEW)  # re-created under its name, updated
            self.actions.create(name, int(name.rsplit("-", 1)[1]))
        self.tick()

    @property
    def done(self) -> bool:
        """Whether every pod the roll should update runs the update revision, Ready."""
        return self.started and all(
            p.revision == NEW and p.ready for p in self.pods.values()
            if not self._below_partition(p.name))

    # -- the controllers --------------------------------------------------------------------

    def tick(self) -> None:
        """Do whatever the controller may do now."""
        if not self.started:
            return
        if isinstance(self.spec, StatefulSetRoll):
            self._statefulset(self.spec)
        else:
            self._deployment(self.spec)

    def _below_partition(self, name: ids.WorkerId) -> bool:
        if not isinstance(self.spec, StatefulSetRoll):
            return False
        return int(name.rsplit("-", 1)[1]) < self.spec.partition

    def _statefulset(self, spec: StatefulSetRoll) -> None:
        unavailable = self.replicas - sum(
            1 for p in self.pods.values() if p.ready and not p.terminating)
        behind = sorted((p for p in self.pods.values()
                         if p.revision != NEW and not p.terminating
                         and not self._below_partition(p.name)),
                        key=lambda p: -int(p.name.rsplit("-", 1)[1]))
        for pod in behind:
            if unavailable >= spec.max_unavailable:
                break
            if not pod.ready:
                continue
            pod.terminating = True
            pod.ready = False
            unavailable += 1
            self.actions.terminate(pod.name, spec.grace_ms)

    def _deployment(self, spec: DeploymentRoll) -> None:
        new = [p for p in self.pods.values() if p.revision == NEW and not p.terminating]
        old = [p for p in self.pods.values() if p.revision != NEW and not p.terminating]
        total = len(new) + len(old)
        for _ in range(min(self.replicas - len(new), self.replicas + spec.max_surge - total)):
            name = ids.WorkerId(f"{self.group}-{NEW}-{self.created}")
            self.pods[name] = _Pod(name, NEW)
            self.actions.create(name, self.replicas + self.created)
            self.created += 1
            new.append(self.pods[name])
            total += 1
        unready_new = sum(1 for p in new if not p.ready)
        room = total - (self.replicas - spec.max_unavailable) - unready_new
        # Unready old pods go first (they serve nothing, so removing them costs no
        # availability), then the highest numbered.
        for pod in sorted(old, key=lambda p: (p.ready, -int(p.name.rsplit("-", 1)[1]))):
            if pod.ready:
                if room <= 0:
                    break
                room -= 1
            pod.terminating = True
            pod.ready = False
            self.actions.terminate(pod.name, spec.grace_ms)
