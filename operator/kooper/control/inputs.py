"""What a controller step reads and remembers: ``Inputs``, ``Memory``, ``Caches``.

``Inputs`` are the watched objects plus the few reads the shell makes for a step
(the owners of gone pods, ConfigMaps that look edited). ``Memory`` is what a step
hands the next, in two parts: ``Persisted``, what a leader that just started reads
back (``restore.restored``, from what the API holds), and ``Volatile``, what only the running
process saw. A new fact goes in one of them, with a default, so every runner keeps
working unchanged, and in ``Fields`` (by the same name and type), which types the
keywords of ``Memory.of`` and ``Memory.replace``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TypedDict, Unpack

from kooper.control import adaptive, events, failures, liveness, restarts, snapshot, views
from kooper.control.memo import PerMember
from kooper.control.settings import Settings, to_carry
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
class RolloutFacts:
    """The revision a pod's owner rolls its pods to (``control.rollout``).

    Read for the owner (kind, name) of each member pod: a StatefulSet's
    ``status.updateRevision`` (with its ``partition``; ``on_delete`` for the
    ``OnDelete`` strategy, which replaces no pod by itself), or, for a ReplicaSet of a
    Deployment, the ``pod-template-hash`` of that Deployment's newest ReplicaSet.
    """

    update_revision: str
    partition: int = 0
    on_delete: bool = False


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
    """Live members whose ConfigMap must be written again: someone else changed it
    (``"edited"``, ``"deleted"``), or it holds a write of ours that failed as far as we
    know (``"unanswered"``: the answer was lost after the API server committed it)."""
    leader: str = ""
    """The operator's identity, written into every Assignment."""
    leader_epoch: int = 0
    """The leader's fencing token (``shell.leader``; 0: no election), in every document."""
    rollouts: Mapping[Owner, RolloutFacts] = dataclasses.field(default_factory=dict)
    """The update revision of each member pod's owner (``control.rollout.owners_to_read``);
    an owner left out (not read, or not rolling pods) makes no member outdated."""
    released: Sequence[views.LeaseView] = ()
    """Member Leases deleted lately, as their last version was (the watch's DELETED event
    carries it; the shell keeps the latest per name until a Lease of that name is back).
    One whose report says its worker left proves that incarnation stopped
    (``control.liveness.left``), even in a round that sees its Lease and its pod gone
    together."""
    others: Sequence[views.GroupView] = ()
    """The namespace's other WorkerGroups: a pod an older one's selector matches too
    belongs to that one (``control.elsewhere.taken``)."""
    gone_means_stopped: bool = False
    """The runner models its members' processes, and one whose pod vanished stopped with
    it (the simulator's crash, ``kooper replay``). The operator never knows that: a member
    whose pod vanished keeps its work until its fence budget ran out
    (``control.liveness.vanished``)."""


Membership = tuple[str, int, int]
"""A member's membership as the operator issued it: (incarnation, membership epoch, the
member's ``rejoins`` count it was issued for)."""


@dataclasses.dataclass(frozen=True, slots=True)
class Issued:
    """The largest epochs the operator issued (``control.epochs``), and what of them the
    status holds: neither may be issued again, even after a restart."""

    member_epoch: int = 0
    """The largest membership epoch issued so far (``status.state.memberEpoch``)."""
    epoch_floor: int = 0
    """The largest resource epoch issued so far (``status.state.epochFloor``)."""
    floor_pending: bool = False
    """Just restored: resources with no known epoch start above ``epoch_floor``."""
    written: tuple[int, int] = (0, 0)
    """(``memberEpoch``, ``epochFloor``) as the last status write (or the restore) left
    them: a step that knows larger ones (read from ConfigMaps after a restart) persists
    them before it deletes or rewrites any ConfigMap (``control.epochs.unpersisted``)."""


