"""The last stage, the outcome: the round's assignments as a ``Plan`` and the next state.

Who changed (and so gets a new generation), what each member is told to stop, which
resources get a new epoch, what is left unassigned, and when the leader plans again.
Comprehensions, locals, and ``is`` before ``==``: these run over every member every
round, and most members' sets are the very objects of the last round.
"""

from __future__ import annotations

import operator
from collections.abc import Mapping

from kooper.core import backoff, ids, model
from kooper.core.assignor import groups
from kooper.core.assignor.holdings import Holdings, Round
from kooper.core.assignor.indexes import Union
from kooper.core.assignor.rules import Lost

_CONNECTORS = operator.attrgetter("connectors")
_TASKS = operator.attrgetter("tasks")


def finish(
    r: Round,
    protocol: model.Protocol,
    nxt: Holdings,
    *,
    lost: Lost,
    delay: model.Delay | None,
    eager_revoking: bool = False,
    held_back: model.RevocationBackoff | None = None,
    wanted_revocation: bool = False,
) -> model.Plan:
    """The plan that gives each member ``nxt``."""
    previous, members = r.previous, r.snapshot.members
    revoked = _revoked(r, nxt)
    newly = _newly(r, nxt)
    changed = _changed(r, protocol, nxt, revoked)
    restarted = _restarted(r, nxt, newly)
    changed.update(restarted)
    generation = previous.generation + 1 if changed else previous.generation
    assigned_at = {
        member: generation if member in changed else previous.assigned_at.get(member, 0)
        for member in r.order
    }
    held_back = held_back if held_back is not None else model.RevocationBackoff()
    if changed and not wanted_revocation and delay is None:
        held_back = backoff.settled(held_back)
    state = model.PlanState(
        generation=generation,
        protocol=protocol,
        assignments=dict(nxt),
        assigned_at=assigned_at,
        incarnations={member: members[member].incarnation for member in r.order},
        lost=dict(lost),
        delay=delay,
        epochs=_epochs(previous, newly, restarted),
        epoch_base=previous.epoch_base,
        revoking=_revoking(r, revoked, changed, assigned_at),
        eager_revoking=eager_revoking,
        backoff=held_back,
        shapes=_shapes(r, nxt),
    )
    newly_lost = model.EMPTY
    for member in r.departed:
        newly_lost = newly_lost.union(previous.assignments.get(member, model.EMPTY))
    delay_ms, next_round_at = _next_round(delay, held_back, r.now_ms)
    return model.Plan(
        members=_member_plans(r, nxt, revoked, assigned_at),
        state=state,
        protocol=protocol,
        delay_ms=delay_ms,
        next_round_at_ms=next_round_at,
        changed=frozenset(changed),
        newly_assigned=newly,
        newly_lost=newly_lost.intersection(r.configured),
        unassigned=_unassigned(r, nxt),
    )


def _shapes(r: Round, nxt: Holdings) -> dict[ids.WorkerId, model.Shape]:
    """``PlanState.shapes`` under ``spread``: what this round or an earlier one read of
    the members' task sets, and a read of each set this round made (the ids it moved).
    None once the spread check reads the cache's index instead (``Cache.spread_indexed``):
    a later round without that index reads the sets again, and plans the same."""
    if not r.rules.spread or r.cache.spread_indexed():
        return {}
    known, current = r.doubled_of(), r.current
    shapes: dict[ids.WorkerId, model.Shape] = {}
    for member in r.order:
        tasks = nxt[member].tasks
        shape = known.get(id(tasks))
        if shape is None:
            if tasks is current[member].tasks:
                continue  # neither moved nor read: a later round reads it if it must
            shape = (tasks, groups.doubled_within(r, tasks, current[member].tasks))
        shapes[member] = shape
    return shapes


def _revoked(r: Round, nxt: Holdings) -> Holdings:
    """Per member, what it holds and is not assigned: what it is told to stop."""
    empty, held_of = model.EMPTY, r.held
    return {
        member: empty if (held := held_of[member]) is (assigned := nxt[member])
        else held.difference(assigned)
        for member in r.order
    }


def _newly(r: Round, nxt: Holdings) -> Holdings:
    """Per member, what it is newly assigned (members given nothing new left out)."""
    current_of = r.current
    return {
        member: given
        for member in r.order
        if (assigned := nxt[member]) is not (before := current_of[member])
        and assigned != before
        and (given := assigned.difference(before))
    }


def _changed(r: Round, protocol: model.Protocol, nxt: Holdings,
             revoked: Holdings) -> set[ids.WorkerId]:
    """The members whose document must be rewritten: departed and back, assigned
    something else, or told to stop more than they were (``model.tells_more``)."""
    previous, members = r.previous, r.snapshot.members
    if previous.protocol is not protocol:
        return set(r.order)
    empty, departed = model.EMPTY, r.departed
    was_assigned, was_revoking, was_at = (previous.assignments, previous.revoking,
                                          previous.assigned_at)
    return {
        member
        for member in r.order
        if member in departed
        or (was := was_assigned.get(member)) is None
        or (was is not (now := nxt[member]) and was != now)
        or (
            (told := was_revoking.get(member, empty)) is not (tell := revoked[member])
            and model.tells_more(
                told, tell, acknowledged=members[member].generation
                >= was_at.get(member, 0))
        )
    }


