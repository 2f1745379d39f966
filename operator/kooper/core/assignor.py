"""The assignor: one pure function, ``plan``, computes a rebalance round.

Theory of operation (KIP-415, "incremental cooperative rebalancing with deferred
resolution of imbalance", Design II):

1. **Holdings.** Each live member *holds* what it may run (its assignment as last
   written), what it reports running, and what it was told to stop but has not
   yet acknowledged. A member whose process restarted (new incarnation) holds
   only what it reports.
2. **The barrier.** A resource held by two live members is in nobody's
   assignment; a resource held by anyone is never handed to someone else. A
   move therefore takes two rounds: revoke, wait for the owner's report (or its
   departure), then assign.
3. **Lost work.** What a departed member held is *lost*. With a delay ``d > 0``
   and none pending, the leader schedules a rebalance at ``now + d`` and leaves
   lost work unassigned; members that join empty meanwhile are *candidates*.
   When the deadline passes, lost work goes round-robin to the candidates (or,
   without candidates, is balanced like new work). Every round in between
   reports the remaining delay ``d'``.
4. **Balance.** With no delay pending, members above their target revoke just
   enough for the group to end balanced; free work (new, released lost, or
   acknowledged revocations) goes to the least-loaded members (``balance``).
5. **Stickiness.** Nothing else moves: a round with no membership or
   configuration change returns the same assignment.

Policies. ``kip415`` reproduces the KIP text, its scenario tables being golden
tests, and Kafka's current assignor where they pin nothing (connectors and tasks
balanced each on their own; lost work placed as one pool, as the tables do). ``kooper``
adds four rules, each named below: ``_rule_returning_identity``,
``_rule_permanent_departure``, ``_rule_rollout`` and persisted leader state (the shell keeps
``PlanState`` in WorkerGroup status; only ``forget`` models a KIP-415 leader
change). It also balances connectors and tasks separately and spreads each
connector's tasks.

Protocols. ``eager`` revokes everything on any change, waits until every member
owns nothing, then assigns from scratch (round-robin over sorted members, as
Kafka's ``EagerAssignor``). ``compatible`` is cooperative while every member
speaks it; an eager-only member downgrades the group with one stop-the-world
revocation (KIP-415's double rebalance), and the group upgrades in the round
after the last one leaves.
"""

from __future__ import annotations

import heapq
import itertools
import operator
from collections import Counter, defaultdict
from collections.abc import Callable, Container, Iterable, Mapping
from collections.abc import Set as AbstractSet

from kooper.core import backoff, balance, delays, ids, model

Holdings = dict[ids.WorkerId, model.ConnectorsAndTasks]
_HeldMemo = tuple[
    model.ConnectorsAndTasks, model.ConnectorsAndTasks, model.ConnectorsAndTasks,
    model.ConnectorsAndTasks,
]
"""(owned, current, unacked, held) of a member in the last round."""


def forget(state: model.PlanState) -> model.PlanState:
    """What a new KIP-415 leader knows: the generation and the pending delay, nothing else."""
    delay = model.Delay(state.delay.deadline_ms) if state.delay else None
    return model.PlanState(
        generation=state.generation,
        protocol=state.protocol,
        delay=delay,
        epochs=state.epochs,
        epoch_base=state.epoch_base,
        forgotten=True,
    )


def group_protocol(snapshot: model.Snapshot) -> model.Protocol:
    """The protocol the group runs: eager if configured so or if any member speaks only eager."""
    if snapshot.settings.protocol is model.Protocol.EAGER:
        return model.Protocol.EAGER
    compatible = model.Protocol.COMPATIBLE  # (``Member.cooperative``, without a call each)
    if any(compatible not in member.protocols for member in snapshot.members.values()):
        return model.Protocol.EAGER
    return model.Protocol.COMPATIBLE


def plan(
    snapshot: model.Snapshot,
    previous: model.PlanState,
    *,
    now_ms: int,
    configured: model.ConnectorsAndTasks | None = None,
    cache: Cache | None = None,
) -> model.Plan:
    """Compute one rebalance round. Pure: same inputs, same plan.

    ``configured`` may be passed when the caller already has ``snapshot.configured()``.
    ``cache`` (one per group, reused every round) makes a round cost what changed
    since the last one instead of the whole group; it never changes the plan.
    """
    wanted = configured if configured is not None else snapshot.configured()
    round_ = _Round(snapshot, previous, now_ms, wanted,
                    cache if cache is not None else Cache(persistent=False))
    protocol = group_protocol(snapshot)
    if protocol is model.Protocol.EAGER:
        return round_.eager()
    return round_.cooperative()


def _fenced_since_assigned(member: model.Member, previous: model.PlanState) -> bool:
    """A member that self-fenced after applying its current assignment lost all of it.

    It stopped everything when it could not renew its Lease and will start nothing
    until it receives a newer assignment, so it is treated like a member that left
    and came back: what it held is lost (and, under ``kooper``, returned to it at once
    with a new generation). Once a newer assignment is out (``assigned_at`` above the
    generation it reports), the fence is already handled.
    """
    return member.fenced and member.generation >= previous.assigned_at.get(member.id, 0)


_CONNECTORS = operator.attrgetter("connectors")
_TASKS = operator.attrgetter("tasks")


