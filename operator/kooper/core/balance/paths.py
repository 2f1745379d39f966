"""Which members take each connector's remainder, for groups too big for the exact search.

``search.fewest_moves`` is a minimum-cost flow from scratch; at 1,000 members x
1,000 connectors it cannot run every round, and ``search.improve`` from a greedy
matrix moves hundreds of tasks where a departure needs a hundred or two. ``from_holdings``
starts where the group is instead: each member keeps the extra tasks it holds, as far as
its share of the remainders allows, and each remainder left over (a departed member's,
one a member gave back) goes along a shortest exchange path, breadth first:

* to a member with room that lacks the connector (one move: the free task placed);
* else to a member without room that lacks it and hands on a remainder it holds, which
  goes the same way (two moves: one task revoked, one placed), and so on.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from kooper.core import ids
from kooper.core.balance.search import Shape

Moved = Callable[[str, ids.WorkerId, int], int]
"""``moved(group, member, floor)``: the epoch of the task ``member`` hands on."""


def from_holdings(
    shape: Shape,
    counts: Mapping[str, Mapping[ids.WorkerId, int]],
    members: Sequence[ids.WorkerId],
    *,
    demands: tuple[int, int],
    moved: Moved | None = None,
) -> dict[str, set[ids.WorkerId]] | None:
    """Per connector, the members given its remainder (``search``'s answer shape):
    ``base`` remainders each, one more for ``extra_members`` members (``demands``).
    Among a member's remainders it hands on the task handed out most often first
    (``moved``). None if some remainder finds no path (the caller falls back)."""
    paths = _Paths(shape, counts, members, demands, moved)
    owed = [group for group in sorted(paths.extras)
            for _ in range(shape[group][1] - len(paths.extras[group]))]
    owed += paths.trim()
    if all(paths.augment(group) for group in owed):
        return paths.extras
    return None


class _Paths:
    """The remainders as they are being chosen: who has each, who has room."""

    def __init__(self, shape: Shape, counts: Mapping[str, Mapping[ids.WorkerId, int]],
                 members: Sequence[ids.WorkerId], demands: tuple[int, int],
                 moved: Moved | None) -> None:
        self.shape, self.counts, self.members, self.moved = shape, counts, members, moved
        self.base, self.extra_members = demands
        no_counts: Mapping[ids.WorkerId, int] = {}
        rank = {m: i for i, m in enumerate(members)}
        self.extras: dict[str, set[ids.WorkerId]] = {}
        self.chosen_of: dict[ids.WorkerId, set[str]] = {m: set() for m in members}
        for group, (floor, extra) in shape.items():
            if not extra:
                continue
            holders = sorted((m for m, n in counts.get(group, no_counts).items()
                              if n > floor and m in rank), key=rank.__getitem__)
            self.extras[group] = set(holders[:extra])
            for member in self.extras[group]:
                self.chosen_of[member].add(group)
        self.at_hi = sum(1 for m in members if len(self.chosen_of[m]) > self.base)
        """How many members have more than ``base`` remainders."""
        self.fresh: dict[ids.WorkerId, set[str]] = {}
        """Per member, the remainders it was only given here (it does not hold them)."""
        self.below = dict.fromkeys(m for m in members if len(self.chosen_of[m]) < self.base)
        """The members below ``base`` (an ordered set): the first takers."""

    # ``_take`` and ``_give`` are the only writers of ``extras``, ``chosen_of`` and the
    # three facts derived from them for speed: ``fresh``, ``below`` and ``at_hi``.

    def _take(self, member: ids.WorkerId, group: str) -> None:
        chosen = self.chosen_of[member]
        self.extras[group].add(member)
        chosen.add(group)
        if not self._held(member, group):
            self.fresh.setdefault(member, set()).add(group)
        if len(chosen) >= self.base:
            self.below.pop(member, None)
        if len(chosen) == self.base + 1:
            self.at_hi += 1

    def _give(self, member: ids.WorkerId, group: str) -> None:
        chosen = self.chosen_of[member]
        if len(chosen) == self.base + 1:
            self.at_hi -= 1
        self.extras[group].discard(member)
        chosen.discard(group)
        fresh = self.fresh.get(member)
        if fresh:
            fresh.discard(group)
        if len(chosen) < self.base:
            self.below[member] = None

    def trim(self) -> list[str]:
        """Take remainders off members above their share (above ``base + 1``, then at
        ``base + 1`` beyond ``extra_members`` of them, the last first); return the
        connectors owed."""
        owed: list[str] = []
        cap = self.base + (1 if self.extra_members else 0)
        for member in reversed(self.members):
            mine = self.chosen_of[member]
            for group in sorted(mine, reverse=True)[: max(0, len(mine) - cap)]:
                self._give(member, group)
                owed.append(group)
        for member in reversed(self.members):
            if self.at_hi <= self.extra_members:
                break
            if len(self.chosen_of[member]) > self.base:
                group = max(self.chosen_of[member])
                self._give(member, group)
                owed.append(group)
        return owed

    def _taker(self, holders: set[ids.WorkerId]) -> ids.WorkerId | None:
        """A member with room outside ``holders``: one below ``base`` first."""
        for member in self.below:
            if member not in holders:
                return member
        if self.at_hi < self.extra_members:
            for member in self.members:
                if member not in holders and len(self.chosen_of[member]) == self.base:
                    return member
        return None

    def _held(self, member: ids.WorkerId, group: str) -> bool:
        """Whether ``member`` holds the extra task of ``group`` now (handing it on
        revokes it; a remainder only given here stops nothing)."""
        held = self.counts.get(group)
        return held is not None and held.get(member, 0) > self.shape[group][0]

    def _handed(self, member: ids.WorkerId, *, held: bool) -> list[str]:
        """The remainders ``member`` could hand on: with ``held``, those it holds, the
        most moved first; else those it was only given here."""
        fresh = self.fresh.get(member, set())
        if not held:
            return sorted(fresh)
        mine = sorted(self.chosen_of[member] - fresh)
        moved = self.moved
        if moved is not None:
            mine.sort(key=lambda g: -moved(g, member, self.shape[g][0]))
        return mine

    def augment(self, start: str) -> bool:
        """Give one more member ``start``'s remainder along a short exchange path: level
        by level, at each level the members handing on what they were only given here
        before those that would have to give up a task they hold."""
        parent: dict[str, tuple[str, ids.WorkerId] | None] = {start: None}
        taker = self._taker(self.extras[start])
        if taker is not None:
            self._apply(start, taker, parent)
            return True
        seen: set[ids.WorkerId] = set()
        frontier = [start]
        while frontier:
            following: list[str] = []
            for held in (False, True):
                for group in frontier:
                    for member in self.members if held else [
                            m for m in self.members if self.fresh.get(m)]:
                        if member in seen or member in self.extras[group]:
                            continue
                        if held:
                            seen.add(member)
                        for other in self._handed(member, held=held):
                            if other in parent:
                                continue
                            parent[other] = (group, member)
                            taker = self._taker(self.extras[other])
                            if taker is not None:
                                self._apply(other, taker, parent)
                                return True
                            following.append(other)
            frontier = following
        return False

    def _apply(self, end: str, taker: ids.WorkerId,
               parent: Mapping[str, tuple[str, ids.WorkerId] | None]) -> None:
        """``taker`` takes ``end``'s remainder; walking the path back, each member on it
        hands on the remainder after it and takes the one before."""
        self._take(taker, end)
        group = end
        while (step := parent[group]) is not None:
            previous, member = step
            self._give(member, group)
            self._take(member, previous)
            group = previous
