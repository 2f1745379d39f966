"""Which resources a member gives up, once ``quotas`` says how many.

Under ``kip415`` a member keeps what comes first in KIP-415 order (``pick_last``);
under ``kooper`` it gives up tasks of the connectors it holds most of first
(``pick_spread_tasks``), so every revocation also spreads a connector's tasks.
"""

from __future__ import annotations

import heapq
import itertools
import operator
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence

from kooper.core import ids, model


def pick_last(resources: Iterable[str], count: int,
              epochs: Mapping[str, int] | None = None) -> list[str]:
    """The ``count`` resources that come last in KIP-415 order (keep the first ones);
    with ``epochs``, those handed out most often first (work that already moved)."""
    if epochs:
        ordered = sorted(resources, key=lambda r: (epochs.get(r, 0), model.resource_sort_key(r)))
    else:
        ordered = sorted(resources, key=model.resource_sort_key)
    return ordered[len(ordered) - count :] if count > 0 else []


_Entry = tuple[int, int, int, int]
"""A connector in ``pick_spread_tasks``'s heap: (-tasks held, -top epoch, picked, rank),
or (-tasks held, picked, -top epoch, rank) when the picks spread first."""


def pick_spread_tasks(
    tasks: Iterable[str], count: int, taken: Counter[str] | None = None,
    epochs: Mapping[str, int] | None = None, *, moved_first: bool = True,
) -> list[str]:
    """``count`` tasks to revoke, taken from the connectors this member holds most of.

    Revoking from the most-concentrated connector first makes every revocation
    also improve the spread of that connector's tasks over the group. Among connectors
    held as much, two orders (``rules.moved_first`` says which a round uses):

    * ``moved_first``: the connector whose task was handed out most often (``epochs``:
      work that already moved moves again before work that never did), then the one
      fewest of whose tasks were already picked this round (``taken``, updated);
    * else ``taken`` first, then the epochs: the members that receive the picks can
      take them without holding two of one connector, so a join's revocations leave
      the group spread and move nobody else.

    Within a connector, the task handed out most often goes first, then the highest
    number.
    """
    if count <= 0:
        return []
    listed = list(tasks)
    connectors: list[str] = list(ids.task_connectors(listed))
    seen = taken if taken is not None else Counter[str]()
    if len(set(connectors)) == len(connectors):
        return _pick_singles(listed, connectors, count, seen, epochs, moved_first=moved_first)
    by_connector: dict[str, list[str]] = defaultdict(list)
    for task, connector in zip(listed, connectors, strict=True):
        by_connector[connector].append(task)
    return _pick_tiers(by_connector, count, seen, epochs, moved_first)


