"""Load arithmetic: who should hold how many, what to revoke, where free work goes.

Pure functions over plain sets. The assignor calls them once per resource class:
under the ``kooper`` policy connectors and tasks are balanced separately (each
differs by at most one between members) and a connector's tasks are spread over
members before any member gets a second one (the defect KAFKA-17049 reports);
under ``kip415`` each kind is balanced on its own too (Kafka's current assignor), and
only lost work is placed over connectors and tasks as one pool, as the KIP's tables do.

Targets. ``N`` resources over ``k`` members: everyone ends with ``lo = N // k`` or
``hi = lo + 1``, and exactly ``N % k`` members with ``hi``. Revocation keeps the
heaviest members at ``hi`` (fewest moves); allocation hands the ``hi`` slots out
lazily, so the spreading rule can choose who gets them.
"""

from __future__ import annotations

import heapq
import itertools
import operator
from collections import Counter, defaultdict, deque
from collections.abc import Callable, Iterable, Mapping, Sequence

from kooper.core import ids, model


def targets(total: int, members: int) -> tuple[int, int, int]:
    """``(lo, hi, extra)``: everyone holds ``lo`` or ``hi``; ``extra`` members hold ``hi``."""
    if members <= 0:
        return (0, 0, 0)
    lo, extra = divmod(total, members)
    return (lo, lo + 1 if extra else lo, extra)


def revocation_counts(
    loads: Mapping[ids.WorkerId, int], total: int,
    moved: Callable[[ids.WorkerId, int], int] | None = None,
) -> dict[ids.WorkerId, int]:
    """How many resources each member must give up for the group to end balanced.

    The heaviest members keep the ``hi`` slots, so the number of moves is the
    minimum balance requires. Members at or under their target give up nothing.

    Any member holding at least ``hi`` may keep a ``hi`` slot for the same number of
    moves. ``moved(member, n)`` is the epoch (how often it was handed out) of what
    ``member`` gives up if it keeps ``n - 1`` resources rather than ``n``; with it,
    the slots go to the members for which that work moved least, so the work handed
    out most often leaves first across the group, not only within a member: after a
    partial rollout, the pods it left alone keep their own work and what moved onto
    them leaves instead.
    """
    lo, hi, extra = targets(total, len(loads))
    # The usual round is already balanced: nobody above ``hi``, and no more members at
    # ``hi`` than there are ``hi`` slots. Then the heaviest ranks are exactly the members
    # at ``hi`` and nobody revokes; answer without sorting a thousand members.
    at_hi = 0
    for value in loads.values():
        if value > hi:
            break
        if value == hi > lo:
            at_hi += 1
    else:
        if at_hi <= extra:
            return {}
    if moved is None or hi == lo:
        order = sorted(loads, key=lambda member: (-loads[member], member))
    else:
        order = sorted(loads, key=lambda member: (
            -min(loads[member], hi), moved(member, hi) if loads[member] >= hi else 0,
            -loads[member], member))
    counts: dict[ids.WorkerId, int] = {}
    for rank, member in enumerate(order):
        target = hi if rank < extra else lo
        if loads[member] > target:
            counts[member] = loads[member] - target
    return counts


def pick_last(resources: Iterable[str], count: int,
              epochs: Mapping[str, int] | None = None) -> list[str]:
    """The ``count`` resources that come last in KIP-415 order (keep the first ones);
    with ``epochs``, those handed out most often first (work that already moved)."""
    if epochs:
        ordered = sorted(resources, key=lambda r: (epochs.get(r, 0), model.resource_sort_key(r)))
    else:
        ordered = sorted(resources, key=model.resource_sort_key)
    return ordered[len(ordered) - count :] if count > 0 else []