def _one_origin_each(lost: dict[ids.WorkerId, model.ConnectorsAndTasks],
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


def _spread_is_moot(delay: model.Delay | None, free_t: AbstractSet[str], nxt_t: _Draft) -> bool:
    """Whether ``cooperative`` may skip asking if the draft is spread.

    While a delay is pending nothing is revoked, and with no task placed or edited
    every task in the draft is one its member holds: a move towards spread could only
    revoke, so the answer cannot change the plan. Not asking saves a pass over every
    task in the rounds of a delay.
    """
    return delay is not None and not free_t and not nxt_t.edited


def _same(a: model.ConnectorsAndTasks, b: model.ConnectorsAndTasks) -> bool:
    """Equality, answering at once for the same object (the usual case in big groups)."""
    return a is b or a == b


class _Round:
    """The working sets of one ``plan`` call (never escapes ``plan``)."""

    def __init__(
        self,
        snapshot: model.Snapshot,
        previous: model.PlanState,
        now_ms: int,
        configured: model.ConnectorsAndTasks,
        cache: Cache,
    ) -> None:
        self.snapshot = snapshot
        self.previous = previous
        self.now_ms = now_ms
        self.cache = cache
        cache.configure(configured)
        self.configured = configured
        self.policy = snapshot.settings.policy
        members = snapshot.members
        self.order = sorted(members)
        self.receivers = self._rule_rollout()
        # Departed: gone, back under the same name as a new process, or fenced.
        incarnations = previous.incarnations
        self.departed = {
            member
            for member in previous.assignments
            if (report := members.get(member)) is None
            or ((was := incarnations.get(member, "")) and report.incarnation != was)
            or (report.fenced and _fenced_since_assigned(report, previous))
        }
        self.current: Holdings = {}
        self.held: Holdings = {}
        current_of, held_of = self.current, self.held
        # Updated in place: an entry only says what a member's holding was for given
        # objects, so one left by a member that has gone is never wrong, only unused.
        memo = cache.held_of
        empty = model.EMPTY
        departed = self.departed
        was_assigned, was_revoking = previous.assignments, previous.revoking
        assigned_at = previous.assigned_at
        forgotten = previous.forgotten
        for member in self.order:
            report = members[member]
            owned = report.owned
            current = was_assigned.get(member)
            if current is None or member in departed:
                current = owned if forgotten else empty
                unacked = empty
            elif member in was_revoking and report.generation < assigned_at.get(member, 0):
                unacked = was_revoking[member]
            else:
                unacked = empty
            current_of[member] = current
            known = memo.get(member)
            if (
                known is not None
                and known[0] is owned
                and known[1] is current
                and known[2] is unacked
            ):
                held_of[member] = known[3]  # same objects as a recent round: same holding
                continue
            if (unacked is empty or not unacked) and (owned is current or owned == current):
                held = current  # settled: the common case, no copy
            else:
                held = current.union(owned).union(unacked)
            held_of[member] = held
            memo[member] = (owned, current, unacked, held)
        if len(memo) > 2 * len(members) + 16:  # members that left: forget them
            cache.held_of = {member: memo[member] for member in members if member in memo}
        self.doubled_of: dict[int, tuple[frozenset[str], _Doubled]] = {}
        """``_doubled`` of the task sets seen this round, by ``id`` (holding the set)."""
        self.contested: _Union | None = None
        """``_contested``'s answer, once asked without a persistent cache."""

    # -- shared steps -------------------------------------------------------------

    def _contested(self) -> _Union:
        """The union of all live members' holdings (who holds what, and what twice)."""
        if not self.cache.persistent:
            self.contested = _Union.once(self.held, self.configured)
            return self.contested
        index = self.cache.held
        index.sync(self.held)
        return index

    def _finish(
        self,
        protocol: model.Protocol,
        nxt: Holdings,
        *,
        lost: Mapping[ids.WorkerId, model.ConnectorsAndTasks],
        delay: model.Delay | None,
        eager_revoking: bool = False,
        held_back: model.RevocationBackoff | None = None,
        wanted_revocation: bool = False,
    ) -> model.Plan:
        previous = self.previous
        members = self.snapshot.members
        # Comprehensions, locals, and ``is`` before ``==``: these run over every member
        # every round, and most members' sets are the very objects of the last round.
        empty = model.EMPTY
        order = self.order
        held_of, current_of = self.held, self.current
        was_assigned, was_revoking = previous.assignments, previous.revoking
        departed = self.departed
        revoked: Holdings = {
            member: empty if (held := held_of[member]) is (assigned := nxt[member])
            else held.difference(assigned)
            for member in order
        }
        newly: Holdings = {
            member: given
            for member in order
            if (assigned := nxt[member]) is not (before := current_of[member])
            and assigned != before
            and (given := assigned.difference(before))
        }
        if previous.protocol is not protocol:
            changed = set(order)
        else:
            was_at = previous.assigned_at
            changed = {
                member
                for member in order
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
        restarted = self._restarted(nxt, newly)
        changed.update(restarted)
        generation = previous.generation + 1 if changed else previous.generation
        epochs: Mapping[str, int] = previous.epochs
        if newly or restarted:
            bumped = dict(previous.epochs)
            for resources in (*newly.values(), *restarted.values()):
                for resource in (*resources.connectors, *resources.tasks):
                    bumped[resource] = max(bumped.get(resource, 0), previous.epoch_base) + 1
            epochs = bumped
        assigned_at = {
            member: generation if member in changed else previous.assigned_at.get(member, 0)
            for member in self.order
        }
        revoking = {
            member: gone
            for member, gone in revoked.items()
            if gone is not empty
            and gone
            and (member in changed or members[member].generation < assigned_at[member])
        }
        held_back = held_back if held_back is not None else model.RevocationBackoff()
        if changed and not wanted_revocation and delay is None:
            held_back = backoff.settled(held_back)
        state = model.PlanState(
            generation=generation,
            protocol=protocol,
            assignments=dict(nxt),
            assigned_at=assigned_at,
            incarnations={member: members[member].incarnation for member in self.order},
            lost=dict(lost),
            delay=delay,
            epochs=epochs,
            epoch_base=previous.epoch_base,
            revoking=revoking,
            eager_revoking=eager_revoking,
            backoff=held_back,
        )
        known = self.cache.plans
        plans = {
            member: plan_
            if (plan_ := known.get(member)) is not None
            and plan_.assigned is nxt[member]
            and plan_.revoked is revoked[member]
            and plan_.generation == assigned_at[member]
            else model.MemberPlan(
                assigned=nxt[member], revoked=revoked[member], generation=assigned_at[member]
            )
            for member in order
        }
        self.cache.plans = plans
        # Assignments never overlap (the barrier), so counting is enough to know
        # whether anything is unassigned; build the sets only when it is.
        unassigned = model.EMPTY
        counted = sum(map(len, map(_CONNECTORS, nxt.values()))) + sum(
            map(len, map(_TASKS, nxt.values()))
        )
        if counted != len(self.configured):
            if self.cache.persistent:
                index = self.cache.assigned
                index.sync(nxt)
                unassigned = model.ConnectorsAndTasks(frozenset(index.c.free),
                                                      frozenset(index.t.free))
            else:
                unassigned = self._unassigned(nxt)
        newly_lost = model.EMPTY
        for member in self.departed:
            newly_lost = newly_lost.union(previous.assignments.get(member, model.EMPTY))
        next_round_at: int | None
        if delay is not None:
            # Members are told the whole remaining delay; the leader plans again when the
            # first lost set is due (``core.delays``: a deadline per departure).
            delay_ms, next_round_at = max(0, delay.deadline_ms - self.now_ms), delay.next_ms()
        elif backoff.remaining_ms(held_back, self.now_ms):
            # Revocations held back (``core.backoff``): the round that may revoke is due then.
            delay_ms, next_round_at = backoff.remaining_ms(held_back, self.now_ms), (
                held_back.held_until_ms)
        else:
            delay_ms, next_round_at = 0, None
        return model.Plan(
            members=plans,
            state=state,
            protocol=protocol,
            delay_ms=delay_ms,
            next_round_at_ms=next_round_at,
            changed=frozenset(changed),
            newly_assigned=newly,
            newly_lost=newly_lost.intersection(self.configured),
            unassigned=unassigned,
        )

    def _unassigned(self, nxt: Holdings) -> model.ConnectorsAndTasks:
        """What is configured and in nobody's ``nxt``, without a cache.

        From the holdings' union (``_contested``) when it is known and nothing is held
        twice: a member whose set is its holding's very object is assigned exactly what
        it holds, so only what nobody holds and what the other members let go can be
        unassigned, and only their new sets can hold it. A round costs what changed.
        """
        contested = self.contested
        if contested is None or contested.c.twice or contested.t.twice:
            index = _Union.once(nxt, self.configured)
            return model.ConnectorsAndTasks(frozenset(index.c.free), frozenset(index.t.free))
        held_of = self.held
        parts: list[frozenset[str]] = []
        for kind, get, configured in (
            (contested.c, _CONNECTORS, self.configured.connectors),
            (contested.t, _TASKS, self.configured.tasks),
        ):
            candidates = set(kind.free)
            given: set[str] = set()
            for member in self.order:
                mine, held = get(nxt[member]), get(held_of[member])
                if mine is not held:
                    candidates.update(held.difference(mine))
                    given.update(mine)
            candidates.intersection_update(configured)
            parts.append(frozenset(candidates.difference(given)))
        return model.ConnectorsAndTasks(parts[0], parts[1])

    def _restarted(self, nxt: Holdings, newly: Holdings) -> Holdings:
        """Per member, the resources it keeps that must restart in place (new epoch).

        A resource newly handed out this round gets a new epoch anyway, so it is
        not counted twice.
        """
        restarts = self.snapshot.restarts
        if not restarts:
            return {}
        result: Holdings = {}
        for member in self.order:
            kept = nxt[member].difference(newly.get(member, model.EMPTY))
            again = model.ConnectorsAndTasks(
                kept.connectors & restarts, kept.tasks & restarts
            )
            if again:
                result[member] = again
        return result

    # -- eager ----------------------------------------------------------------------

    def eager(self) -> model.Plan:
        """Stop the world on any change, then assign from scratch."""
        previous = self.previous
        members = self.order
        anything_held = any(self.held[m] for m in members)
        joined = any(m not in previous.assignments for m in members)
        union_c: set[str] = set()
        union_t: set[str] = set()
        for member in members:
            union_c.update(self.current[member].connectors)
            union_t.update(self.current[member].tasks)
        config_changed = (
            union_c != self.configured.connectors or union_t != self.configured.tasks
        )
        must_rebalance = (
            previous.eager_revoking
            or previous.protocol is not model.Protocol.EAGER
            or bool(self.departed)
            or joined
            or config_changed
            or previous.forgotten
        )
        empty: Holdings = {member: model.EMPTY for member in members}
        if not must_rebalance:
            return self._finish(model.Protocol.EAGER, dict(self.current), lost={}, delay=None)
        if anything_held:
            # Round one of two: everybody stops everything (the stop-the-world barrier).
            return self._finish(model.Protocol.EAGER, empty, lost={}, delay=None,
                                eager_revoking=True)
        return self._finish(model.Protocol.EAGER, self._from_scratch(), lost={}, delay=None)

    def _from_scratch(self) -> Holdings:
        """Kafka's eager assignment: one iterator over sorted members, connectors then tasks."""
        members = self.order
        if not members:
            return {}
        connectors: dict[ids.WorkerId, list[str]] = {m: [] for m in members}
        tasks: dict[ids.WorkerId, list[str]] = {m: [] for m in members}
        position = 0
        names = sorted(self.snapshot.connectors)
        for name in names:
            connectors[members[position % len(members)]].append(name)
            position += 1
        for name in names:
            for number in range(self.snapshot.connectors[name]):
                tasks[members[position % len(members)]].append(f"{name}-{number}")
                position += 1
        return {m: model.ConnectorsAndTasks.of(connectors[m], tasks[m]) for m in members}

    # -- cooperative ------------------------------------------------------------------

    def cooperative(self) -> model.Plan:
        """Incremental cooperative rebalancing with deferred resolution of imbalance."""
        previous = self.previous
        configured = self.configured
        held = self._contested()
        held_c, held_t = held.c.has, held.t.has
        twice = held.c.twice | held.t.twice
        # What each member keeps before balancing: its assignment, less what is
        # contested or no longer configured. Most members keep everything: their
        # sets are shared, not copied (``_Draft``), which keeps big rounds cheap.
        bad_c = held.c.outside | {r for r in twice if r in held_c}
        bad_t = held.t.outside | {r for r in twice if r in held_t}
        nxt_c = _Draft()
        nxt = _Draft()
        current_of = self.current
        nxt_c.base = {
            member: current.connectors
            if not bad_c or bad_c.isdisjoint(current.connectors)
            else current.connectors - bad_c
            for member, current in current_of.items()
        }
        nxt.base = {
            member: current.tasks
            if not bad_t or bad_t.isdisjoint(current.tasks)
            else current.tasks - bad_t
            for member, current in current_of.items()
        }

        # Lost work: what departed members held, still wanted and held by nobody.
        lost: dict[ids.WorkerId, model.ConnectorsAndTasks] = dict(previous.lost)
        for member in self.departed:
            gone = previous.assignments.get(member, model.EMPTY).union(
                previous.revoking.get(member, model.EMPTY)
            )
            lost[member] = lost.get(member, model.EMPTY).union(gone)
        if previous.forgotten and previous.delay is not None:
            # KIP-415: a new leader honours a delay in progress, and every resource
            # it cannot account for is presumed lost (it may come back with its owner).
            lost[ids.WorkerId("")] = model.ConnectorsAndTasks(
                frozenset(held.c.free), frozenset(held.t.free)
            )
        for origin in list(lost):
            resources = lost[origin]
            still = model.ConnectorsAndTasks(
                frozenset(
                    r for r in resources.connectors & configured.connectors
                    if r not in held_c or self._returned_holding(origin, r)
                ),
                frozenset(r for r in resources.tasks & configured.tasks
                          if r not in held_t or self._returned_holding(origin, r)),
            )
            if still:
                lost[origin] = still
            else:
                del lost[origin]

        _one_origin_each(lost, previous.assignments)
        if self.policy is model.Policy.KOOPER:
            self._rule_returning_identity(lost, nxt_c, nxt)
            self._rule_permanent_departure(lost)

        resolution = delays.resolve(
            lost=lost,
            previous=previous.delay,
            departed=self.departed,
            max_delay_ms=self.snapshot.settings.max_delay_ms,
            now_ms=self.now_ms,
            policy=self.policy,
            live=self.order,
            # Only a round with lost work reads this list (``resolve`` returns first).
            empty_members=[
                m for m in self.order
                if not nxt_c.get(m) and not nxt.get(m) and not self.held[m]
            ] if lost else [],
            grace_ms=self.snapshot.grace_ms,
        )
        delay = resolution.delay
        for member, resources in resolution.grants.items():
            # Never what another member still holds (a returned member letting go of
            # its own lost work: ``_returned_holding``); it is placed once let go.
            nxt_c.edit(member).update(r for r in resources.connectors
                                      if r not in held_c or not self._held_by_other(member, r))
            nxt.edit(member).update(r for r in resources.tasks
                                    if r not in held_t or not self._held_by_other(member, r))
        released = model.EMPTY
        for origin in resolution.released:
            # Placed this round: handed to candidates or balanced as free work.
            released = released.union(lost.pop(origin))
        deferred = model.EMPTY
        for resources in lost.values():
            deferred = deferred.union(resources)

        free_c = frozenset(held.c.free.difference(deferred.connectors))
        free_t = frozenset(held.t.free.difference(deferred.tasks))
        # Work returned to its identity or granted to candidates is placed already;
        # members whose sets were not edited only hold what they held.
        for member in nxt_c.edited:
            if free_c:
                free_c -= nxt_c.edited[member]
        for member in nxt.edited:
            if free_t:
                free_t -= nxt.edited[member]

        wanted = False
        rolling = self.receivers is not None
        if delay is not None or rolling:
            # KIP-415: no revocation for balance while a delay is pending; and under
            # ``kooper`` none while a rollout is in progress (``_rule_rollout``).
            may_revoke, held_back = False, backoff.deferred(previous.backoff)
        else:
            wanted = bool(self.order) and self._wants_revocation(nxt_c, nxt)
            may_revoke, held_back = backoff.decide(
                previous.backoff,
                wants_revocation=wanted,
                now_ms=self.now_ms,
                max_delay_ms=self.snapshot.settings.max_delay_ms,
            )
        if self.order:
            if self.policy is model.Policy.KOOPER:
                before = nxt.copy()
                self._balance_separately(nxt_c, nxt, free_c, free_t, balancing=may_revoke)
                if (not rolling and not _spread_is_moot(delay, free_t, nxt)
                        and not self._spread(self._projected(before, nxt))):
                    # Placement could not keep every connector spread: move towards a
                    # shape that is balanced and spread (``balance.spread_target``).
                    # Revoking for it is a balancing revocation: paced by the backoff,
                    # never while a delay is pending, and only through the barrier.
                    shaped, revokes = self._toward_spread(before, free_t)
                    if revokes and delay is None and not wanted:
                        wanted = True
                        may_revoke, held_back = backoff.decide(
                            previous.backoff,
                            wants_revocation=True,
                            now_ms=self.now_ms,
                            max_delay_ms=self.snapshot.settings.max_delay_ms,
                        )
                    if not revokes or (delay is None and may_revoke):
                        nxt = shaped
            else:
                # KIP-415's text places lost work (and what a new leader finds unowned)
                # over connectors and tasks as one pool; its tables pin that. Everything
                # else follows Kafka's current assignor: each kind balanced on its own.
                if self.snapshot.settings.max_delay_ms <= 0:
                    # No delay: Kafka reassigns lost work as new, each kind on its own.
                    pooled_c = pooled_t = frozenset[str]()
                elif previous.forgotten:
                    # A new leader cannot tell lost work from new. It counts as lost
                    # what was assigned before (it has an epoch) or belongs to a
                    # connector some member still runs part of, and nobody owns now.
                    seen = previous.epochs
                    running = {
                        name
                        for holding in self.held.values()
                        for name in (*holding.connectors, *map(ids.task_connector, holding.tasks))
                    }
                    pooled_c = frozenset(r for r in free_c if r in seen or r in running)
                    pooled_t = frozenset(
                        r for r in free_t
                        if r in seen or ids.task_connector(r) in running
                    )
                else:
                    pooled_c = free_c & released.connectors
                    pooled_t = free_t & released.tasks
                self._balance_separately(
                    nxt_c, nxt, free_c - pooled_c, free_t - pooled_t, balancing=may_revoke,
                    spread=False,
                )
                if pooled_c or pooled_t:
                    self._place_as_one_pool(nxt_c, nxt, pooled_c, pooled_t)

        result: Holdings = dict(current_of)  # members whose sets were not edited
        touched = (
            self.order if bad_c or bad_t else sorted(nxt_c.edited.keys() | nxt.edited.keys())
        )
        for member in touched:
            current = current_of[member]
            connectors, tasks = nxt_c.frozen(member), nxt.frozen(member)
            # ``is`` first: frozenset equality does not shortcut on identity.
            if (connectors is current.connectors or connectors == current.connectors) and (
                tasks is current.tasks or tasks == current.tasks
            ):
                result[member] = current
            else:
                result[member] = model.ConnectorsAndTasks(connectors, tasks)
        return self._finish(
            model.Protocol.COMPATIBLE, result, lost=lost, delay=delay, held_back=held_back,
            wanted_revocation=wanted,
        )

    # -- the kooper policy's rules ---------------------------------------------------

    def _rule_returning_identity(
        self,
        lost: dict[ids.WorkerId, model.ConnectorsAndTasks],
        nxt_c: _Draft,
        nxt_t: _Draft,
    ) -> None:
        """A member back under its old name gets its lost work at once, no delay.

        Kubernetes tells us what Kafka cannot: a StatefulSet pod that restarts keeps
        its name, so the resources lost with its previous incarnation are its own.
        """
        for member in sorted(lost.keys() & self.snapshot.members.keys()):  # in member order
            own = lost.pop(member)
            if own:
                nxt_c.edit(member).update(own.connectors)
                nxt_t.edit(member).update(own.tasks)

    def _rule_rollout(self) -> frozenset[ids.WorkerId] | None:
        """During a rollout, free work goes to updated members; balancing waits.

        Kubernetes says which members a rollout is about to replace (``Snapshot.outdated``)
        and which already run the update revision (``Snapshot.updated``): see
        ``control.rollout``. While any outdated member is live (or ``Snapshot.rolling``
        says a roll is starting a pod), free work (a planned
        departure's, released lost work, new work) goes to the updated members (else
        to members that are not outdated, else to anyone), least loaded first; and no
        member revokes for balance: the roll's next departure fills the member that
        came back last, and balancing resumes once nobody is outdated. Returns the
        members that may receive free work (None: everyone, no rollout).
        """
        snapshot = self.snapshot
        if self.policy is not model.Policy.KOOPER or not (snapshot.outdated
                                                          or snapshot.rolling):
            return None
        live = snapshot.members
        outdated = snapshot.outdated
        if not snapshot.rolling and not any(member in live for member in outdated):
            return None
        updated = frozenset(m for m in snapshot.updated if m in live and m not in outdated)
        if updated:
            return updated
        others = frozenset(m for m in live if m not in outdated)
        return others or frozenset(live)

    def _returned_holding(self, origin: ids.WorkerId, resource: str) -> bool:
        """Whether ``origin``, back from a departure, alone holds its lost ``resource``
        without being assigned it (a report from before it was cut off): the work
        stays lost, waiting for the delay, while it is revoked from ``origin``;
        otherwise letting it go would hand it out as free work before the delay ran
        out."""
        mine = self.held.get(origin)
        if mine is None or resource not in mine or resource in self.current[origin]:
            return False
        return not any(resource in held for member, held in self.held.items()
                       if member != origin)

    def _held_by_other(self, member: ids.WorkerId, resource: str) -> bool:
        """Whether a member other than ``member`` holds ``resource``."""
        return any(resource in held for other, held in self.held.items() if other != member)

    def _rule_permanent_departure(self, lost: dict[ids.WorkerId, model.ConnectorsAndTasks]) -> None:
        """Work of a member known not to return (scale-down) is reassigned now.

        Waiting out the delay for a pod whose ordinal was scaled away only leaves
        its work stopped; drop it from ``lost`` so it is balanced as free work.
        """
        for member in self.snapshot.departed_permanently:
            lost.pop(member, None)

    # -- balancing ---------------------------------------------------------------------

    def _wants_revocation(self, nxt_c: _Draft, nxt_t: _Draft) -> bool:
        """Whether balancing would stop something a member runs (``core.backoff`` asks).

        Trimming what a member was only handed this round stops nothing, so it is
        not a revocation.
        """
        held = self.held
        # Both policies balance connectors and tasks each on their own (as Kafka does).
        for draft, total, kind in (
            (nxt_c, len(self.configured.connectors), "connectors"),
            (nxt_t, len(self.configured.tasks), "tasks"),
        ):
            counts = balance.revocation_counts(draft.sizes(), total, self._moved(draft))
            for member, count in counts.items():
                has = getattr(held[member], kind)
                if count > sum(1 for r in draft.get(member) if r not in has):
                    return True
        return False

    def _moved(self, draft: _Draft) -> Callable[[ids.WorkerId, int], int] | None:
        """``kooper``: the epoch of a member's ``n``-th least handed out resource in
        ``draft`` (``balance.revocation_counts`` keeps at ``hi`` the members whose work
        moved least); ``kip415``: None (Kafka's order)."""
        if self.policy is not model.Policy.KOOPER:
            return None
        epochs = self.previous.epochs

        def moved(member: ids.WorkerId, n: int) -> int:
            resources = draft.get(member)
            largest = len(resources) - n + 1  # the n-th smallest is the this-th largest
            if n <= 0 or largest <= 0:
                return 0
            values = map(epochs.get, resources, itertools.repeat(0))
            return max(values) if largest == 1 else heapq.nlargest(largest, values)[-1]

        return moved

    def _spread(self, draft: _Draft) -> bool:
        """Whether every connector's tasks are spread in ``draft`` (``balance.spread_ok``)."""
        sizes = self.snapshot.connectors
        members = len(self.order)
        if members <= 1:
            return True
        if self.cache.persistent and any(self.cache.groups.sets.values()):
            # The per-connector index, once a round that handed work out built it (or
            # ``shell.warmup`` did); until then the one pass below.
            index = self.cache.groups
            index.sync(draft.base)
            changed = {m: draft.edited[m] for m in draft.edited}
            return index.all_spread(changed, sizes, members)
        # One pass, no index: a member holding at most one task of each connector can
        # only break spread where it holds more than ``n // k``, which then is 0, and
        # a connector's ``n`` tasks never have more than ``n`` holders. Only members
        # holding two of one connector are counted.
        over = Counter[str]()
        for member in self.order:
            groups = self._doubled(draft.get(member))
            if groups is None:
                continue
            for group, count in groups.items():
                floor, extra = divmod(sizes.get(group, 0), members)
                if count > floor:
                    if count > floor + 1 or not extra:
                        return False
                    over[group] += 1
        return all(n <= sizes.get(g, 0) % members for g, n in over.items())

    @staticmethod
    def _connectors(tasks: AbstractSet[str]) -> _Connectors:
        """The connectors of ``tasks``: a set while each has at most one task in it, else
        how many each has (in first-seen order, as ``Counter`` over the tasks)."""
        names: list[str] = list(ids.task_connectors(tasks))
        distinct = set(names)
        return distinct if len(distinct) == len(names) else Counter(names)

    def _doubled(self, tasks: AbstractSet[str], held: _Connectors | None = None) -> _Doubled:
        """How many tasks of each connector ``tasks`` has if it has two of one, else None.

        A frozen set is parsed once a round (``held``: its ``_connectors``, if known):
        ``_place_spread`` and ``_spread`` ask about the same sets, the thousand members
        nobody edited. Only the answer is kept, not the parsed names.
        """
        if isinstance(tasks, frozenset):
            known = self.doubled_of.get(id(tasks))
            if known is not None:
                return known[1]
        if held is None:
            held = self._connectors(tasks)
        doubled = held if isinstance(held, Counter) else None
        if isinstance(tasks, frozenset):
            self.doubled_of[id(tasks)] = (tasks, doubled)  # holding the set: ids stay unique
        return doubled

    def _count_groups(
        self, holdings: Mapping[ids.WorkerId, AbstractSet[str]], groups: AbstractSet[str]
    ) -> dict[str, Counter[ids.WorkerId]]:
        """``balance.count_groups(holdings, groups)``, from each set's ``_connectors``."""
        wanted = set(groups)
        counts: dict[str, Counter[ids.WorkerId]] = {group: Counter() for group in wanted}
        if not wanted:
            return counts
        # Each (group, member) is counted once: set, not added (no ``Counter.__missing__``).
        for member, tasks in holdings.items():
            held = self._connectors(tasks)
            self._doubled(tasks, held)
            if isinstance(held, Counter):
                for group, count in held.items():
                    if group in wanted:
                        counts[group][member] = count
            else:
                for group in held.intersection(wanted):
                    counts[group][member] = 1
        return counts

    def _projected(self, before: _Draft, after: _Draft) -> _Draft:
        """``after`` as it will be once this round's revocations are acknowledged and placed.

        Balancing revokes in one round and places in the next; whether the group ends
        spread is a question about that end, so it is asked of the projection.
        """
        revoked: set[str] = set()
        for member in after.edited:
            gone = before.get(member) - after.get(member)
            if gone:
                revoked.update(gone & self.held[member].tasks)
        if not revoked:
            return after
        projected = after.copy()
        self._place_spread(projected, revoked)
        return projected

    def _toward_spread(self, draft: _Draft, free_t: frozenset[str]) -> tuple[_Draft, bool]:
        """``draft`` moved to ``balance.spread_target``: what to revoke, and free work placed.

        Returns the new draft and whether it revokes anything a member holds (a
        balancing revocation). Excess a member was only handed this round goes back to
        the free work first; held excess is revoked, highest task numbers first, and its
        place is filled once the owner acknowledges (the barrier).
        """
        sizes = {g: n for g, n in self.snapshot.connectors.items() if n > 0}
        shaped = draft.copy()
        holdings = shaped.holdings()
        counts = balance.count_groups(holdings, sizes)
        epochs = self.previous.epochs

        sorted_of: dict[ids.WorkerId, dict[str, list[str]]] = {}

        def order(member: ids.WorkerId, group: str) -> list[str]:
            # Unheld first (trimming those stops nothing), then those handed out most
            # often (work that already moved, e.g. during a rollout, moves again before
            # work that never did), then the highest numbers: the last ones go.
            groups = sorted_of.get(member)
            if groups is None:
                groups = sorted_of[member] = defaultdict(list)
                for task in holdings[member]:
                    groups[balance.task_group(task)].append(task)
            tasks = groups[group]
            held = self.held[member].tasks
            return sorted(tasks, key=lambda t: (t not in held, epochs.get(t, 0),
                                                model.resource_sort_key(t)))

        def moved(group: str, member: ids.WorkerId, floor: int) -> int:
            return epochs.get(order(member, group)[floor], 0)

        target = balance.spread_target(counts, sizes, self.order, shaped.sizes(), moved)
        free = set(free_t)
        revokes = False
        for member in self.order:
            excess = {
                g: n - target.get(g, {}).get(member, 0)
                for g, counter in counts.items()
                if (n := counter.get(member, 0)) > target.get(g, {}).get(member, 0)
            }
            if not excess:
                continue
            held = self.held[member].tasks
            edit = shaped.edit(member)
            for group, count in excess.items():
                ordered = order(member, group)
                for task in ordered[len(ordered) - count:]:
                    edit.discard(task)
                    counts[group][member] -= 1
                    if task in held:
                        revokes = True
                    else:
                        free.add(task)
        by_group_free: dict[str, list[str]] = defaultdict(list)
        for task in sorted(free, key=model.resource_sort_key):
            by_group_free[balance.task_group(task)].append(task)
        leftover: list[str] = []
        for group, waiting in by_group_free.items():
            row = target.get(group, {})
            counter = counts.get(group, Counter())
            queue = iter(waiting)
            for member in self.order:
                for _ in range(row.get(member, 0) - counter.get(member, 0)):
                    placed = next(queue, None)
                    if placed is None:
                        break
                    shaped.edit(member).add(placed)
            leftover.extend(queue)
        if leftover:  # not configured per the target (never expected): place by load
            given = balance.allocate(leftover, shaped.sizes(), total=len(self.configured.tasks))
            for member, resources in given.items():
                shaped.edit(member).update(resources)
        return shaped, revokes

    @staticmethod
    def _trim(
        draft: _Draft,
        member: ids.WorkerId,
        held: frozenset[str],
        count: int,
        pick: Callable[[Iterable[str], int], list[str]],
    ) -> frozenset[str]:
        """Take ``count`` resources off a member's draft; return those it did not hold.

        What the member was only handed this round (its own lost work, a candidate's
        grant) goes first and goes back to the free work: trimming it stops nothing,
        so another member can start it in this very round.
        """
        current = draft.get(member)
        unheld = [r for r in current if r not in held] if member in draft.edited else []
        picked = pick(unheld, min(count, len(unheld))) if unheld else []
        if count > len(picked):
            picked = [*picked, *pick([r for r in current if r in held], count - len(picked))]
        draft.edit(member).difference_update(picked)
        return frozenset(r for r in picked if r not in held)

    def _balance_separately(
        self,
        nxt_c: _Draft,
        nxt_t: _Draft,
        free_c: frozenset[str],
        free_t: frozenset[str],
        *,
        balancing: bool,
        spread: bool = True,
    ) -> None:
        """Each kind balanced on its own; ``spread``: a connector's tasks spread (kooper)."""
        total_c = len(self.configured.connectors)
        total_t = len(self.configured.tasks)
        if balancing:
            # ``kooper`` revokes what was handed out most often first (``pick_spread_tasks``);
            # ``kip415`` keeps Kafka's order.
            epochs = self.previous.epochs if spread else None

            def pick_connectors(resources: Iterable[str], count: int) -> list[str]:
                return balance.pick_last(resources, count, epochs)

            counts = balance.revocation_counts(nxt_c.sizes(), total_c, self._moved(nxt_c))
            for member, count in counts.items():
                free_c |= self._trim(nxt_c, member, self.held[member].connectors, count,
                                     pick_connectors)
            counts = balance.revocation_counts(nxt_t.sizes(), total_t, self._moved(nxt_t))
            taken = Counter[str]()

            def pick_tasks(tasks: Iterable[str], count: int) -> list[str]:
                if not spread:
                    return balance.pick_last(tasks, count)
                return balance.pick_spread_tasks(tasks, count, taken, epochs)

            for member, count in counts.items():
                free_t |= self._trim(nxt_t, member, self.held[member].tasks, count, pick_tasks)
        if free_c:
            given = balance.allocate(
                sorted(free_c, key=model.resource_sort_key),
                self._receiving(nxt_c.sizes()),
                total=total_c,
            )
            for member, resources in given.items():
                nxt_c.edit(member).update(resources)
        if free_t and not spread:
            given = balance.allocate(
                sorted(free_t, key=model.resource_sort_key), self._receiving(nxt_t.sizes()),
                total=total_t,
            )
            for member, resources in given.items():
                nxt_t.edit(member).update(resources)
        elif free_t:
            self._place_spread(nxt_t, free_t)

    def _place_spread(self, nxt_t: _Draft, free_t: AbstractSet[str]) -> None:
        """Free tasks to the members with the fewest of their connector, then the least load."""
        ordered = sorted(free_t, key=model.resource_sort_key)
        groups = {balance.task_group(task) for task in ordered}
        holdings = nxt_t.holdings()
        if self.cache.persistent:
            index = self.cache.groups
            index.sync(nxt_t.base)
            group_counts = index.of(holdings, groups)
        else:
            group_counts = self._count_groups(holdings, groups)
        receivers = self.receivers
        if receivers is not None:
            group_counts = {group: Counter({m: n for m, n in counter.items() if m in receivers})
                            for group, counter in group_counts.items()}
        given = balance.allocate(
            ordered,
            self._receiving(nxt_t.sizes()),
            total=len(self.configured.tasks),
            group_of=balance.task_group,
            group_counts=group_counts,
        )
        for member, resources in given.items():
            nxt_t.edit(member).update(resources)

    def _receiving(self, sizes: dict[ids.WorkerId, int]) -> dict[ids.WorkerId, int]:
        """``sizes`` of the members that may receive free work (``_rule_rollout``)."""
        receivers = self.receivers
        if receivers is None:
            return sizes
        return {member: size for member, size in sizes.items() if member in receivers}

    def _place_as_one_pool(
        self,
        nxt_c: _Draft,
        nxt_t: _Draft,
        free_c: frozenset[str],
        free_t: frozenset[str],
    ) -> None:
        """Place free work by connectors and tasks together, tasks first (KIP-415's tables)."""
        ordered = [
            *sorted(free_t, key=model.resource_sort_key),
            *sorted(free_c, key=model.resource_sort_key),
        ]
        loads = {m: nxt_c.size(m) + nxt_t.size(m) for m in self.order}
        given = balance.allocate(ordered, loads, total=len(self.configured))
        for member, resources in given.items():
            for resource in resources:
                (nxt_c if resource in free_c else nxt_t).edit(member).add(resource)


_Connectors = set[str] | Counter[str]
"""The connectors of a member's tasks (``_Round._connectors``)."""
_Doubled = Counter[str] | None
"""Per connector, a member's tasks of it, when it has two of one (``_Round._doubled``)."""


class _Draft:
    """Per-member resource sets, copied only when a member's set is edited.

    In a 100,000-task round most members keep exactly what they had; sharing
    their frozensets instead of copying them is most of the assignor's speed.
    """

    __slots__ = ("base", "edited")

    def __init__(self) -> None:
        self.base: dict[ids.WorkerId, frozenset[str]] = {}
        self.edited: dict[ids.WorkerId, set[str]] = {}

    def get(self, member: ids.WorkerId) -> AbstractSet[str]:
        """The member's set as it stands (do not mutate)."""
        edited = self.edited.get(member)
        return self.base[member] if edited is None else edited

    def copy(self) -> _Draft:
        """An independent draft with the same sets (edited ones copied)."""
        other = _Draft()
        other.base = self.base
        other.edited = {member: set(resources) for member, resources in self.edited.items()}
        return other

    def holdings(self) -> dict[ids.WorkerId, AbstractSet[str]]:
        """Every member's set as it stands, in member order (do not mutate)."""
        return {**self.base, **self.edited}  # an edited member keeps its place

    def size(self, member: ids.WorkerId) -> int:
        """How many resources the member holds now."""
        return len(self.get(member))

    def sizes(self) -> dict[ids.WorkerId, int]:
        """Every member's size, in member order."""
        sizes = dict(zip(self.base, map(len, self.base.values()), strict=True))
        for member, resources in self.edited.items():
            sizes[member] = len(resources)
        return sizes

    def edit(self, member: ids.WorkerId) -> set[str]:
        """A mutable copy of the member's set (made once)."""
        edited = self.edited.get(member)
        if edited is None:
            edited = self.edited[member] = set(self.base[member])
        return edited

    def frozen(self, member: ids.WorkerId) -> frozenset[str]:
        """The final set; the original object when the member was not edited."""
        edited = self.edited.get(member)
        return self.base[member] if edited is None else frozenset(edited)


class Cache:
    """What one group's recent rounds computed, reused when the same objects come back.

    A round of a 1,000-member, 100,000-task group mostly sees the same frozen sets as
    the round before: members that did not change keep their assignment objects. The
    cache keys everything on object identity (holding the objects, so an id is never
    reused) and updates its indexes by the members whose sets are new objects, so a
    round costs what changed instead of the whole group. Results never depend on it:
    an empty cache gives the same plan. One cache serves one group, one round at a
    time (it is not thread-safe); the simulator keeps one per run.
    """

    __slots__ = ("assigned", "configured", "groups", "held", "held_of", "persistent", "plans")

    def __init__(self, *, persistent: bool = True) -> None:
        self.persistent = persistent
        """``False``: used for one round only, so build no indexes (cheaper once)."""
        self.configured: model.ConnectorsAndTasks | None = None
        self.held = _Union(model.EMPTY)
        """Who holds what (``_Round.held``), indexed."""
        self.assigned = _Union(model.EMPTY)
        """Who is assigned what (the last plan's assignments), indexed."""
        self.groups = _Groups()
        self.held_of: dict[ids.WorkerId, _HeldMemo] = {}
        self.plans: dict[ids.WorkerId, model.MemberPlan] = {}
        """The last round's member plans, reused when nothing in them changed."""

    def configure(self, configured: model.ConnectorsAndTasks) -> None:
        """Start over unless the configured resources are the ones indexed."""
        if self.configured is configured:
            return
        if self.configured is not None and self.configured == configured:
            self.configured = configured
            return
        self.configured = configured
        if self.persistent:
            self.held = _Union(configured)
            self.assigned = _Union(configured)


class _Kind:
    """A multiset union of one kind of resource (connectors, or tasks) over members.

    ``count`` counts each resource's holders, ``free`` are configured resources nobody
    holds, ``outside`` held ones that are not configured, ``twice`` those held by two
    or more. ``has`` answers ``resource in``: held by anyone.
    """

    __slots__ = ("configured", "count", "free", "has", "outside", "removed", "twice")

    def __init__(self, configured: frozenset[str]) -> None:
        self.configured = configured
        self.count: dict[str, int] = {}
        self.has: Container[str] = self.count
        self.free: set[str] = set(configured)
        self.outside: set[str] = set()
        self.twice: set[str] = set()
        self.removed = 0
        """Elements removed from the sets since they were last compacted."""

    def compact(self) -> None:
        """Re-allocate the sets after many removals.

        A Python set never shrinks its table, and iterating or copying it costs the
        table's size: the free set of the first round (every configured resource)
        would make every later ``free - deferred`` cost 100,000 steps.
        """
        if self.removed > 1_024:
            self.free = set(self.free)
            self.outside = set(self.outside)
            self.twice = set(self.twice)
            self.removed = 0

    @classmethod
    def once(cls, union: set[str], configured: frozenset[str]) -> _Kind:
        """The views of ``union`` for one round, with C-speed set operations, no counts."""
        kind = cls(frozenset())
        kind.configured = configured
        kind.has = union
        kind.free = set(configured.difference(union))
        # ``union`` holds ``len(configured) - len(free)`` configured resources: when that
        # is all it holds, nothing is outside (one pass less over a big group).
        if len(union) != len(configured) - len(kind.free):
            kind.outside = union.difference(configured)
        return kind

    def bulk(self, parts: list[frozenset[str]]) -> None:
        """Index ``parts`` from nothing (the first round, or a new configuration)."""
        union: set[str] = set().union(*parts)
        if len(union) == sum(len(part) for part in parts):
            self.count.update(dict.fromkeys(union, 1))
        else:
            self.count.update(Counter(itertools.chain.from_iterable(parts)))
            self.twice.update(r for r, n in self.count.items() if n > 1)
        self.free = self.free.difference(union)
        self.outside.update(union.difference(self.configured))

    def add(self, resources: AbstractSet[str]) -> None:
        """One more holder for each of ``resources``."""
        count = self.count
        for resource in resources:
            n = count.get(resource, 0)
            count[resource] = n + 1
            if n == 0:
                if resource in self.configured:
                    self.free.discard(resource)
                    self.removed += 1
                else:
                    self.outside.add(resource)
            elif n == 1:
                self.twice.add(resource)

    def drop(self, resources: AbstractSet[str]) -> None:
        """One holder less for each of ``resources``."""
        count = self.count
        for resource in resources:
            n = count[resource]
            if n == 1:
                del count[resource]
                if resource in self.configured:
                    self.free.add(resource)
                else:
                    self.outside.discard(resource)
                    self.removed += 1
            else:
                count[resource] = n - 1
                if n == 2:
                    self.twice.discard(resource)
                    self.removed += 1


class _Union:
    """Who holds what, per kind (``c``: connectors, ``t``: tasks), over members' sets.

    ``sync`` moves it to a new per-member map touching only members whose set is a
    different object than the one indexed.
    """

    __slots__ = ("c", "sets", "t")

    def __init__(self, configured: model.ConnectorsAndTasks) -> None:
        self.c = _Kind(configured.connectors)
        self.t = _Kind(configured.tasks)
        self.sets: dict[ids.WorkerId, model.ConnectorsAndTasks] = {}

    @classmethod
    def once(
        cls,
        sets: Mapping[ids.WorkerId, model.ConnectorsAndTasks],
        configured: model.ConnectorsAndTasks,
    ) -> _Union:
        """The same views for one round only: no counts, and ``sync`` must not follow."""
        union = cls(model.EMPTY)
        held = list(sets.values())
        seen_c: set[str] = set().union(*(h.connectors for h in held))
        seen_t: set[str] = set().union(*(h.tasks for h in held))
        union.c = _Kind.once(seen_c, configured.connectors)
        union.t = _Kind.once(seen_t, configured.tasks)
        if len(seen_c) + len(seen_t) != sum(len(h) for h in held):
            # Somebody holds something twice: find what (rare, so a plain pass).
            once_c: set[str] = set()
            once_t: set[str] = set()
            for holding in held:
                union.c.twice.update(once_c.intersection(holding.connectors))
                union.t.twice.update(once_t.intersection(holding.tasks))
                once_c.update(holding.connectors)
                once_t.update(holding.tasks)
        return union

    def sync(self, sets: Mapping[ids.WorkerId, model.ConnectorsAndTasks]) -> None:
        """Index ``sets`` instead of what was indexed."""
        old = self.sets
        c, t = self.c, self.t
        if not old:
            held = list(sets.values())
            c.bulk([h.connectors for h in held])
            t.bulk([h.tasks for h in held])
        else:
            moved = [member for member, new in sets.items() if old.get(member) is not new]
            for member in moved:
                new = sets[member]
                before = old.get(member, model.EMPTY)
                c.drop(before.connectors - new.connectors)
                t.drop(before.tasks - new.tasks)
                c.add(new.connectors - before.connectors)
                t.add(new.tasks - before.tasks)
            for member in old.keys() - sets.keys():
                before = old[member]
                c.drop(before.connectors)
                t.drop(before.tasks)
            c.compact()
            t.compact()
        self.sets = dict(sets)


class _Groups:
    """Per connector, how many of its tasks each member holds (``balance.count_groups``).

    Indexed over each member's current task set and synced by identity like ``_Union``.
    """

    __slots__ = ("counts", "sets", "spread")

    def __init__(self) -> None:
        self.sets: dict[ids.WorkerId, frozenset[str]] = {}
        self.counts: dict[str, Counter[ids.WorkerId]] = defaultdict(Counter)
        self.spread: dict[str, tuple[int, int]] = {}
        """Connectors whose indexed counts are known spread, for (members, size) (0: any)."""

    def sync(self, sets: Mapping[ids.WorkerId, frozenset[str]]) -> None:
        """Index ``sets`` instead of what was indexed."""
        old = self.sets
        counts = self.counts
        known = self.spread
        for member, new in sets.items():
            before = old.get(member, frozenset())
            if before is new:
                continue
            for task in before - new:
                group = ids.task_connector(task)
                _uncount(counts, group, member)
                known.pop(group, None)
            for task in new - before:
                group = ids.task_connector(task)
                counts[group][member] += 1
                known.pop(group, None)
        for member in old.keys() - sets.keys():
            for task in old[member]:
                group = ids.task_connector(task)
                _uncount(counts, group, member)
                known.pop(group, None)
        self.sets = dict(sets)

    def of(
        self, holdings: Mapping[ids.WorkerId, AbstractSet[str]], groups: AbstractSet[str]
    ) -> dict[str, Counter[ids.WorkerId]]:
        """``balance.count_groups(holdings, groups)``, from the index plus what differs.

        A connector no member's difference touches gets the index's own counter: the
        caller must not change the result (``balance.allocate`` copies what it counts).
        """
        counts = self.counts
        result = {group: counts.get(group) or Counter() for group in groups}
        copied: set[str] = set()

        def mine(group: str) -> Counter[ids.WorkerId]:
            if group not in copied:
                copied.add(group)
                result[group] = Counter(result[group])
            return result[group]

        for member, tasks in holdings.items():
            base = self.sets[member]
            if tasks is base:
                continue
            for task in base - tasks:
                group = ids.task_connector(task)
                if group in result:
                    mine(group)
                    _uncount(result, group, member)
            for task in tasks - base:
                group = ids.task_connector(task)
                if group in result:
                    mine(group)[member] += 1
        return result


    def all_spread(
        self,
        changed: Mapping[ids.WorkerId, AbstractSet[str]],
        sizes: Mapping[str, int],
        members: int,
    ) -> bool:
        """``balance.spread_ok`` for every connector, over the index with ``changed`` sets.

        ``changed`` replaces the indexed sets of a few members; only the connectors
        they touch are recounted, the others are checked on the index as it stands.
        A connector found spread on the index alone is remembered (for that member
        count and size) until ``sync`` changes its counts.
        """
        known = self.spread
        delta: dict[str, dict[ids.WorkerId, int]] = {}
        for member, tasks in changed.items():
            base = self.sets.get(member, frozenset())
            for change, moved_tasks in ((-1, base - tasks), (1, tasks - base)):
                for task in moved_tasks:
                    row = delta.setdefault(ids.task_connector(task), {})
                    row[member] = row.get(member, 0) + change
        counts = self.counts
        empty: Counter[ids.WorkerId] = Counter()
        for group, size in sizes.items():
            moved = delta.get(group)
            # With fewer tasks than members, spread means "one each at most", whatever
            # the member count: a join or a departure does not make it worth a recount.
            key = (0, size) if size < members else (members, size)
            if not moved and known.get(group) == key:
                continue
            held: Mapping[ids.WorkerId, int] = counts.get(group, empty)
            if moved:  # the counts with ``moved`` added, only the positive ones kept
                merged = dict(held)
                for member, change in moved.items():
                    merged[member] = merged.get(member, 0) + change
                held = {member: n for member, n in merged.items() if n > 0}
            if not balance.spread_ok(held, size, members):
                return False
            if not moved:
                known[group] = key
        return True


def _uncount(counts: Mapping[str, Counter[ids.WorkerId]], group: str, member: ids.WorkerId) -> None:
    counter = counts[group]
    if counter[member] <= 1:
        del counter[member]
    else:
        counter[member] -= 1