def _restarted(r: Round, nxt: Holdings, newly: Holdings) -> Holdings:
    """Per member, the resources it keeps that must restart in place (new epoch).

    A resource newly handed out this round gets a new epoch anyway, so it is
    not counted twice.
    """
    restarts = r.snapshot.restarts
    if not restarts:
        return {}
    result: Holdings = {}
    for member in r.order:
        kept = nxt[member].difference(newly.get(member, model.EMPTY))
        again = model.ConnectorsAndTasks(kept.connectors & restarts, kept.tasks & restarts)
        if again:
            result[member] = again
    return result


def _epochs(previous: model.PlanState, newly: Holdings,
            restarted: Holdings) -> Mapping[str, int]:
    """Every resource handed out or restarted gets an epoch above any it had, and
    above ``epoch_base`` (a restored leader's floor)."""
    if not newly and not restarted:
        return previous.epochs
    bumped = dict(previous.epochs)
    for resources in (*newly.values(), *restarted.values()):
        for resource in (*resources.connectors, *resources.tasks):
            bumped[resource] = max(bumped.get(resource, 0), previous.epoch_base) + 1
    return bumped


def _revoking(r: Round, revoked: Holdings, changed: set[ids.WorkerId],
              assigned_at: Mapping[ids.WorkerId, int]) -> Holdings:
    """Revocations told and not yet acknowledged (``PlanState.revoking``)."""
    empty, members = model.EMPTY, r.snapshot.members
    return {
        member: gone
        for member, gone in revoked.items()
        if gone is not empty
        and gone
        and (member in changed or members[member].generation < assigned_at[member])
    }


def _member_plans(r: Round, nxt: Holdings, revoked: Holdings,
                  assigned_at: Mapping[ids.WorkerId, int]) -> dict[ids.WorkerId, model.MemberPlan]:
    """Each member's plan, the last round's object when nothing in it changed."""
    known = r.cache.plans
    plans = {
        member: plan_
        if (plan_ := known.get(member)) is not None
        and plan_.assigned is nxt[member]
        and plan_.revoked is revoked[member]
        and plan_.generation == assigned_at[member]
        else model.MemberPlan(
            assigned=nxt[member], revoked=revoked[member], generation=assigned_at[member]
        )
        for member in r.order
    }
    r.cache.plans = plans
    return plans


def _next_round(delay: model.Delay | None, held_back: model.RevocationBackoff,
                now_ms: int) -> tuple[int, int | None]:
    """(the delay members are told, when the leader plans again)."""
    if delay is not None:
        # Members are told the whole remaining delay; the leader plans again when the
        # first lost set is due (``core.delays``: a deadline per departure).
        return max(0, delay.deadline_ms - now_ms), delay.next_ms()
    remaining = backoff.remaining_ms(held_back, now_ms)
    if remaining:
        # Revocations held back (``core.backoff``): the round that may revoke is due then.
        return remaining, held_back.held_until_ms
    return 0, None


def _unassigned(r: Round, nxt: Holdings) -> model.ConnectorsAndTasks:
    """What is configured and in nobody's ``nxt``.

    Assignments never overlap (the barrier), so counting is enough to know whether
    anything is unassigned; the sets are built only when it is.
    """
    counted = sum(map(len, map(_CONNECTORS, nxt.values()))) + sum(
        map(len, map(_TASKS, nxt.values())))
    if counted == len(r.configured):
        return model.EMPTY
    if r.cache.persistent:
        index = r.cache.assigned
        index.sync(nxt)
        return model.ConnectorsAndTasks(frozenset(index.c.free), frozenset(index.t.free))
    return _unassigned_once(r, nxt)


def _unassigned_once(r: Round, nxt: Holdings) -> model.ConnectorsAndTasks:
    """``_unassigned`` without a cache.

    From the holdings' union (``contested.union``) when it is known and nothing is held
    twice: a member whose set is its holding's very object is assigned exactly what
    it holds, so only what nobody holds and what the other members let go can be
    unassigned, and only their new sets can hold it. A round costs what changed.
    """
    contested = r.contested
    if contested is None or contested.c.twice or contested.t.twice:
        index = Union.once(nxt, r.configured)
        return model.ConnectorsAndTasks(frozenset(index.c.free), frozenset(index.t.free))
    held_of = r.held
    parts: list[frozenset[str]] = []
    for kind, is_tasks, configured in ((contested.c, False, r.configured.connectors),
                                       (contested.t, True, r.configured.tasks)):
        candidates = set(kind.free)
        given: set[str] = set()
        for member in r.order:
            mine = nxt[member].tasks if is_tasks else nxt[member].connectors
            held = held_of[member].tasks if is_tasks else held_of[member].connectors
            if mine is not held:
                candidates.update(held.difference(mine))
                given.update(mine)
        candidates.intersection_update(configured)
        parts.append(frozenset(candidates.difference(given)))
    return model.ConnectorsAndTasks(parts[0], parts[1])
