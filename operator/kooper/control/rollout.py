"""Rollouts: which members are about to be replaced, and which are already updated.

Kubernetes tells the operator what Kafka never knows. A StatefulSet rolls its pods
to ``status.updateRevision``; each pod says which revision it runs in its
``controller-revision-hash`` label, and pods whose ordinal is below the rolling
update's ``partition`` are left alone. A Deployment rolls to its newest ReplicaSet,
whose pods carry that ReplicaSet's ``pod-template-hash`` label. A pod with a
``deletionTimestamp`` is leaving whatever its revision.

So, per live member:

* **outdated**: its pod is terminating, or it runs another revision than its owner
  rolls to (and, for a StatefulSet, its ordinal is at or above the partition; the
  ``OnDelete`` strategy replaces nothing by itself). It is about to be replaced:
  work given to it now moves again soon.
* **updated**: its pod runs its owner's update revision and is not terminating.
  Work given to it now stays.

A rollout is in progress while some member is outdated, or while some pod is not on
its owner's update revision (or terminating) and a pod without a live member is
terminating (its member already left) or on the update revision with a worker that
has not joined yet: a StatefulSet re-creates each pod under its name, so from the
old member's leave to the new one's join nobody may be outdated. (A group whose
pods all run the update revision is not rolling while a new pod starts: a scale-up
balances as usual.) While it is, the ``kooper`` policy
(``core.assignor``) hands free work (a planned departure's, lost work that is
released, new work) to updated members first, never to an outdated member while
a member that is not outdated can take it, and defers balancing revocations until
the rollout is done: each departure of the roll fills the members that came back
(the most recent one is the emptiest), so a resource moves once, plus the few
moves the shape forces (a StatefulSet's first pod has no updated peer yet; its
last pod comes back empty and takes its share once the roll is over).

The shell reads the owners named by ``owners_to_read`` into ``Inputs.rollouts``;
the simulator (``sim.rollout``) writes the same facts. Pure: no I/O here.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Iterable, Mapping

from kooper.control import liveness, views
from kooper.control.inputs import Inputs, Owner, RolloutFacts
from kooper.core import ids

REVISION_LABELS = ("controller-revision-hash", "pod-template-hash")
"""Where a pod names its revision: a StatefulSet's pods, then a ReplicaSet's."""
ROLLING_OWNER_KINDS = ("StatefulSet", "ReplicaSet")
"""Pod owners whose update revision the shell reads."""


def revision(pod: views.PodView) -> str:
    """The revision a pod runs (empty when its labels do not say)."""
    labels = pod.labels
    for label in REVISION_LABELS:
        value = labels.get(label)
        if value:
            return value
    return ""


def owners_to_read(inputs: Inputs) -> frozenset[Owner]:
    """The owners (StatefulSets, ReplicaSets) of the group's pods: read their rollout."""
    selector = inputs.group.selector
    return frozenset(
        (pod.owner_kind, pod.owner_name) for pod in inputs.pods
        if pod.owner_kind in ROLLING_OWNER_KINDS and pod.owner_name
        and selector.matches(pod.labels))


@dataclasses.dataclass(frozen=True, slots=True)
class Revisions:
    """Live members by where they stand in a rollout."""

    outdated: frozenset[ids.WorkerId] = frozenset()
    """About to be replaced: terminating, or behind the owner's update revision."""
    updated: frozenset[ids.WorkerId] = frozenset()
    """On the owner's update revision (known only where the owner was read)."""
    starting: bool = False
    """While some pod is behind, a pod has no live member (terminating, or not joined)."""

    @property
    def rolling(self) -> bool:
        """Whether a rollout is in progress (see the module docstring)."""
        return bool(self.outdated) or self.starting


NONE = Revisions()


def outdated(pod: views.PodView, facts: RolloutFacts | None) -> bool:
    """Whether ``pod`` is about to be replaced (see the module docstring)."""
    if pod.deleting:
        return True
    if facts is None or facts.on_delete or not facts.update_revision:
        return False
    running = revision(pod)
    if not running or running == facts.update_revision:
        return False
    if pod.owner_kind == "StatefulSet" and facts.partition > 0:
        number = liveness.ordinal(pod.name, pod.owner_name)
        if number is not None and number < facts.partition:
            return False  # below the partition: the roll leaves it alone
    return True