@dataclasses.dataclass(frozen=True, slots=True)
class Persisted:
    """What a restarted leader reads back (``restore.restored``): ``status.state``, the ConfigMaps,
    the Connector statuses. Every decision that must survive a restart rests on these."""

    state: model.PlanState = dataclasses.field(default_factory=model.PlanState)
    given: Mapping[ids.WorkerId, tuple[str, model.ConnectorsAndTasks]] = dataclasses.field(
        default_factory=dict)
    """member → (incarnation, everything written to its ConfigMap since)."""
    documents: Mapping[ids.WorkerId, tuple[str, model.ConnectorsAndTasks]] | None = None
    """member → (incarnation, what its ConfigMap assigns), as a just-restored leader read
    them (a member without one was given nothing); None when no ConfigMaps were read
    (``kooper replay``'s model of Kafka's new leader). Kept until its first round
    (``control.epochs.unissued``)."""
    pod_owners: Mapping[str, Owner] = dataclasses.field(default_factory=dict)
    """pod → its owner (``status.state.owners``)."""
    terminating: frozenset[tuple[str, str]] = frozenset()
    """(member, pod uid) of live members whose pod was seen terminating
    (``control.departures``; ``status.state.terminating``, so a restarted operator still
    judges such a departure planned)."""
    configmaps: frozenset[ids.WorkerId] = frozenset()
    """Members whose ConfigMap this operator wrote and has not deleted."""
    restarts_done: restarts.Done = dataclasses.field(default_factory=dict)
    """connector → the restart record acted on (``Connector.status.restart``)."""
    member_epochs: Mapping[ids.WorkerId, Membership] = dataclasses.field(
        default_factory=dict)
    """member → (incarnation, its current membership epoch, the ``rejoins`` count it was
    issued for); a member not here has none (departed: its epoch is retired)."""
    issued: Issued = Issued()
    """The largest epochs issued so far, and how far a status write holds them."""
    settings_written: Mapping[str, tuple[Mapping[str, str] | None, str | None]] = \
        dataclasses.field(default_factory=dict)
    """connector → (config, state) the members' documents carry (``control.settings``;
    rebuilt from the ConfigMaps after a restart)."""
    failures: Mapping[str, failures.Record] | None = None
    """Failed resources (``control.failures``); None: read them from the Connector statuses."""
    task_restarts: Mapping[str, str] | None = None
    """connector → the ``kooper.dev/restart-task`` value acted on; None: read from statuses."""
    learned: adaptive.Learned = dataclasses.field(default_factory=adaptive.Learned)
    """Observed returns and handoffs (``control.adaptive``; ``status.state.adaptive``)."""


@dataclasses.dataclass(frozen=True, slots=True)
class Volatile:
    """What only this process saw: a restarted leader starts without it, and that only
    delays or repeats something (an expiry observed anew, an Event posted again, a
    handoff not timed), never changes who runs what."""

    good_reports: Mapping[ids.WorkerId, messages.Report] = dataclasses.field(
        default_factory=dict)
    """The last usable report per member, used while its current one is malformed (after
    a restart such a member is no member until it reports again)."""
    permanent: Mapping[str, bool] = dataclasses.field(default_factory=dict)
    """Absent members already judged (permanently departed, or leaving on purpose: True);
    re-judged from a fresh read after a restart."""
    observed: liveness.Observed = dataclasses.field(default_factory=dict)
    """When this operator first saw each Lease's current version (``liveness.observe``): a
    new leader observes every Lease anew, which only delays expiries."""
    vanished: Mapping[ids.WorkerId, liveness.Vanished] = dataclasses.field(
        default_factory=dict)
    """Members whose pod vanished while their process may still run, kept until their
    fence budget ran out (``liveness.vanished``): a new leader that finds a member's pod
    gone or replaced times it from its first step."""
    reported: events.Reported = dataclasses.field(default_factory=events.Reported)
    """Problems already posted as Events (each once)."""
    last_key: object = None
    """The last planned round's inputs: a round with the same skips planning."""
    last_plan: model.Plan | None = None
    rejected: Mapping[str, tuple[object, str]] = dataclasses.field(default_factory=dict)
    """Connectors left out because no document with them fits (``control.containment``)."""
    held: bool = False
    """Reassignment was held last round (``control.rails``)."""
    hold_released: str = ""
    """The ``kooper.dev/release-hold`` value acted on."""
    paced: int = 0
    """Balancing moves the last paced round left for later (``control.pacing``; shown in
    status)."""
    handing: Mapping[ids.WorkerId, tuple[int, int, str]] = dataclasses.field(
        default_factory=dict)
    """member → (generation, when written, incarnation) of a document that newly assigned
    it work and that it has not reported applying yet (a handoff being timed: a restarted
    leader loses those samples of ``learned``, nothing else)."""
    revoked_claims: Mapping[ids.WorkerId, model.ConnectorsAndTasks] = dataclasses.field(
        default_factory=dict)
    """member → the foreign claims its last document already revoked (``control.claims``)."""
    restarts_pending: restarts.Pending = dataclasses.field(default_factory=dict)
    """Restarts asked for whose writes failed (done again in full after a restart)."""


