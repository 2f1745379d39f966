"""What a controller step reads and remembers: ``Inputs``, ``Memory``, ``Caches``.

``Inputs`` are the watched objects plus the few reads the shell makes for a step
(the owners of gone pods, ConfigMaps that look edited). ``Memory`` is what a step
hands the next; a leader that just started builds it with ``restored`` from what
the API holds. Later rounds' needs (rollout handoff, membership epochs) add fields
here, with defaults, so every runner keeps working unchanged.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

from kooper.control import events, liveness, restarts, state, views
from kooper.core import assignor, ids, model
from kooper.protocol import messages

Owner = tuple[str, str]
"""(kind, name) of a pod's controller."""


@dataclasses.dataclass(frozen=True, slots=True)
class OwnerFacts:
    """What a read of a pod's owner found (``replicas`` only for a StatefulSet)."""

    exists: bool
    replicas: int | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class Inputs:
    """Everything one step reads: the watched objects and the few reads the shell made."""

    group: views.GroupView
    pods: Sequence[views.PodView]
    leases: Sequence[views.LeaseView]
    connectors: Sequence[views.ConnectorView]
    configmaps: Mapping[str, views.ConfigMapView] = dataclasses.field(default_factory=dict)
    """member → its ConfigMap as watched."""
    owners: Mapping[Owner, OwnerFacts] = dataclasses.field(default_factory=dict)
    """The owners ``owners_to_read`` asked for (one that could not be read is left out)."""
    edits: Mapping[ids.WorkerId, str] = dataclasses.field(default_factory=dict)
    """Live members whose ConfigMap someone else changed: ``"edited"`` or ``"deleted"``."""
    leader: str = ""
    """The operator's identity, written into every Assignment."""


@dataclasses.dataclass(frozen=True, slots=True)
class Memory:
    """What one step hands the next (see the module docstring for what is persisted)."""

    state: model.PlanState = dataclasses.field(default_factory=model.PlanState)
    good_reports: Mapping[ids.WorkerId, messages.Report] = dataclasses.field(
        default_factory=dict)
    """The last usable report per member, used while its current one is malformed."""
    given: Mapping[ids.WorkerId, tuple[str, model.ConnectorsAndTasks]] = dataclasses.field(
        default_factory=dict)
    """member → (incarnation, everything written to its ConfigMap since)."""
    pod_owners: Mapping[str, Owner] = dataclasses.field(default_factory=dict)
    permanent: Mapping[str, bool] = dataclasses.field(default_factory=dict)
    """Absent members already judged (permanently departed or not)."""
    configmaps: frozenset[ids.WorkerId] = frozenset()
    """Members whose ConfigMap this operator wrote and has not deleted."""
    restarts_done: restarts.Done = dataclasses.field(default_factory=dict)
    restarts_pending: restarts.Pending = dataclasses.field(default_factory=dict)
    reported: events.Reported = dataclasses.field(default_factory=events.Reported)
    last_key: object = None
    last_plan: model.Plan | None = None

    def members(self) -> frozenset[str]:
        """Every member any per-member map may hold an entry for."""
        return frozenset({*self.state.assignments, *self.state.lost, *self.configmaps})


class Caches:
    """Indexes carried between steps to make them cheaper; never changes a decision."""

    def __init__(self) -> None:
        self.assignor = assignor.Cache()
        self.configured: tuple[tuple[tuple[str, int], ...], model.ConnectorsAndTasks] | None = None
        self.claims: dict[ids.WorkerId, tuple[model.ConnectorsAndTasks, ...]] = {}
        self.members: dict[ids.WorkerId, tuple[messages.Report, model.Member]] = {}

    def configured_of(self, snap: model.Snapshot) -> model.ConnectorsAndTasks:
        """``snap.configured()``, rebuilt only when task counts change (100,000 strings)."""
        key = tuple(sorted(snap.connectors.items()))
        if self.configured is None or self.configured[0] != key:
            self.configured = (key, snap.configured())
        return self.configured[1]


def restored(group: views.GroupView, configmaps: Mapping[str, views.ConfigMapView]) -> Memory:
    """The memory of a leader that just started: the persisted state, nothing else."""
    result = state.restore(group.status.get("state"),
                           ((member, cm.text) for member, cm in configmaps.items()),
                           group=group.name)
    planner = result.state
    given = {member: (planner.incarnations.get(member, ""),
                      assigned.union(planner.revoking.get(member, model.EMPTY)))
             for member, assigned in planner.assignments.items()}
    return Memory(state=planner, given=given, pod_owners=state.restore_owners(
        group.status.get("state")), configmaps=frozenset(ids.WorkerId(m) for m in configmaps))


def absent_members(inputs: Inputs, memory: Memory) -> list[tuple[str, views.PodView | None]]:
    """Members the state knows whose pod is gone or terminating (departure candidates)."""
    known = {*memory.state.assignments, *memory.state.lost}
    if not known:
        return []
    pods = {pod.name: pod for pod in inputs.pods}
    return [(m, pod) for m in sorted(known) if (pod := pods.get(m)) is None or pod.deleting]


def owner_of(member: str, pod: views.PodView | None, memory: Memory) -> Owner:
    if pod is not None and pod.owner_kind:
        return pod.owner_kind, pod.owner_name
    return memory.pod_owners.get(member, ("", ""))


def owners_to_read(inputs: Inputs, memory: Memory) -> frozenset[Owner]:
    """The pod owners the shell should read before ``step`` (to judge departures)."""
    wanted: set[Owner] = set()
    for member, pod in absent_members(inputs, memory):
        if member in memory.permanent:
            continue
        kind, name = owner_of(member, pod, memory)
        if kind in liveness.PERMANENT_OWNER_KINDS and name:
            wanted.add((kind, name))
    return frozenset(wanted)