def judge(pods: Mapping[str, views.PodView], members: Collection[ids.WorkerId],
          rollouts: Mapping[Owner, RolloutFacts]) -> Revisions:
    """Where each live member stands (members without a pod are neither)."""
    old: set[ids.WorkerId] = set()
    new: set[ids.WorkerId] = set()
    starting = False
    if rollouts and len(pods) > len(members):
        behind = False  # some pod is not (or no longer) on its owner's update revision
        waiting = False  # some pod without a live member is terminating or starting
        for name, candidate in pods.items():
            facts = rollouts.get((candidate.owner_kind, candidate.owner_name))
            if facts is None or not facts.update_revision or facts.on_delete:
                continue
            current = revision(candidate) == facts.update_revision
            behind = behind or candidate.deleting or not current
            if name not in members and (candidate.deleting or current):
                waiting = True
            if behind and waiting:
                starting = True  # being replaced, or being started, by the roll
                break
    for member in members:
        pod = pods.get(member)
        if pod is None:
            continue
        facts = rollouts.get((pod.owner_kind, pod.owner_name)) if rollouts else None
        if outdated(pod, facts):
            old.add(member)
        elif facts is not None and facts.update_revision \
                and revision(pod) == facts.update_revision:
            new.add(member)
    if not old and not new and not starting:
        return NONE
    return Revisions(frozenset(old), frozenset(new), starting)


# -- reading owners (the shell fetches the bodies; parsing is pure) -------------------

DEPLOYMENT_REVISION = "deployment.kubernetes.io/revision"


def statefulset_facts(body: Mapping[str, object]) -> RolloutFacts | None:
    """A StatefulSet body's rollout: ``status.updateRevision``, partition, strategy."""
    spec = body.get("spec")
    status = body.get("status")
    if not isinstance(status, Mapping):
        return None
    update = status.get("updateRevision")
    if not isinstance(update, str) or not update:
        return None
    partition = 0
    on_delete = False
    strategy = spec.get("updateStrategy") if isinstance(spec, Mapping) else None
    if isinstance(strategy, Mapping):
        on_delete = strategy.get("type") == "OnDelete"
        rolling = strategy.get("rollingUpdate")
        if isinstance(rolling, Mapping):
            value = rolling.get("partition")
            if isinstance(value, int) and not isinstance(value, bool) and value > 0:
                partition = value
    return RolloutFacts(update_revision=update, partition=partition, on_delete=on_delete)


def replicaset_facts(bodies: Iterable[Mapping[str, object]],
                     wanted: Iterable[str]) -> dict[Owner, RolloutFacts]:
    """For each ReplicaSet in ``wanted``: the ``pod-template-hash`` its Deployment rolls to.

    A Deployment rolls to its newest ReplicaSet: the one with the highest
    ``deployment.kubernetes.io/revision`` annotation (a rollback raises the old one's).
    A ReplicaSet no Deployment controls is left out.
    """
    owner_of: dict[str, str] = {}
    newest: dict[str, tuple[int, str]] = {}
    for body in bodies:
        meta = body.get("metadata")
        if not isinstance(meta, Mapping):
            continue
        name = str(meta.get("name", ""))
        deployment = ""
        for ref in meta.get("ownerReferences") or ():
            if isinstance(ref, Mapping) and ref.get("kind") == "Deployment" \
                    and ref.get("controller"):
                deployment = str(ref.get("name", ""))
        if not deployment:
            continue
        owner_of[name] = deployment
        labels = meta.get("labels")
        annotations = meta.get("annotations")
        template = labels.get("pod-template-hash") if isinstance(labels, Mapping) else None
        text = annotations.get(DEPLOYMENT_REVISION) if isinstance(annotations, Mapping) \
            else None
        if not isinstance(template, str) or not isinstance(text, str) or not text.isdigit():
            continue
        number = int(text)
        if deployment not in newest or number > newest[deployment][0]:
            newest[deployment] = (number, template)
    result: dict[Owner, RolloutFacts] = {}
    for name in wanted:
        deployment = owner_of.get(name, "")
        if deployment in newest:
            result[("ReplicaSet", name)] = RolloutFacts(update_revision=newest[deployment][1])
    return result
