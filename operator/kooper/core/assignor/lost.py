"""Stage three, lost: what departed members held, still wanted and held by nobody.

What a departed member held is *lost*: it waits, per origin, for the delay (stage
four) or, under ``kooper``, goes back at once to a member returning under its name.
"""

from __future__ import annotations

from collections.abc import Mapping

from kooper.core import ids, model
from kooper.core.assignor import rules
from kooper.core.assignor.contested import Kept
from kooper.core.assignor.holdings import Round
from kooper.core.assignor.indexes import Union
from kooper.core.assignor.rules import Lost


def lost(r: Round, held: Union, kept: Kept) -> Lost:
    """The lost work of this round, each resource under one origin, the policy's rules
    applied (a returning identity's own work is in ``kept`` already)."""
    previous = r.previous
    result: Lost = dict(previous.lost)
    for member in r.departed:
        gone = previous.assignments.get(member, model.EMPTY).union(
            previous.revoking.get(member, model.EMPTY)
        )
        result[member] = result.get(member, model.EMPTY).union(gone)
    if previous.forgotten and previous.delay is not None:
        # KIP-415: a new leader honours a delay in progress, and every resource
        # it cannot account for is presumed lost (it may come back with its owner).
        result[ids.WorkerId("")] = model.ConnectorsAndTasks(
            frozenset(held.c.free), frozenset(held.t.free)
        )
    _still_lost(r, held, result)
    one_origin_each(result, previous.assignments)
    if r.rules.returning_identity:
        rules.returning_identity(result, r.snapshot.members, kept.connectors, kept.tasks)
    if r.rules.permanent_departure:
        rules.permanent_departure(result, r.snapshot)
    return result


def _still_lost(r: Round, held: Union, lost_: Lost) -> None:
    """Keep, in place, what is still configured and held by nobody (or only by its
    returned origin: ``returned_holding``)."""
    configured = r.configured
    held_c, held_t = held.c.has, held.t.has
    for origin in list(lost_):
        resources = lost_[origin]
        still = model.ConnectorsAndTasks(
            frozenset(
                x for x in resources.connectors & configured.connectors
                if x not in held_c or returned_holding(r, origin, x)
            ),
            frozenset(x for x in resources.tasks & configured.tasks
                      if x not in held_t or returned_holding(r, origin, x)),
        )
        if still:
            lost_[origin] = still
        else:
            del lost_[origin]


def returned_holding(r: Round, origin: ids.WorkerId, resource: str) -> bool:
    """Whether ``origin``, back from a departure, alone holds its lost ``resource``
    without being assigned it (a report from before it was cut off): the work
    stays lost, waiting for the delay, while it is revoked from ``origin``;
    otherwise letting it go would hand it out as free work before the delay ran
    out."""
    mine = r.held.get(origin)
    if mine is None or resource not in mine or resource in r.current[origin]:
        return False
    return not any(resource in held for member, held in r.held.items() if member != origin)


def held_by_other(r: Round, member: ids.WorkerId, resource: str) -> bool:
    """Whether a member other than ``member`` holds ``resource``."""
    return any(resource in held for other, held in r.held.items() if other != member)


def one_origin_each(lost: Lost,
                    assigned: Mapping[ids.WorkerId, model.ConnectorsAndTasks]) -> None:
    """Keep each lost resource under one origin, in place: the first (by name) that had
    it assigned, else the first that had it at all (revoking, or lost before).

    A resource revoked from two members in one document round (one stale, both then
    fenced) was lost twice, and each origin's rule (returning identity, the delay's
    grants) placed it: on two members in one plan. Found by the simulator's hard chaos
    (families 4, seed 21824: an API outage fenced every member, and the new term's
    first plan gave such a task to two of them).
    """
    if len(lost) < 2:
        return
    total = sum(len(r.connectors) + len(r.tasks) for r in lost.values())
    union_c: set[str] = set()
    union_t: set[str] = set()
    for resources in lost.values():
        union_c.update(resources.connectors)
        union_t.update(resources.tasks)
    if total == len(union_c) + len(union_t):
        return  # the common case: nothing lost twice
    origins = sorted(lost)
    owner_c: dict[str, ids.WorkerId] = {}
    owner_t: dict[str, ids.WorkerId] = {}
    for origin in origins:
        had = assigned.get(origin, model.EMPTY)
        for r in lost[origin].connectors & had.connectors:
            owner_c.setdefault(r, origin)
        for r in lost[origin].tasks & had.tasks:
            owner_t.setdefault(r, origin)
    for origin in origins:
        for r in lost[origin].connectors:
            owner_c.setdefault(r, origin)
        for r in lost[origin].tasks:
            owner_t.setdefault(r, origin)
    for origin in origins:
        resources = lost[origin]
        keep = model.ConnectorsAndTasks(
            frozenset(r for r in resources.connectors if owner_c[r] == origin),
            frozenset(r for r in resources.tasks if owner_t[r] == origin))
        if keep:
            lost[origin] = keep
        else:
            del lost[origin]
