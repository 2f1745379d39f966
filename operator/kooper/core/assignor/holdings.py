"""Stage one, holdings: who departed, and what each live member holds.

A live member *holds* what it may run (its assignment as last written), what it
reports running, and what it was told to stop but has not yet acknowledged. A
member whose process restarted (new incarnation) holds only what it reports.
``Round`` carries these working sets through the later stages of one ``plan`` call.
"""

from __future__ import annotations

from kooper.core import ids, model
from kooper.core.assignor import indexes, rules
from kooper.core.assignor.indexes import Cache

Holdings = dict[ids.WorkerId, model.ConnectorsAndTasks]


class Round:
    """The working sets of one ``plan`` call (never escapes ``plan``)."""

    __slots__ = (
        "_doubled_of", "cache", "configured", "contested", "current", "departed", "held",
        "now_ms", "order", "previous", "receivers", "rules", "snapshot",
    )

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
        self.rules = rules.RULES[snapshot.settings.policy]
        self.order = sorted(snapshot.members)
        self.receivers = rules.receivers(snapshot, self.rules)
        self.departed = departed(snapshot, previous)
        self.current, self.held = hold(self.order, snapshot, previous, self.departed, cache)
        self._doubled_of: dict[int, model.Shape] | None = None
        self.contested: indexes.Union | None = None
        """``contested.union``'s answer, once asked without a persistent cache."""

    def doubled_of(self) -> dict[int, model.Shape]:
        """``groups.doubled`` of the task sets seen this round, by ``id`` (holding the set),
        starting from what the previous round read (``PlanState.shapes``); built when
        first asked, which a round whose spread check reads the cache's index never does."""
        if self._doubled_of is None:
            self._doubled_of = {id(shape[0]): shape for shape in self.previous.shapes.values()}
        return self._doubled_of


def fenced_since_assigned(member: model.Member, previous: model.PlanState) -> bool:
    """A member that self-fenced after applying its current assignment lost all of it.

    It stopped everything when it could not renew its Lease and will start nothing
    until it receives a newer assignment, so it is treated like a member that left
    and came back: what it held is lost (and, under ``kooper``, returned to it at once
    with a new generation). Once a newer assignment is out (``assigned_at`` above the
    generation it reports), the fence is already handled.
    """
    return member.fenced and member.generation >= previous.assigned_at.get(member.id, 0)


def departed(snapshot: model.Snapshot, previous: model.PlanState) -> set[ids.WorkerId]:
    """Members gone, back under the same name as a new process, or fenced."""
    members = snapshot.members
    incarnations = previous.incarnations
    return {
        member
        for member in previous.assignments
        if (report := members.get(member)) is None
        or ((was := incarnations.get(member, "")) and report.incarnation != was)
        or (report.fenced and fenced_since_assigned(report, previous))
    }


def hold(
    order: list[ids.WorkerId], snapshot: model.Snapshot, previous: model.PlanState,
    departed: set[ids.WorkerId], cache: Cache,
) -> tuple[Holdings, Holdings]:
    """(current, held): each live member's assignment as it stands, and its holding."""
    members = snapshot.members
    current_of: Holdings = {}
    held_of: Holdings = {}
    # Updated in place: an entry only says what a member's holding was for given
    # objects, so one left by a member that has gone is never wrong, only unused.
    memo = cache.held_of
    empty = model.EMPTY
    was_assigned, was_revoking = previous.assignments, previous.revoking
    assigned_at = previous.assigned_at
    forgotten = previous.forgotten
    for member in order:
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
        if known is not None and known[0] is owned and known[1] is current \
                and known[2] is unacked:
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
    return current_of, held_of
