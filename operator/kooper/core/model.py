"""Values the assignor reads and writes: resources, members, snapshots, plans, state.

Resources use Kafka Connect's ids: a connector instance is its name (``"A"``,
KIP-415's ``AC0``); a task is ``"<connector>-<n>"`` (``"A-0"``, KIP-415's ``AT1``).
Both are plain strings so a 100,000-task group is sets of ``str``; ``task_connector``
recovers a task's connector.

Everything here is frozen. ``plan`` never mutates its inputs; it returns a new
``PlanState`` that the shell persists (WorkerGroup status) and hands back next round.
"""

from __future__ import annotations

import dataclasses
import enum
from collections import Counter
from collections.abc import Iterable, Mapping

from kooper.core import defaults, ids

task_id = ids.task_id
task_connector = ids.task_connector
task_number = ids.task_number
"""Task ids are parsed in one place: ``core.ids``."""


def resource_sort_key(resource: str) -> tuple[str, int]:
    """Order resources as KIP-415 lists them: by connector, the instance before its tasks."""
    task = ids.split_task(resource)
    return (task[0], task[1] + 1) if task is not None else (resource, 0)


@dataclasses.dataclass(frozen=True, slots=True)
class ConnectorsAndTasks:
    """A set of connector instances and a set of tasks (Kafka's ``ConnectorsAndTasks``)."""

    connectors: frozenset[str] = frozenset()
    tasks: frozenset[str] = frozenset()

    @classmethod
    def of(cls, connectors: Iterable[str] = (), tasks: Iterable[str] = ()) -> ConnectorsAndTasks:
        """Build from any iterables."""
        return cls(frozenset(connectors), frozenset(tasks))

    def __len__(self) -> int:
        return len(self.connectors) + len(self.tasks)

    def __bool__(self) -> bool:
        return bool(self.connectors) or bool(self.tasks)

    def __contains__(self, resource: object) -> bool:
        return resource in self.tasks or resource in self.connectors

    def union(self, other: ConnectorsAndTasks) -> ConnectorsAndTasks:
        """Both sets together."""
        if not other:
            return self
        if not self:
            return other
        return ConnectorsAndTasks(self.connectors | other.connectors, self.tasks | other.tasks)

    def difference(self, other: ConnectorsAndTasks) -> ConnectorsAndTasks:
        """What is in self and not in other."""
        if not other or not self:
            return self
        return ConnectorsAndTasks(self.connectors - other.connectors, self.tasks - other.tasks)

    def intersection(self, other: ConnectorsAndTasks) -> ConnectorsAndTasks:
        """What both hold."""
        return ConnectorsAndTasks(self.connectors & other.connectors, self.tasks & other.tasks)

    def sorted(self) -> list[str]:
        """All resources in KIP-415 order (``A, A-0, A-1, B, B-0``)."""
        return sorted((*self.connectors, *self.tasks), key=resource_sort_key)


EMPTY = ConnectorsAndTasks()


class Protocol(enum.StrEnum):
    """A rebalance protocol a member may speak, and the one a group runs."""

    EAGER = "eager"
    COMPATIBLE = "compatible"


class Policy(enum.StrEnum):
    """The assignment policy: KIP-415 to the letter, or kooper's improvements on top."""

    KIP415 = "kip415"
    KOOPER = "kooper"


@dataclasses.dataclass(frozen=True, slots=True)
class Member:
    """One member as it reported itself (KIP-415's JoinGroup metadata).

    ``incarnation`` changes every time the process restarts, even under the same
    name: a new incarnation owns nothing it does not report, and whatever its
    previous incarnation held is lost.
    """

    id: ids.WorkerId
    owned: ConnectorsAndTasks = EMPTY
    generation: int = -1
    protocols: frozenset[Protocol] = frozenset({Protocol.EAGER, Protocol.COMPATIBLE})
    incarnation: str = ""
    fenced: bool = False
    """The member stopped everything itself because it could not renew its Lease,
    and has applied no assignment since: it runs nothing it was given and starts
    again only on a newer assignment."""
    rejoins: int = 0
    """How many times this incarnation fenced itself and rejoined (its report's)."""

    @property
    def cooperative(self) -> bool:
        """Whether this member speaks the incremental cooperative protocol."""
        return Protocol.COMPATIBLE in self.protocols


@dataclasses.dataclass(frozen=True, slots=True)
class Settings:
    """The rebalancing settings of one worker group (``WorkerGroup.spec``)."""

    protocol: Protocol = Protocol.COMPATIBLE
    policy: Policy = Policy.KOOPER
    max_delay_ms: int = defaults.SCHEDULED_REBALANCE_MAX_DELAY_MS
    """``scheduled.rebalance.max.delay.ms``: 0 disables the delay."""


