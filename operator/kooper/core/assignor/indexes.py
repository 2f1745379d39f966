"""The incremental indexes behind ``Cache``: what a group's recent rounds computed.

Every index is synced by object identity, so a round costs what changed since the
last one. None of them ever changes a plan: ``tests/core/test_assignor_shortcuts.py``
runs the same histories with and without them.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Container, Mapping
from collections.abc import Set as AbstractSet

from kooper.core import ids, model
from kooper.core.assignor import spreadindex

HeldMemo = tuple[
    model.ConnectorsAndTasks, model.ConnectorsAndTasks, model.ConnectorsAndTasks,
    model.ConnectorsAndTasks,
]
"""(owned, current, unacked, held) of a member in the last round."""
Connectors = set[str] | Counter[str]
"""The connectors of a member's tasks (``spread.connectors``)."""
Doubled = Counter[str] | None
"""Per connector, a member's tasks of it, when it has two of one (``spread.doubled``)."""


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
        self.held = Union(model.EMPTY)
        """Who holds what (``Round.held``), indexed."""
        self.assigned = Union(model.EMPTY)
        """Who is assigned what (the last plan's assignments), indexed."""
        self.groups = spreadindex.Groups()
        self.held_of: dict[ids.WorkerId, HeldMemo] = {}
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
            self.held = Union(configured)
            self.assigned = Union(configured)

    def spread_indexed(self) -> bool:
        """Whether the spread check reads ``groups`` (built once a round handed work out, or
        by ``shell.warmup``), not the task sets (``PlanState.shapes``)."""
        return self.persistent and any(self.groups.sets.values())


class Kind:
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
        """Re-allocate the sets after many removals: a Python set never shrinks its table,
        and iterating or copying it costs the table's size (the first round's free set,
        every configured resource, would make every later ``free - deferred`` 100,000 steps).
        """
        if self.removed > 1_024:
            self.free = set(self.free)
            self.outside = set(self.outside)
            self.twice = set(self.twice)
            self.removed = 0

    @classmethod
    def once(cls, union: set[str], configured: frozenset[str]) -> Kind:
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


class Union:
    """Who holds what, per kind (``c``: connectors, ``t``: tasks), over members' sets.

    ``sync`` moves it to a new per-member map touching only members whose set is a
    different object than the one indexed.
    """

    __slots__ = ("c", "sets", "t")

    def __init__(self, configured: model.ConnectorsAndTasks) -> None:
        self.c = Kind(configured.connectors)
        self.t = Kind(configured.tasks)
        self.sets: dict[ids.WorkerId, model.ConnectorsAndTasks] = {}

    @classmethod
    def once(
        cls,
        sets: Mapping[ids.WorkerId, model.ConnectorsAndTasks],
        configured: model.ConnectorsAndTasks,
    ) -> Union:
        """The same views for one round only: no counts, and ``sync`` must not follow."""
        union = cls(model.EMPTY)
        held = list(sets.values())
        seen_c: set[str] = set().union(*(h.connectors for h in held))
        seen_t: set[str] = set().union(*(h.tasks for h in held))
        union.c = Kind.once(seen_c, configured.connectors)
        union.t = Kind.once(seen_t, configured.tasks)
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