def _pick_tiers(by_connector: Mapping[str, list[str]], count: int, seen: Counter[str],
                epochs: Mapping[str, int] | None, moved_first: bool) -> list[str]:
    """``pick_spread_tasks`` when some connector holds two tasks or more: a heap of
    connectors, each entering it once its size can come first."""
    # Ties go to the connector that sorts last, so a member keeps the resources
    # that come first in KIP-415 order (as the KIP's tables do); with ``epochs``,
    # first to the connector whose task was handed out most often.
    names = sorted(by_connector, reverse=True)
    # The heap orders by size first, so a connector enters it (and its epochs are read)
    # only once its size can come first.
    tiers = _tiers(names, by_connector)
    sizes = sorted(tiers, reverse=True)
    heap: list[_Entry] = []
    seen_of = seen.get
    # Task numbers are parsed and sorted only for the connectors picked from: a
    # member usually gives up one or two tasks out of a hundred.
    numbers_of: dict[int, list[tuple[int, int]]] = {}
    chosen: list[str] = []
    while len(chosen) < count:
        while sizes and (not heap or sizes[0] >= -heap[0][0]):
            # Every connector not in the heap is at most this size: it may come first.
            size = sizes.pop(0)
            tier = [_entry(-size, _top(by_connector[name], epochs), seen_of(name, 0), rank,
                           moved_first)
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
            numbers = numbers_of[rank] = _numbered(by_connector[name], epochs)
        chosen.append(ids.task_id(name, numbers.pop()[1]))
        seen[name] += 1
        if numbers:
            heapq.heappush(heap, _entry(size + 1, -numbers[-1][0], seen[name], rank,
                                        moved_first))
    return chosen


def _entry(size: int, top: int, picked: int, rank: int, moved_first: bool) -> _Entry:
    """A connector's key in the heap (``_Entry``)."""
    return (size, top, picked, rank) if moved_first else (size, picked, top, rank)


def _tiers(names: Sequence[str], by_connector: Mapping[str, list[str]]) -> dict[int, list[int]]:
    """The ranks in ``names`` of the connectors holding each number of tasks."""
    tiers: dict[int, list[int]] = defaultdict(list)
    if by_connector:
        for rank, name in enumerate(names):
            tiers[len(by_connector[name])].append(rank)
    return tiers


def _pick_singles(tasks: Sequence[str], connectors: Sequence[str], count: int,
                  seen: Counter[str], epochs: Mapping[str, int] | None, *,
                  moved_first: bool) -> list[str]:
    """``pick_spread_tasks`` when no two ``tasks`` share a connector (``connectors``, in
    the same order): the picks are the ``count`` smallest keys at once, since a picked
    connector has nothing left and no other key changes. The keys are negated and the
    largest taken, so that ties go to the connector that sorts last without sorting."""
    if count == 1 and tasks:
        one = _best_single(tasks, connectors, seen, epochs, moved_first=moved_first)
        seen[connectors[one]] += 1
        return [tasks[one]]
    zero = itertools.repeat(0)
    tops: Iterable[int] = map(epochs.get, tasks, zero) if epochs else zero
    fewest = map(operator.neg, map(seen.get, connectors, zero))
    firsts, seconds = (tops, fewest) if moved_first else (fewest, tops)
    keys = zip(firsts, seconds, connectors, tasks, strict=False)
    best = heapq.nlargest(count, keys)
    for _, _, connector, _ in best:
        seen[connector] += 1
    return [task for *_, task in best]


def _best_single(tasks: Sequence[str], connectors: Sequence[str], seen: Counter[str],
                 epochs: Mapping[str, int] | None, *, moved_first: bool) -> int:
    """The index of ``_pick_singles``' one pick: the largest key, criterion by criterion
    (the highest epoch, the fewest picked, in ``moved_first``'s order; then the connector
    that sorts last, which decides since no two tasks share one), each narrowing the
    candidates with C-speed passes while every task ties, as most do."""
    zero = itertools.repeat(0)
    tops = list(map(epochs.get, tasks, zero)) if epochs else None
    picked = list(map(seen.get, connectors, zero)) if seen else None
    criteria = ((tops, max), (picked, min)) if moved_first else ((picked, min), (tops, max))
    candidates: list[int] | None = None  # None: every task
    for values, best_of in criteria:
        if values is None:
            continue
        if candidates is None:
            best = best_of(values)
            if values.count(best) == len(values):
                continue
            candidates = [i for i, value in enumerate(values) if value == best]
        else:
            best = best_of([values[i] for i in candidates])
            candidates = [i for i in candidates if values[i] == best]
    if candidates is None:
        return connectors.index(max(connectors))
    return max(candidates, key=connectors.__getitem__)


def _top(tasks: list[str], epochs: Mapping[str, int] | None) -> int:
    """Minus the highest epoch among a connector's ``tasks`` (0 without ``epochs``)."""
    if not epochs:
        return 0
    if len(tasks) == 1:
        return -epochs.get(tasks[0], 0)
    return -max(epochs.get(task, 0) for task in tasks)


def _numbered(tasks: Iterable[str], epochs: Mapping[str, int] | None) -> list[tuple[int, int]]:
    """``(epoch, task number)`` of ``tasks``, sorted: the one to give up first is last."""
    return sorted(((epochs.get(task, 0) if epochs else 0), ids.task_number(task))
                  for task in tasks)