@dataclasses.dataclass(frozen=True, slots=True)
class Snapshot:
    """Everything the leader knows at the start of a round.

    ``connectors`` maps each wanted connector to its number of tasks (a stopped
    connector is present with 0 tasks). ``members`` holds the live members only.
    ``departed_permanently`` names absent members known not to come back (a
    StatefulSet scale-down): the ``kooper`` policy reassigns their work at once.
    ``restarts`` names resources to restart in place with a new epoch.
    """

    connectors: Mapping[str, int]
    members: Mapping[ids.WorkerId, Member]
    settings: Settings = Settings()
    departed_permanently: frozenset[ids.WorkerId] = frozenset()
    restarts: frozenset[str] = frozenset()
    """Resources to restart in place (``kooper.dev/restart``): each one assigned after
    this round gets a new epoch, and its member a new document; the worker stops it
    and starts it again with the new epoch. Unassigned ones get a new epoch anyway
    when they are next handed out."""
    outdated: frozenset[ids.WorkerId] = frozenset()
    """Live members about to be replaced by a rollout (``control.rollout``): under
    ``kooper`` they get free work only when no other member can take it, and while
    any is live, balancing revocations wait for the rollout to end."""
    updated: frozenset[ids.WorkerId] = frozenset()
    """Live members already on their rollout's update revision: free work goes to
    them first while a rollout is in progress."""
    rolling: bool = False
    """A rollout is in progress even if no live member is outdated (a pod on the
    update revision is starting): balancing revocations wait as well."""
    grace_ms: int | None = None
    """``kooper`` policy: how long the work of a member that departs *this round*
    (unplanned) waits for it, at most ``settings.max_delay_ms`` (``control.adaptive``
    decides it); None: the whole delay."""

    def configured(self) -> ConnectorsAndTasks:
        """Every resource the connectors want: instances and tasks."""
        return ConnectorsAndTasks(
            frozenset(self.connectors),
            frozenset(
                f"{name}-{n}" for name, count in self.connectors.items() for n in range(count)
            ),
        )


@dataclasses.dataclass(frozen=True, slots=True)
class Delay:
    """A scheduled rebalance: lost work waits until ``deadline_ms`` for its owner."""

    deadline_ms: int
    candidates: tuple[ids.WorkerId, ...] = ()
    """Members that joined empty during the delay, in the order they became candidates."""
    departures: Mapping[ids.WorkerId, int] = dataclasses.field(default_factory=dict)
    """``kooper`` policy: each lost origin's own deadline (its departure plus its grace,
    ``core.delays``), never after ``deadline_ms``; an origin not here waits until
    ``deadline_ms``. Always empty under ``kip415`` (one deadline for all, as the KIP)."""

    def next_ms(self) -> int:
        """When the next lost set is due: the earliest deadline still pending."""
        if not self.departures:
            return self.deadline_ms
        return min(self.deadline_ms, *self.departures.values())


@dataclasses.dataclass(frozen=True, slots=True)
class RevocationBackoff:
    """Where the group stands in backing off consecutive revoking rounds (``core.backoff``)."""

    revoked_last: bool = False
    """The last round that changed the group revoked for balance."""
    streak: int = 0
    """Consecutive revoking rounds so far (Kafka's ``numSuccessiveRevokingRebalances``)."""
    held_until_ms: int | None = None
    """No balancing revocation before this time."""


Shape = tuple[frozenset[str], Counter[str] | None]
"""A task set and its tasks per connector when it has two of one (``PlanState.shapes``)."""


