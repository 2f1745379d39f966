"""Where free work goes: each resource to the member that keeps the group balanced.

``allocate`` hands the ``hi`` slots of ``quotas.targets`` out lazily, so the spreading
rule (fewest of the resource's group first) can choose who gets them.
"""

from __future__ import annotations

import heapq
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping, Sequence

from kooper.core import ids
from kooper.core.balance import quotas

GroupKey = Callable[[str], str]
"""Maps a resource to its spreading group (a task's connector), or to ``""``: no spreading."""

_GroupHeap = list[tuple[int, int, ids.WorkerId]]
"""One spreading group's members as (group count, load, member); see ``_group_heap``."""


def allocate(
    free: Sequence[str],
    loads: Mapping[ids.WorkerId, int],
    *,
    total: int,
    group_of: GroupKey | None = None,
    group_counts: Mapping[str, Counter[ids.WorkerId]] | None = None,
) -> dict[ids.WorkerId, list[str]]:
    """Hand out ``free`` resources in order, keeping the group as balanced as it can be.

    Each resource goes to an eligible member (under ``lo``, or under ``hi`` while
    ``hi`` slots remain) with, first, the fewest resources of the same spreading
    group (when ``group_of`` is given), then the lowest load, then the smallest
    id. If nobody is eligible (loads above target while a delay defers balancing)
    the least-loaded member takes it. ``loads`` are the members' current sizes;
    ``group_counts`` (group -> member -> count) describes the current holdings.
    Returns what each member is given.
    """
    if not loads or not free:
        return {}
    limits = quotas.targets(total, len(loads))
    return _hand_out(free, loads, limits, group_of, _copied(group_counts))


_SKIP_LIMIT = 32
"""Members of a group's holders the cheap path may skip before the group gets its own heap."""


def _hand_out(
    free: Sequence[str],
    loads: Mapping[ids.WorkerId, int],
    limits: tuple[int, int, int],
    group_of: GroupKey | None,
    counts: defaultdict[str, Counter[ids.WorkerId]],
) -> dict[ids.WorkerId, list[str]]:
    """``allocate``'s loop, ``limits`` being ``quotas.targets`` and ``counts`` its copy of
    the group counts (updated). The cheap path keeps a heap of (load, member), stale
    entries included, and skips the members already holding the resource's group."""
    lo, hi, extra = limits
    given: dict[ids.WorkerId, list[str]] = defaultdict(list)
    load = dict(loads)
    at_hi = sum(1 for value in load.values() if value >= hi > lo)
    heap = [(value, member) for member, value in load.items()]
    heapq.heapify(heap)
    group_heaps: dict[str, _GroupHeap] = {}  # built on demand: ``_group_heap``
    for resource in free:
        group = group_of(resource) if group_of else ""
        holders = counts[group] if group else None
        chosen: ids.WorkerId | None = None
        limit = hi if at_hi < extra else lo  # ``hi`` while ``hi`` slots remain
        by_group = group_heaps.get(group) if holders else None
        if by_group is not None and holders is not None:
            chosen = _pop_fewest(by_group, holders, load, limit)
        else:
            skipped: list[tuple[int, ids.WorkerId]] = []
            while heap:
                value, member = heap[0]
                if value != load[member]:
                    heapq.heappop(heap)  # stale entry
                    continue
                if value >= limit:
                    break
                heapq.heappop(heap)
                if holders and holders.get(member, 0) > 0:
                    skipped.append((value, member))
                    if len(skipped) > _SKIP_LIMIT:
                        break  # most members hold this group: switch to its own heap
                    continue
                chosen = member
                break
            for entry in skipped:
                heapq.heappush(heap, entry)
            if chosen is None and holders:
                crowded = len(skipped) > _SKIP_LIMIT
                chosen = _among_holders(group_heaps, group, holders, load, limit, crowded=crowded)
        if chosen is None:
            chosen = min(load, key=lambda m: (load[m], m))
        given[chosen].append(resource)
        load[chosen] += 1
        if hi > lo and load[chosen] == hi:
            at_hi += 1
        heapq.heappush(heap, (load[chosen], chosen))
        if holders is not None:
            holders[chosen] += 1
    return dict(given)


def _copied(
    group_counts: Mapping[str, Counter[ids.WorkerId]] | None,
) -> defaultdict[str, Counter[ids.WorkerId]]:
    """A copy of ``group_counts`` that ``allocate`` may update, empty for other groups."""
    counts: defaultdict[str, Counter[ids.WorkerId]] = defaultdict(Counter)
    if group_counts:
        for group, counter in group_counts.items():
            counts[group] = Counter(counter)
    return counts


def _among_holders(
    group_heaps: dict[str, _GroupHeap],
    group: str,
    holders: Mapping[ids.WorkerId, int],
    load: Mapping[ids.WorkerId, int],
    limit: int,
    *,
    crowded: bool,
) -> ids.WorkerId | None:
    """When every member the cheap path saw under ``limit`` holds the group: the one
    holding fewest of it, then the lowest load, then the smallest id. ``crowded`` (the
    cheap path gave up): from the group's own heap, built now (``group_heaps``)."""
    if crowded:
        by_group = group_heaps[group] = _group_heap(holders, load, limit)
        return _pop_fewest(by_group, holders, load, limit)
    eligible = [m for m in holders if holders[m] > 0 and load[m] < limit]
    if not eligible:
        return None
    return min(eligible, key=lambda m: (holders[m], load[m], m))


def _group_heap(
    holders: Mapping[ids.WorkerId, int], load: Mapping[ids.WorkerId, int], limit: int,
) -> _GroupHeap:
    """A spreading group's own heap of (group count, load, member) under ``limit``.

    Built only for a group whose resources keep finding the cheap path's best members
    already holding it (a connector with more tasks than there are members). Keys only
    grow and ``limit`` only falls, so stale entries are fixed when they surface
    (``_pop_fewest``) and members at the limit leave the heap for good.
    """
    by_group = [(holders.get(m, 0), value, m) for m, value in load.items() if value < limit]
    heapq.heapify(by_group)
    return by_group


def _pop_fewest(
    by_group: _GroupHeap,
    holders: Mapping[ids.WorkerId, int],
    load: Mapping[ids.WorkerId, int],
    limit: int,
) -> ids.WorkerId | None:
    """The member under ``limit`` with the fewest of the group, then lowest load, then id.

    Leaves the chosen member's (stale) entry on top; the next call fixes it.
    """
    while by_group:
        count, value, member = by_group[0]
        now = load[member]
        if now >= limit:
            heapq.heappop(by_group)  # never eligible again in this call
            continue
        held = holders.get(member, 0)
        if count != held or value != now:
            heapq.heapreplace(by_group, (held, now, member))
            continue
        return member
    return None