class Fields(TypedDict, total=False):
    """The fields of ``Persisted`` and ``Volatile`` by name, for ``Memory.of``/``replace``
    (a test checks that these are exactly theirs)."""

    state: model.PlanState
    given: Mapping[ids.WorkerId, tuple[str, model.ConnectorsAndTasks]]
    documents: Mapping[ids.WorkerId, tuple[str, model.ConnectorsAndTasks]] | None
    pod_owners: Mapping[str, Owner]
    terminating: frozenset[tuple[str, str]]
    configmaps: frozenset[ids.WorkerId]
    restarts_done: restarts.Done
    member_epochs: Mapping[ids.WorkerId, Membership]
    issued: Issued
    settings_written: Mapping[str, tuple[Mapping[str, str] | None, str | None]]
    failures: Mapping[str, failures.Record] | None
    task_restarts: Mapping[str, str] | None
    learned: adaptive.Learned
    good_reports: Mapping[ids.WorkerId, messages.Report]
    permanent: Mapping[str, bool]
    observed: liveness.Observed
    vanished: Mapping[ids.WorkerId, liveness.Vanished]
    reported: events.Reported
    last_key: object
    last_plan: model.Plan | None
    rejected: Mapping[str, tuple[object, str]]
    held: bool
    hold_released: str
    paced: int
    handing: Mapping[ids.WorkerId, tuple[int, int, str]]
    revoked_claims: Mapping[ids.WorkerId, model.ConnectorsAndTasks]
    restarts_pending: restarts.Pending


_PERSISTED = frozenset(f.name for f in dataclasses.fields(Persisted))
_VOLATILE = frozenset(f.name for f in dataclasses.fields(Volatile))


@dataclasses.dataclass(frozen=True, slots=True)
class Memory:
    """What one step hands the next: what survives a restart, and what does not."""

    persisted: Persisted = dataclasses.field(default_factory=Persisted)
    volatile: Volatile = dataclasses.field(default_factory=Volatile)

    @classmethod
    def of(cls, **fields: Unpack[Fields]) -> Memory:
        """A memory from the fields of both parts, by name (the rest default)."""
        return cls().replace(**fields)

    def replace(self, **changes: Unpack[Fields]) -> Memory:
        """This memory with ``changes``, each a field of ``Persisted`` or ``Volatile``."""
        unknown = changes.keys() - _PERSISTED - _VOLATILE
        if unknown:
            raise TypeError(f"Memory has no field {sorted(unknown)[0]!r}")
        persisted: dict[str, Any] = {k: v for k, v in changes.items() if k in _PERSISTED}
        volatile: dict[str, Any] = {k: v for k, v in changes.items() if k in _VOLATILE}
        return Memory(
            dataclasses.replace(self.persisted, **persisted) if persisted else self.persisted,
            dataclasses.replace(self.volatile, **volatile) if volatile else self.volatile)

    def issuing_above(self, generation: int) -> Memory:
        """This memory, its next plan's generation newer than ``generation`` (one a member
        reports applying, or a document found on the API): a worker ignores every
        document not newer than one it accepted."""
        state = self.persisted.state
        if generation <= state.generation:
            return self
        return self.replace(state=dataclasses.replace(state, generation=generation))

    def members(self) -> frozenset[str]:
        """Every member any per-member map may hold an entry for."""
        state = self.persisted.state
        return frozenset({*state.assignments, *state.lost, *self.persisted.configmaps})