def pick_spread_tasks(
    tasks: Iterable[str], count: int, taken: Counter[str] | None = None,
    epochs: Mapping[str, int] | None = None,
) -> list[str]:
    """``count`` tasks to revoke, taken from the connectors this member holds most of.

    Revoking from the most-concentrated connector first makes every revocation
    also improve the spread of that connector's tasks over the group. Among connectors
    held as much, the one fewest of whose tasks were already picked this round
    (``taken``, updated) goes first: the members that receive them can then take them
    without holding two of one connector. Within a connector, the task handed out
    most often goes first (``epochs``: work that already moved moves again before
    work that never did), then the highest number.
    """
    if count <= 0:
        return []
    listed = list(tasks)
    connectors: list[str] = list(ids.task_connectors(listed))
    last = dict(zip(connectors, listed, strict=True))  # a task of each connector
    # Usually a member holds one task of each of a hundred connectors: no lists then.
    by_connector: dict[str, list[str]] = defaultdict(list)
    single = len(last) == len(listed)
    if not single:
        for task, connector in zip(listed, connectors, strict=True):
            by_connector[connector].append(task)
    # Ties go to the connector that sorts last, so a member keeps the resources
    # that come first in KIP-415 order (as the KIP's tables do); with ``epochs``,
    # first to the connector whose task was handed out most often.
    names = sorted(last, reverse=True)
    seen = taken if taken is not None else Counter[str]()

    def group(name: str) -> list[str]:
        return [last[name]] if single else by_connector[name]

    def top(tasks: list[str]) -> int:
        if not epochs:
            return 0
        if len(tasks) == 1:
            return -epochs.get(tasks[0], 0)
        return -max(epochs.get(task, 0) for task in tasks)

    # The heap orders by size first, so a connector enters it (and its epochs are read)
    # only once its size can come first.
    tiers: dict[int, list[int]] = defaultdict(list)
    if not single:
        for rank, name in enumerate(names):
            tiers[len(by_connector[name])].append(rank)
    sizes = sorted(tiers, reverse=True)
    heap: list[tuple[int, int, int, int]] = []
    if single and names:  # one tier, its keys built without a Python call each
        tops: Iterable[int] = itertools.repeat(0)
        if epochs:
            tops = map(operator.neg, map(epochs.get, map(last.__getitem__, names),
                                         itertools.repeat(0)))
        heap = list(zip(itertools.repeat(-1), tops, map(seen.get, names, itertools.repeat(0)),
                        range(len(names))))
        heapq.heapify(heap)
    seen_of = seen.get
    # Task numbers are parsed and sorted only for the connectors picked from: a
    # member usually gives up one or two tasks out of a hundred.
    numbers_of: dict[int, list[tuple[int, int]]] = {}
    chosen: list[str] = []
    while len(chosen) < count:
        while sizes and (not heap or sizes[0] >= -heap[0][0]):
            # Every connector not in the heap is at most this size: it may come first.
            size = sizes.pop(0)
            tier = [(-size, top(by_connector[name]), seen_of(name, 0), rank)
                    for rank in tiers[size] for name in (names[rank],)]
            if heap:
                for entry in tier:
                    heapq.heappush(heap, entry)
            else:
                heap = tier
                heapq.heapify(heap)
        if not heap:
            break
        size, _, _, rank = heapq.heappop(heap)
        name = names[rank]
        numbers = numbers_of.get(rank)
        if numbers is None:
            numbers = numbers_of[rank] = sorted(
                ((epochs.get(task, 0) if epochs else 0), ids.task_number(task))
                for task in group(name))
        chosen.append(ids.task_id(name, numbers.pop()[1]))
        seen[name] += 1
        if numbers:
            heapq.heappush(heap, (size + 1, -numbers[-1][0], seen[name], rank))
    return chosen


GroupKey = Callable[[str], str]
"""Maps a resource to its spreading group (a task's connector), or to ``""``: no spreading."""


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
    given: dict[ids.WorkerId, list[str]] = defaultdict(list)
    if not loads or not free:
        return dict(given)
    lo, hi, extra = targets(total, len(loads))
    load = dict(loads)
    at_hi = sum(1 for value in load.values() if value >= hi > lo)
    heap = [(value, member) for member, value in load.items()]
    heapq.heapify(heap)
    counts: dict[str, Counter[ids.WorkerId]] = defaultdict(Counter)
    if group_counts:
        for group, counter in group_counts.items():
            counts[group] = Counter(counter)

    def cap() -> int:
        return hi if at_hi < extra else lo

    # Per spreading group, a heap of (group count, load, member), built only for a
    # group whose resources keep finding the cheap path's best members already holding
    # it (a connector with more tasks than there are members). Keys only grow and
    # ``limit`` only falls, so stale entries are fixed when they surface and members
    # at the limit leave the heap for good.
    group_heaps: dict[str, list[tuple[int, int, ids.WorkerId]]] = {}

    for resource in free:
        group = group_of(resource) if group_of else ""
        holders = counts[group] if group else None
        chosen: ids.WorkerId | None = None
        limit = cap()
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
                if len(skipped) > _SKIP_LIMIT:
                    by_group = group_heaps[group] = [
                        (holders.get(m, 0), value, m) for m, value in load.items() if value < limit
                    ]
                    heapq.heapify(by_group)
                    chosen = _pop_fewest(by_group, holders, load, limit)
                else:
                    eligible = [m for m in holders if holders[m] > 0 and load[m] < limit]
                    if eligible:
                        chosen = min(eligible, key=lambda m: (holders[m], load[m], m))
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


