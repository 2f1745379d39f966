"""``Groups``: per connector, how many of its tasks each member holds, with the
histograms of those counts that answer whether the connector is spread.

One of the incremental indexes behind ``indexes.Cache`` (synced by identity like
``indexes.Union``); ``tests/core/test_assignor_shortcuts.py`` holds it to counting from
scratch.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping
from collections.abc import Set as AbstractSet
from typing import Any

from kooper.core import balance, ids


class Groups:
    """Per connector, how many of its tasks each member holds (``balance.count_groups``).

    Indexed over each member's current task set and synced by identity like ``Union``.
    Beside the counts, each connector's histogram of them (how many members hold one
    of its tasks, how many two, ...): whether a connector is spread depends only on
    that (``balance.spread_of``), so a connector a few members' changes touch is judged by
    those members' counts, not by a pass over everyone holding it.
    """

    __slots__ = ("basis", "counts", "histograms", "pending", "sets", "source", "spread")

    def __init__(self) -> None:
        self.sets: dict[ids.WorkerId, frozenset[str]] = {}
        self.source: Mapping[ids.WorkerId, frozenset[str]] | None = None
        """The mapping last synced (held: ``sync`` of the same object again is a no-op,
        as a round's drafts share one ``Draft.base``, never changed once built)."""
        self.counts: dict[str, Counter[ids.WorkerId]] = defaultdict(Counter)
        self.histograms: dict[str, Counter[int]] = defaultdict(Counter)
        """connector → held count → how many members hold that many of its tasks."""
        self.spread: dict[str, tuple[int, int]] = {}
        """Connectors whose indexed counts are known spread, for (members, size) (0: any)."""
        self.basis: tuple[dict[str, int], int] | None = None
        """(sizes, members) of the last ``all_spread`` that judged every connector and
        found it spread: each connector not in ``pending`` still is."""
        self.pending: set[str] = set()
        """Connectors to judge again before ``basis`` answers for them: counted since, or
        judged then with a round's changes only."""

    def sync(self, sets: Mapping[ids.WorkerId, frozenset[str]]) -> None:
        """Index ``sets`` instead of what was indexed (``sets`` must not change after)."""
        if sets is self.source:
            return
        old = self.sets
        for member, new in sets.items():
            before = old.get(member, frozenset())
            if before is new:
                continue
            for task in before - new:
                self._count(ids.task_connector(task), member, -1)
            for task in new - before:
                self._count(ids.task_connector(task), member, 1)
        for member in old.keys() - sets.keys():
            for task in old[member]:
                self._count(ids.task_connector(task), member, -1)
        self.sets = dict(sets)
        self.source = sets

    def _count(self, group: str, member: ids.WorkerId, change: int) -> None:
        """``member`` holds ``change`` more tasks of ``group``: counts and histogram."""
        counter, histogram = self.counts[group], self.histograms[group]
        was = counter.get(member, 0)
        now = was + change
        if was:
            _decrement(histogram, was)
        if now > 0:
            counter[member] = now
            histogram[now] += 1
        else:
            del counter[member]
        self.spread.pop(group, None)
        self.pending.add(group)

    def of(
        self, holdings: Mapping[ids.WorkerId, AbstractSet[str]], groups: AbstractSet[str]
    ) -> dict[str, Counter[ids.WorkerId]]:
        """``balance.count_groups``, from the index plus what ``holdings`` changes in it.

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
                    _decrement(result[group], member)
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

        ``changed`` replaces the indexed sets of a few members; a connector they touch
        is judged by its histogram with their counts moved, the others by the index as
        it stands. A connector found spread on the index alone is remembered (for that
        member count and size) until ``sync`` changes its counts; once every connector
        was, a call with the same sizes and member count judges only those counted since
        and those ``changed`` touches (``basis``, ``pending``).
        """
        delta: dict[str, dict[ids.WorkerId, int]] = {}
        for member, tasks in changed.items():
            base = self.sets.get(member, frozenset())
            for change, moved_tasks in ((-1, base - tasks), (1, tasks - base)):
                for task in moved_tasks:
                    row = delta.setdefault(ids.task_connector(task), {})
                    row[member] = row.get(member, 0) + change
        basis = self.basis
        if basis is not None and basis[1] == members and basis[0] == sizes:
            # Only what changed since every connector was found spread is judged again.
            judged = [g for g in self.pending.union(delta) if g in sizes]
            return all([self._judge(group, sizes[group], members, delta.get(group))
                        for group in judged])
        known = self.spread
        for group, size in sizes.items():
            moved = delta.get(group)
            if not moved and known.get(group) == _key(size, members):
                continue
            if not self._judge(group, size, members, moved):
                return False
        self.basis, self.pending = (dict(sizes), members), set(delta)
        return True

    def _judge(self, group: str, size: int, members: int,
               moved: Mapping[ids.WorkerId, int] | None) -> bool:
        """Whether ``group`` is spread, its indexed counts with ``moved`` applied; spread
        on the index alone is remembered (``spread``) and no longer ``pending``."""
        key = _key(size, members)
        if not moved and self.spread.get(group) == key:
            self.pending.discard(group)
            return True
        histogram: Mapping[int, int] = self.histograms.get(group) or {}
        if moved:
            histogram = _moved(histogram, self.counts.get(group) or {}, moved)
        if not balance.spread_of(histogram, size, members):
            return False
        if not moved:
            self.spread[group] = key
            self.pending.discard(group)
        return True


def _key(size: int, members: int) -> tuple[int, int]:
    """What a connector's remembered spread holds for (``Groups.spread``). With fewer
    tasks than members, spread means "one each at most", whatever the member count: a
    join or a departure does not make it worth a recount."""
    return (0, size) if size < members else (members, size)


def _moved(histogram: Mapping[int, int], counts: Mapping[ids.WorkerId, int],
           moved: Mapping[ids.WorkerId, int]) -> dict[int, int]:
    """``histogram`` with each member in ``moved`` holding that many more (or fewer)."""
    result = dict(histogram)
    for member, change in moved.items():
        if change:
            was = counts.get(member, 0)
            if was:
                result[was] -= 1
            if was + change > 0:
                result[was + change] = result.get(was + change, 0) + 1
    return result


def _decrement(counter: Counter[Any], key: object) -> None:
    """One fewer ``key`` in ``counter``, which keeps no zero counts."""
    if counter[key] <= 1:
        del counter[key]
    else:
        counter[key] -= 1