class Caches:
    """Indexes carried between steps to make them cheaper; never changes a decision."""

    def __init__(self) -> None:
        self.assignor = assignor.Cache()
        self.configured: tuple[tuple[tuple[str, int], ...], model.ConnectorsAndTasks] | None = None
        self.claims: PerMember[model.ConnectorsAndTasks] = PerMember()
        """``claims.unknown``: per member, what it claims that no document gave it, from
        (its member, its latest document, the configured resources)."""
        self.untrue: PerMember[model.ConnectorsAndTasks] = PerMember()
        """``claims.false``: per member, what it claims beyond the document it
        acknowledges, from (its report, that document, the configured resources)."""
        self.members = snapshot.Memo()
        self.connectors: tuple[Sequence[views.ConnectorView], Wanted] | None = None

    def connectors_of(self, found: Sequence[views.ConnectorView]) -> Wanted:
        """Task counts, states, configs and the skip key of these Connectors (memoised)."""
        if self.connectors is not None:
            before, result = self.connectors
            if before is found or (len(before) == len(found) and all(
                    a is b for a, b in zip(before, found, strict=True))):
                return result
        counts, states = snapshot.wanted(found)
        configs = {c.name: c.config for c in found}
        result = Wanted(
            counts=counts, states=states, configs=configs,
            key=tuple(sorted((c.name, tuple(sorted(c.config.items())), c.state, c.restart,
                              c.restart_task) for c in found)),
            carried=to_carry(configs, states))
        self.connectors = (found, result)
        return result

    def configured_of(self, snap: model.Snapshot) -> model.ConnectorsAndTasks:
        """``snap.configured()``, rebuilt only when task counts change (100,000 strings)."""
        key = tuple(sorted(snap.connectors.items()))
        if self.configured is None or self.configured[0] != key:
            self.configured = (key, snap.configured())
        return self.configured[1]


@dataclasses.dataclass(frozen=True, slots=True)
class Wanted:
    """What a step needs of the Connectors, computed once per set of Connector views."""

    counts: Mapping[str, int]
    states: Mapping[str, str]
    configs: Mapping[str, Mapping[str, str]]
    key: tuple[object, ...]
    carried: Settings
    """What the documents should carry of each (``settings.to_carry``): the same object
    while the Connectors are, so the next round finds it written (``settings.changed``)."""


def leased_members(group: views.GroupView, pods: Iterable[views.PodView],
                   leases: Iterable[views.LeaseView]) -> list[str]:
    """The group's members by their Leases (a Lease whose pod the selector matches),
    expired or not: the names a new leader's fence occupies (``shell.writes.Writer.fence``)."""
    matching = {pod.name for pod in pods if group.selector.matches(pod.labels)}
    return sorted({lease.member for lease in leases if lease.member in matching})


def absent_members(inputs: Inputs, memory: Memory) -> list[tuple[str, views.PodView | None]]:
    """Members the state knows whose pod is gone or terminating (departure candidates)."""
    known = memory.persisted.state.assignments.keys() | memory.persisted.state.lost.keys()
    if not known:
        return []
    pods = _pods_by_name(inputs.pods)
    absent = known - pods.keys()
    absent.update(m for m in known & _deleting(pods) if pods[m].deleting)
    return [(m, pods.get(m)) for m in sorted(absent)]


_pods_memo: list[tuple[Sequence[views.PodView], dict[str, views.PodView]]] = []
_deleting_memo: list[tuple[dict[str, views.PodView], frozenset[str]]] = []


def _deleting(pods: dict[str, views.PodView]) -> frozenset[str]:
    if _deleting_memo and _deleting_memo[0][0] is pods:
        return _deleting_memo[0][1]
    result = frozenset(name for name, pod in pods.items() if pod.deleting)
    _deleting_memo[:] = [(pods, result)]
    return result


def _pods_by_name(pods: Sequence[views.PodView]) -> dict[str, views.PodView]:
    """Pods by name; the same list as the last call (not mutated since) costs nothing."""
    if _pods_memo and _pods_memo[0][0] is pods:
        return _pods_memo[0][1]
    result = {pod.name: pod for pod in pods}
    _pods_memo[:] = [(pods, result)]
    return result


def owner_of(member: str, pod: views.PodView | None, memory: Memory) -> Owner:
    if pod is not None and pod.owner_kind:
        return pod.owner_kind, pod.owner_name
    return memory.persisted.pod_owners.get(member, ("", ""))


def owners_to_read(inputs: Inputs, memory: Memory) -> frozenset[Owner]:
    """The pod owners the shell should read before ``step`` (to judge departures)."""
    wanted: set[Owner] = set()
    for member, pod in absent_members(inputs, memory):
        if member in memory.volatile.permanent:
            continue
        kind, name = owner_of(member, pod, memory)
        if kind in liveness.PERMANENT_OWNER_KINDS and name:
            wanted.add((kind, name))
    return frozenset(wanted)