_SKIP_LIMIT = 32
"""Members of a group's holders the cheap path may skip before the group gets its own heap."""


def _pop_fewest(
    by_group: list[tuple[int, int, ids.WorkerId]],
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


def task_group(task: str) -> str:
    """The spreading group of a task: its connector."""
    return ids.task_connector(task)


def count_groups(
    holdings: Mapping[ids.WorkerId, Iterable[str]], groups: Iterable[str]
) -> dict[str, Counter[ids.WorkerId]]:
    """For each group of interest, how many of its tasks each member holds."""
    wanted = set(groups)
    counts: dict[str, Counter[ids.WorkerId]] = {group: Counter() for group in wanted}
    if not wanted:
        return counts
    for member, tasks in holdings.items():
        for task in tasks:
            group = ids.task_connector(task)
            if group in wanted:
                counts[group][member] += 1
    return counts


# -- spread: each connector's tasks over as many members as it has tasks -----------------
#
# Under ``kooper`` a group is *spread* when every connector's ``n`` tasks are held by
# the ``k`` members ``n // k`` or ``n // k + 1`` each (so over ``min(n, k)`` members,
# within one). Placement alone cannot keep that: a connector created in the round a
# member joins finds every other member full, and the newcomer takes all of it
# (KAFKA-17049). ``spread_target`` computes an assignment shape that is both
# count-balanced and spread, as close to the current holdings as its greedy finds;
# the assignor moves towards it only when the group is not spread.


def spread_ok(held: Mapping[ids.WorkerId, int], size: int, members: int) -> bool:
    """Whether one connector's per-member task counts can end spread without revoking.

    ``held`` counts what each member holds of the connector (members holding none may
    be missing); ``size`` is how many tasks it has. Nobody may hold more than
    ``ceil(size / members)``, and no more than ``size % members`` members that many.
    With every task placed this is exactly "``floor`` or ``ceil`` each".
    """
    if not held or members <= 0:
        return True
    floor, extra = divmod(size, members)
    most = max(held.values())
    if extra == 0:
        return most <= floor
    if most <= floor:
        return True
    if most > floor + 1:
        return False
    if floor == 0 and min(held.values()) > 0:
        return len(held) <= extra  # every member listed holds one: no count to walk
    return sum(1 for count in held.values() if count > floor) <= extra


def spread_target(
    counts: Mapping[str, Mapping[ids.WorkerId, int]],
    sizes: Mapping[str, int],
    members: Sequence[ids.WorkerId],
    loads: Mapping[ids.WorkerId, int],
    moved: Callable[[str, ids.WorkerId, int], int] | None = None,
) -> dict[str, dict[ids.WorkerId, int]]:
    """Per connector, how many of its tasks each member should hold: balanced and spread.

    ``counts`` are the current holdings per connector (``count_groups``), ``sizes`` each
    connector's task count, ``loads`` each member's current number of tasks. Every
    member gets ``n // k`` of every connector's ``n`` tasks; the ``n % k`` remainders
    go one per member, and each member takes ``R // k`` or ``R // k + 1`` of all ``R``
    remainders, so task counts also end within one of each other.

    Which members take which remainders is Ryser's construction of a 0-1 matrix with
    given row and column sums: connectors, largest remainder first, pick the members
    with the most remainders still to take. That greedy never gets stuck; among members
    it ranks equal it prefers those already holding the extra task (fewer moves), so a
    member whose holding is already right keeps it whenever the construction allows.
    Members with no entry in a connector's result hold none of it.

    ``moved(group, member, floor)``: the epoch of the task ``member`` gives up if it
    keeps ``floor`` of ``group`` instead of one more. Among targets that keep the most
    tasks in place, the exact search then keeps those handed out least (work that
    already moved moves again first, as in ``revocation_counts``).
    """
    k = len(members)
    if k == 0:
        return {}
    shape = {group: divmod(size, k) for group, size in sizes.items() if size > 0}
    remainders = sum(extra for _, extra in shape.values())
    base, extra_members = divmod(remainders, k)
    no_counts: Mapping[ids.WorkerId, int] = {}

    def holds_extra(member: ids.WorkerId) -> int:
        return sum(
            1 for group, (floor, extra) in shape.items()
            if extra and counts.get(group, no_counts).get(member, 0) > floor
        )

    ranked = sorted(members, key=lambda m: (-holds_extra(m), -loads.get(m, 0), m))
    demand = {m: base + (1 if rank < extra_members else 0) for rank, m in enumerate(ranked)}
    target: dict[str, dict[ids.WorkerId, int]] = {}
    for group in sorted(shape, key=lambda g: (-shape[g][1], g)):
        floor, extra = shape[group]
        held = counts.get(group, no_counts)
        row = dict.fromkeys(members, floor) if floor else {}
        if extra:
            chosen = sorted(
                (m for m in members if demand[m] > 0),
                key=lambda m: (-demand[m], -min(held.get(m, 0), floor + 1), m),
            )[:extra]
            for member in chosen:
                demand[member] -= 1
                row[member] = floor + 1
        target[group] = row
    rows = [g for g in sorted(shape) if shape[g][1]]
    if len(rows) * k * remainders <= _FLOW_BUDGET:
        best = _fewest_moves(rows, shape, counts, members, demands=(base, extra_members),
                             moved=moved)
        for group in rows:
            floor = shape[group][0]
            target[group] = {
                m: floor + (1 if m in best[group] else 0)
                for m in members
                if floor or m in best[group]
            }
    else:
        _improve(target, shape, counts, members)
    return target


_FLOW_BUDGET = 4_000_000
"""Above this (connectors × members × remainders) the exact search gives way to swaps."""


def _fewest_moves(
    rows: Sequence[str],
    shape: Mapping[str, tuple[int, int]],
    counts: Mapping[str, Mapping[ids.WorkerId, int]],
    members: Sequence[ids.WorkerId],
    *,
    demands: tuple[int, int],
    moved: Callable[[str, ids.WorkerId, int], int] | None = None,
) -> dict[str, set[ids.WorkerId]]:
    """Which members take each connector's remainder, keeping the most tasks in place.

    A minimum-cost flow: each connector sends its ``n % k`` remainders to distinct
    members, each member takes ``base`` of them and at most ``extra_members`` members
    one more; a remainder given to a member already holding more than ``n // k`` of that
    connector costs -1 (a task that stays). Successive shortest paths (Bellman-Ford, the
    graph is small: only unspread groups get here) find the optimum.

    With ``moved``, a task that stays costs ``-scale + epoch`` instead of -1: ``scale``
    exceeds any sum of epochs the remainders can keep, so the fewest moves come first
    and, among those, the tasks handed out least stay.
    """
    no_counts: Mapping[ids.WorkerId, int] = {}
    base, extra_members = demands
    source, bonus = 0, 1
    row_node = {g: 2 + i for i, g in enumerate(rows)}
    col_node = {m: 2 + len(rows) + j for j, m in enumerate(members)}
    sink = 2 + len(rows) + len(members)
    nodes = sink + 1
    # Edge lists: to, capacity, cost, index of the reverse edge.
    graph: list[list[list[int]]] = [[] for _ in range(nodes)]

    def edge(a: int, b: int, capacity: int, cost: int) -> None:
        graph[a].append([b, capacity, cost, len(graph[b])])
        graph[b].append([a, 0, -cost, len(graph[a]) - 1])

    stays: dict[tuple[str, ids.WorkerId], int] = {
        (group, member): moved(group, member, shape[group][0]) if moved else 0
        for group in rows
        for member, count in counts.get(group, no_counts).items()
        if count > shape[group][0]
    }
    scale = sum(shape[group][1] for group in rows) * (max(stays.values(), default=0) + 1) + 1
    for group in rows:
        extra = shape[group][1]
        edge(source, row_node[group], extra, 0)
        for member in members:
            epoch = stays.get((group, member))
            cost = 0 if epoch is None else (epoch - scale if moved else -1)
            edge(row_node[group], col_node[member], 1, cost)
    for member in members:
        if base:
            edge(col_node[member], sink, base, 0)
        if extra_members:
            edge(col_node[member], bonus, 1, 0)
    if extra_members:
        edge(bonus, sink, extra_members, 0)
    infinity = 1 << 60
    while True:
        distance = [infinity] * nodes
        parent: list[tuple[int, int] | None] = [None] * nodes
        distance[source] = 0
        queue = deque([source])
        queued = [False] * nodes
        queued[source] = True
        while queue:
            node = queue.popleft()
            queued[node] = False
            for index, (to, capacity, cost, _) in enumerate(graph[node]):
                if capacity > 0 and distance[node] + cost < distance[to]:
                    distance[to] = distance[node] + cost
                    parent[to] = (node, index)
                    if not queued[to]:
                        queued[to] = True
                        queue.append(to)
        if distance[sink] == infinity:
            break
        node = sink
        while node != source:
            step = parent[node]
            assert step is not None
            previous, index = step
            forward = graph[previous][index]
            forward[1] -= 1
            graph[node][forward[3]][1] += 1
            node = previous
    chosen: dict[str, set[ids.WorkerId]] = {}
    members_of = {col_node[m]: m for m in members}
    for group in rows:
        chosen[group] = {
            members_of[to]
            for to, capacity, _, _ in graph[row_node[group]]
            if to in members_of and capacity == 0
        }
    return chosen


def _improve(
    target: dict[str, dict[ids.WorkerId, int]],
    shape: Mapping[str, tuple[int, int]],
    counts: Mapping[str, Mapping[ids.WorkerId, int]],
    members: Sequence[ids.WorkerId],
    budget: int = 10_000,
) -> None:
    """Exchange remainders between members while that keeps more tasks where they are.

    A member that holds a connector's extra task but was not given the remainder (and
    one that was given it without holding it) trade places, either directly when
    their remainder totals allow, or through a second connector the other way round.
    Both keep every row and column sum, so the target stays balanced and spread; each
    exchange keeps one more task in place, so the loop ends (``budget`` bounds it).
    """
    no_counts: Mapping[ids.WorkerId, int] = {}
    extras = {
        group: {m for m, n in target[group].items() if n > floor}
        for group, (floor, extra) in shape.items() if extra
    }
    wants = {
        group: {m for m, n in counts.get(group, no_counts).items() if n > shape[group][0]}
        for group in extras
    }
    total = Counter[ids.WorkerId]()
    for chosen in extras.values():
        total.update(chosen)
    low = min((total.get(m, 0) for m in members), default=0)
    improved = True
    while improved and budget > 0:
        improved = False
        for group in sorted(extras):
            chosen = extras[group]
            for newcomer in sorted(wants[group] - chosen):
                for leaver in sorted(chosen - wants[group]):
                    budget -= 1
                    if total[newcomer] == low and total[leaver] == low + 1:
                        via = None  # a direct trade: they swap remainder totals too
                    else:
                        via = next(
                            (
                                other for other in sorted(extras)
                                if newcomer in extras[other]
                                and leaver not in extras[other]
                                and newcomer not in wants[other]
                            ),
                            None,
                        )
                        if via is None:
                            continue
                        extras[via].discard(newcomer)
                        extras[via].add(leaver)
                    if via is None:
                        total[newcomer] += 1
                        total[leaver] -= 1
                    chosen.discard(leaver)
                    chosen.add(newcomer)
                    improved = True
                    break
                if improved:
                    break
            if improved:
                break
    for group, chosen in extras.items():
        floor = shape[group][0]
        target[group] = {
            m: floor + (1 if m in chosen else 0)
            for m in members
            if floor or m in chosen
        }