@dataclasses.dataclass(frozen=True, slots=True)
class PlanState:
    """What the leader remembers between rounds (persisted in WorkerGroup status).

    ``assignments`` is the full set each member may run, as last written to its
    ConfigMap at generation ``assigned_at[member]``. ``lost`` maps each lost
    resource set to the member it was lost from, so a returning identity can get
    its own work back. ``epochs`` counts, per resource, how many times it was
    handed to a member: it only grows.
    """

    generation: int = 0
    protocol: Protocol = Protocol.COMPATIBLE
    assignments: Mapping[ids.WorkerId, ConnectorsAndTasks] = dataclasses.field(
        default_factory=dict
    )
    assigned_at: Mapping[ids.WorkerId, int] = dataclasses.field(default_factory=dict)
    incarnations: Mapping[ids.WorkerId, str] = dataclasses.field(default_factory=dict)
    lost: Mapping[ids.WorkerId, ConnectorsAndTasks] = dataclasses.field(default_factory=dict)
    delay: Delay | None = None
    epochs: Mapping[str, int] = dataclasses.field(default_factory=dict)
    epoch_base: int = 0
    """Every epoch handed out from now on exceeds this: the largest epoch ever issued
    when this leader restored. An older leader's document may have handed a resource a
    larger epoch than any document now shows for it (a later one revoked it, and that
    leader's status never landed); the next holder must still run it at a new one."""
    revoking: Mapping[ids.WorkerId, ConnectorsAndTasks] = dataclasses.field(default_factory=dict)
    """Per member, what it was told to stop and has not yet acknowledged (the barrier)."""
    eager_revoking: bool = False
    """Eager protocol: a stop-the-world revocation is out and not yet acknowledged by all."""
    backoff: RevocationBackoff = RevocationBackoff()
    """Backing off consecutive revoking rounds (``core.backoff``)."""
    forgotten: bool = False
    """A new leader that knows nothing but the delay: adopt what members report owning,
    and (KIP-415) treat unaccounted resources as lost while a delay is in progress."""
    shapes: Mapping[ids.WorkerId, Shape] = dataclasses.field(
        default_factory=dict, compare=False, repr=False)
    """Derived from ``assignments``, never persisted nor compared: per member, its task
    set and, if it holds two tasks of one connector, how many of each
    (``assignor.groups.doubled``), as far as the round that planned them read them. The
    next round skips re-reading the ids of sets that did not move; without it (a
    restored state) it reads them, and plans the same."""

    def lost_resources(self) -> ConnectorsAndTasks:
        """Every lost resource, whoever it was lost from."""
        result = EMPTY
        for resources in self.lost.values():
            result = result.union(resources)
        return result


def tells_more(told: ConnectorsAndTasks, tell: ConnectorsAndTasks, *,
               acknowledged: bool) -> bool:
    """Whether a member's revocations ``tell`` need a new document, when the document it
    holds revoked ``told`` (``PlanState.revoking``) and its assignment did not change.

    A revoked set is an order to stop. A member that acknowledged its document (reports
    its generation or a later one) stopped everything the document revokes: that set is
    done, and a document that lists it still says nothing the member must act on. So
    letting go of ``told`` rewrites nobody; a revocation the document does not state yet
    does, and so does any change while the member has not acknowledged its document.
    The barrier never reads ``revoked`` from a document the member acknowledged
    (``assignor``: unacknowledged revocations are held only below ``assigned_at``).
    """
    if told is tell or told == tell:
        return False
    return bool(tell) or not acknowledged


@dataclasses.dataclass(frozen=True, slots=True)
class MemberPlan:
    """One member's part of a round: what it may run and what it must stop."""

    assigned: ConnectorsAndTasks
    revoked: ConnectorsAndTasks
    generation: int
    """The generation this assignment was written at (unchanged if it did not change)."""


@dataclasses.dataclass(frozen=True, slots=True)
class Plan:
    """The result of one round.

    ``members`` has an entry for every live member. ``changed`` names those whose
    assignment (assigned, revoked, protocol, epochs) differs from last round: the
    ConfigMaps to write. A delay starting or ending changes no member's work, so it
    rewrites nobody: documents written for other reasons carry the remaining delay,
    and the WorkerGroup status carries the deadline for everyone.
    ``next_round_at_ms`` is when the leader must plan again even if nothing
    happens (the delay's deadline), or ``None``.
    """

    members: Mapping[ids.WorkerId, MemberPlan]
    state: PlanState
    protocol: Protocol
    delay_ms: int
    next_round_at_ms: int | None
    changed: frozenset[ids.WorkerId]
    newly_assigned: Mapping[ids.WorkerId, ConnectorsAndTasks]
    newly_lost: ConnectorsAndTasks
    unassigned: ConnectorsAndTasks
    """Configured resources that no live member may run after this round."""

    @property
    def revoking(self) -> bool:
        """Whether this round revokes anything (the group has not converged)."""
        return any(member.revoked for member in self.members.values())

    def stranded(self) -> ConnectorsAndTasks:
        """``unassigned`` less what is being handed over: what a member was told to stop
        and has not acknowledged stopping (``state.revoking``), which the round that sees
        the acknowledgement hands on. A join's revocations make that work unassigned for
        a moment in every rolling restart; what is left waits for a member to run it."""
        unassigned = self.unassigned
        if not unassigned or not self.state.revoking:
            return unassigned
        return unassigned.difference(self.handing_over())

    def handing_over(self) -> ConnectorsAndTasks:
        """What members were told to stop and have not acknowledged stopping
        (``state.revoking``): on its way to another member."""
        revoking = self.state.revoking.values()
        if not revoking:
            return EMPTY
        return ConnectorsAndTasks(frozenset().union(*(r.connectors for r in revoking)),
                                  frozenset().union(*(r.tasks for r in revoking)))
