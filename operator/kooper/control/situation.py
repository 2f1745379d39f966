"""Stage 2 of a step: the situation the assignor plans from (pure).

What the Connectors want (and which restarts they ask for), which resources failed
(``control.failures``), whether reassignment is held (``control.rails``), which
members run an outdated revision (``control.rollout``), the ``model.Snapshot`` built
from all of it, and the claims members make on other members' work, which are left
out of it (``control.claims``).
"""

from __future__ import annotations

import dataclasses

from kooper.control import claims, epochs, failures, rails, restarts, rollout, snapshot
from kooper.control.decision import Observation, Situation
from kooper.control.inputs import Caches, Inputs, Memory
from kooper.core import ids


def situation(inputs: Inputs, memory: Memory, seen: Observation, *, now_ms: int,
              caches: Caches) -> Situation:
    """The round's snapshot and what it was built from (see the module docstring)."""
    group, previous, found = inputs.group, memory.persisted.state, seen.found
    wanted = caches.connectors_of(inputs.connectors)
    asked = restarts.requested(inputs.connectors, done=memory.persisted.restarts_done,
                               pending=memory.volatile.restarts_pending, counts=wanted.counts)
    restarting = {r for _, rs in asked.values() for r in rs}
    judged = failures.judge(
        connectors=inputs.connectors, reports=found.reports, held=previous.assignments,
        book=memory.persisted.failures if memory.persisted.failures is not None
        else failures.restore(inputs.connectors),
        task_restarts=memory.persisted.task_restarts if memory.persisted.task_restarts is not None
        else failures.restored_task_restarts(inputs.connectors),
        restarting=restarting, now_ms=now_ms)
    hold = rails.judge(previous, found.members, fraction=group.max_departed_fraction,
                       override=group.release_hold, acted_on=memory.volatile.hold_released)
    revisions = rollout.judge(found.pods, found.members, inputs.rollouts)
    snap = snapshot.build(group, connectors=inputs.connectors, members=found.members,
                          outdated=revisions.outdated, updated=revisions.updated,
                          rolling=revisions.rolling,
                          departed_permanently=(ids.WorkerId(m) for m, p in
                                                seen.permanent.items() if p and not hold.held),
                          restarts=(*restarting, *judged.due, *judged.manual),
                          counts=wanted.counts)
    configured = caches.configured_of(snap)
    unknown = claims.unknown(found.members, given=memory.persisted.given, configured=configured,
                             caches=caches)
    untrue = claims.false(found.members, assigned=previous.assignments,
                          assigned_at=previous.assigned_at, configured=configured,
                          caches=caches)
    seen_members, foreign = claims.foreign(
        claims.merged(unknown, untrue) if untrue else unknown, members=found.members,
        previous=previous, documented=claims.documented(
            found.members, memory.persisted.given, every=memory.persisted.documents is not None))
    if foreign:
        snap = dataclasses.replace(snap, members=seen_members)
    if previous.forgotten and memory.persisted.documents is not None:
        adopted = epochs.unissued(snap.members, memory.persisted.documents)
        if adopted:
            snap = dataclasses.replace(snap, restarts=snap.restarts | adopted)
    return Situation(wanted=wanted, restarts=asked, judged=judged, hold=hold, snap=snap,
                     configured=configured, unknown=unknown, foreign=foreign)
