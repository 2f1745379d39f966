"""Pacing balancing moves: at most ``spec.balancing.maxMovesPerRound`` per round (pure).

A balancing move stops a resource on one member (a revocation) and starts it on
another a round later; meanwhile it runs nowhere. A scale-out from 2 to 20 members
with 1,000 tasks would revoke 900 of them in one round, pausing 90% of the work at
once. The cap bounds that, like a Deployment's ``maxUnavailable``: a number of
resources, or a percentage of the group's configured resources (instances and
tasks), rounded up. Unset, the policy decides (``defaults.BALANCING_MAX_MOVES_BY_POLICY``,
the one place that says so): ``25%`` under ``kooper``; no limit under ``kip415``, since
Kafka Connect's assignor does not pace and ``kip415`` must revoke and delay as it does.

``pace`` runs on the assignor's plan inside the step. When the plan revokes more
resources *for balance* than the cap allows, it keeps that many revocations (taken
from the most loaded members first, one at a time in turn) and gives the rest back
to the members that hold them: they keep running there and are moved in a later
round. The assignor plans those later rounds as always: its revocation backoff
(``core.backoff``) spaces consecutive revoking rounds, so a paced rebalance takes a
few rounds more and never pauses more than the cap at once.

What is *not* a balancing move, and never capped (its work must move now):

* handing out lost work (a departed member's, a planned departure's, at the end of
  the delay or at once under the ``kooper`` rules) and new work: these are
  assignments of free work, not revocations;
* revoking a deleted or stopped connector's resources, or a resource two members
  hold (the barrier's own revocations);
* revocations from a member that is leaving (its pod terminating): ``exempt``;
* the eager protocol's stop-the-world revocation, and the round a protocol change.

It never starves: the cap is at least one move per revoking round, pacing only
keeps revocations back (it never adds one, so the barrier holds as the assignor
made it), and each paced round moves the group strictly closer to balance.

``pending`` is how many balancing moves the last paced round left for later; the
WorkerGroup status shows it (``status.balancing``) until a round needs no more.
It is not persisted: a restarted operator shows it again from its next paced round.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Collection, Mapping

from kooper.control import events
from kooper.core import ids, model

_Resource = tuple[bool, str]
"""(is a task, id): a connector instance and a task may have the same id."""

Limit = int | str
"""``spec.balancing.maxMovesPerRound``: a count (>= 1) or a percentage (``"25%"``), as
``views.parse_group`` read it."""


@dataclasses.dataclass(frozen=True, slots=True)
class Pacing:
    """What pacing did this round."""

    limit: int = 0
    """The cap this round, in resources (0: nothing to pace)."""
    wanted: int = 0
    """Balancing revocations the assignor planned."""
    pending: int = 0
    """Balancing moves left for later rounds (carried over rounds that revoke nothing)."""

    @property
    def deferred(self) -> int:
        """Balancing revocations held back this round."""
        return max(0, self.wanted - self.limit) if self.limit else 0


def cap(limit: Limit | None, resources: int) -> int:
    """The cap in resources for a group of ``resources``: a percentage rounds up; >= 1.

    ``None`` (no pacing) caps nothing: every resource may move.
    """
    if limit is None:
        return max(1, resources)
    if isinstance(limit, str):
        return max(1, math.ceil(int(limit[:-1]) * resources / 100))
    return max(1, limit)


def pace(plan: model.Plan, previous: model.PlanState, snapshot: model.Snapshot, *,
         configured: model.ConnectorsAndTasks, limit: Limit | None,
         exempt: Collection[str] = frozenset(), pending: int = 0
         ) -> tuple[model.Plan, Pacing]:
    """``plan`` with at most ``limit`` balancing revocations, and what was held back.

    ``limit`` ``None`` is no pacing: the plan as the assignor made it. ``pending`` is
    what the last round left (``Pacing.pending``): kept while no round revokes for
    balance and the revocation backoff is still counting.
    """
    if limit is None:
        return plan, Pacing()
    wanted = _balancing(plan, previous, snapshot, configured, exempt)
    count = sum(len(r) for r in wanted.values())
    if not count:
        quiet = plan.state.backoff == model.RevocationBackoff()
        return plan, Pacing(pending=0 if quiet else pending)
    allowed = cap(limit, len(configured))
    if count <= allowed:
        return plan, Pacing(limit=allowed, wanted=count)
    back = _kept_back(wanted, count - allowed)
    return _restored(plan, previous, snapshot, back), Pacing(
        limit=allowed, wanted=count, pending=count - allowed)


def _balancing(plan: model.Plan, previous: model.PlanState, snapshot: model.Snapshot,
               configured: model.ConnectorsAndTasks, exempt: Collection[str]
               ) -> dict[ids.WorkerId, list[_Resource]]:
    """Per member, the balancing revocations of ``plan``, in the order to keep them."""
    if (plan.protocol is not model.Protocol.COMPATIBLE or previous.protocol is not plan.protocol
            or previous.forgotten):
        return {}
    found: dict[ids.WorkerId, model.ConnectorsAndTasks] = {}
    for member, member_plan in plan.members.items():
        revoked = member_plan.revoked
        if not revoked or member in exempt:
            continue
        was = previous.assignments.get(member)
        report = snapshot.members.get(member)
        if (was is None or report is None or report.fenced
                or previous.incarnations.get(member, "") != report.incarnation):
            continue  # new, back as a new process, or fenced: not a balancing revocation
        moved = revoked.intersection(was).intersection(configured)
        if moved:
            found[member] = moved
    if not found:
        return {}
    # A resource another live member holds too is revoked for the barrier, not balance.
    every = model.EMPTY
    for moved in found.values():
        every = every.union(moved)
    twice_c: set[str] = set()
    twice_t: set[str] = set()
    for member, report in snapshot.members.items():
        mine = found.get(member, model.EMPTY)
        for held in (report.owned, previous.assignments.get(member, model.EMPTY),
                     previous.revoking.get(member, model.EMPTY)):
            if held:
                twice_c.update(every.connectors.intersection(held.connectors) - mine.connectors)
                twice_t.update(every.tasks.intersection(held.tasks) - mine.tasks)
    result: dict[ids.WorkerId, list[_Resource]] = {}
    for member, moved in found.items():
        ordered = sorted([*((False, r) for r in moved.connectors if r not in twice_c),
                          *((True, r) for r in moved.tasks if r not in twice_t)],
                         key=_order, reverse=True)
        if ordered:
            result[member] = ordered
    return result


def _order(resource: _Resource) -> tuple[str, int]:
    task, name = resource
    found = ids.split_task(name) if task else None
    return (found[0], found[1] + 1) if found is not None else (name, 0)


def _kept_back(wanted: Mapping[ids.WorkerId, list[_Resource]], count: int
               ) -> dict[ids.WorkerId, model.ConnectorsAndTasks]:
    """Which ``count`` of the ``wanted`` revocations to give back.

    The others are kept one per member in turn, the members that would give away the
    most first, so that every loaded member sheds some work this round.
    """
    size = {member: len(moved) for member, moved in wanted.items()}
    to_keep = sum(size.values()) - count
    kept = dict.fromkeys(wanted, 0)
    order = sorted(wanted, key=lambda m: (-size[m], m))
    while to_keep:
        for member in order:
            if to_keep and kept[member] < size[member]:
                kept[member] += 1
                to_keep -= 1
    back: dict[ids.WorkerId, model.ConnectorsAndTasks] = {}
    for member, moved in wanted.items():
        rest = moved[kept[member]:]
        if rest:
            back[member] = model.ConnectorsAndTasks(
                frozenset(r for task, r in rest if not task),
                frozenset(r for task, r in rest if task))
    return back


def _restored(plan: model.Plan, previous: model.PlanState, snapshot: model.Snapshot,
              back: Mapping[ids.WorkerId, model.ConnectorsAndTasks]) -> model.Plan:
    """``plan`` with ``back`` left assigned to the members that hold it.

    Mirrors what the assignor's round would have produced had it not revoked them: a
    member whose document ends up as last written is not rewritten (its generation
    stays), and its unacknowledged revocations stay as they were.
    """
    members = dict(plan.members)
    state = plan.state
    assignments = dict(state.assignments)
    assigned_at = dict(state.assigned_at)
    revoking = dict(state.revoking)
    changed = set(plan.changed)
    restored = model.EMPTY
    for member, resources in back.items():
        old = members[member]
        assigned = old.assigned.union(resources)
        revoked = old.revoked.difference(resources)
        restored = restored.union(resources)
        report = snapshot.members[member]
        same = (assigned == previous.assignments.get(member)
                and not model.tells_more(
                    previous.revoking.get(member, model.EMPTY), revoked,
                    acknowledged=report.generation >= previous.assigned_at.get(member, 0))
                and not assigned.intersection(model.ConnectorsAndTasks(
                    snapshot.restarts, snapshot.restarts)))
        generation = old.generation
        if same and member in changed:
            changed.discard(member)
            generation = previous.assigned_at.get(member, 0)
        assignments[member] = assigned
        assigned_at[member] = generation
        members[member] = model.MemberPlan(assigned=assigned, revoked=revoked,
                                           generation=generation)
        if revoked and (member in changed or report.generation < generation):
            revoking[member] = revoked
        else:
            revoking.pop(member, None)
    return dataclasses.replace(
        plan, members=members, changed=frozenset(changed),
        unassigned=plan.unassigned.difference(restored),
        state=dataclasses.replace(state, assignments=assignments, assigned_at=assigned_at,
                                  revoking=revoking))


def paced_event(pacing: Pacing, limit: Limit | None) -> tuple[events.Event, ...]:
    """``BalancingPaced`` when this round held balancing moves back."""
    if not pacing.deferred:
        return ()
    return (events.Event(
        "BalancingPaced",
        f"moving {pacing.limit} of {pacing.wanted} resources for balance this round "
        f"(spec.balancing.maxMovesPerRound {limit}); {pacing.deferred} move in later rounds"),)
