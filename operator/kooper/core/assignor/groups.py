"""Per connector, how many of its tasks each member holds, counted once a round.

A frozen set is parsed once a round: placement and the spread check ask about the
same sets, the thousand members nobody edited. With a persistent ``Cache`` the
counts come from its ``Groups`` index instead (``is_spread``, ``placement``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from collections.abc import Set as AbstractSet

from kooper.core import ids
from kooper.core.assignor.draft import Draft
from kooper.core.assignor.holdings import Round
from kooper.core.assignor.indexes import Connectors, Doubled


def connectors(tasks: AbstractSet[str]) -> Connectors:
    """The connectors of ``tasks``: a set while each has at most one task in it, else
    how many each has (in first-seen order, as ``Counter`` over the tasks)."""
    names: list[str] = list(ids.task_connectors(tasks))
    distinct = set(names)
    return distinct if len(distinct) == len(names) else Counter(names)


def doubled(r: Round, tasks: AbstractSet[str]) -> Doubled:
    """How many tasks of each connector ``tasks`` has if it has two of one, else None.

    Only the answer is kept (for a frozen set, by identity), not the parsed names.
    """
    if isinstance(tasks, frozenset):
        known = r.doubled_of().get(id(tasks))
        if known is not None:
            return known[1]
    held = connectors(tasks)
    result = held if isinstance(held, Counter) else None
    if isinstance(tasks, frozenset):
        r.doubled_of()[id(tasks)] = (tasks, result)  # holding the set: ids stay unique
    return result


def doubled_within(r: Round, tasks: AbstractSet[str], whole: frozenset[str]) -> Doubled:
    """``doubled(tasks)``, answered without reading an id when ``tasks`` is part of
    ``whole`` (a member that only gave up work) and ``whole`` is known to hold no two
    tasks of one connector."""
    if tasks is not whole:
        known = r.doubled_of().get(id(whole))
        if known is not None and known[1] is None and tasks <= whole:
            return None
    return doubled(r, tasks)


def count_groups(
    r: Round, holdings: Mapping[ids.WorkerId, AbstractSet[str]], groups: AbstractSet[str]
) -> dict[str, Counter[ids.WorkerId]]:
    """``balance.count_groups(holdings, groups)`` for drafts, reading only the wanted
    connectors' ids: a draft holds configured tasks only (``contested.kept``), and a
    connector's are its ``size`` ids (none, if it is not configured)."""
    counts: dict[str, Counter[ids.WorkerId]] = {group: Counter() for group in groups}
    sizes = r.snapshot.connectors
    named = {task for group in counts for task in ids.task_ids(group, sizes.get(group, 0))}
    if not named:
        return counts
    for member, tasks in holdings.items():
        mine = named.intersection(tasks)
        for name in ids.task_connectors(mine):
            row = counts[name]
            row[member] = row.get(member, 0) + 1  # no ``Counter.__missing__`` call
    return counts


def is_spread(r: Round, draft: Draft) -> bool:
    """Whether every connector's tasks are spread in ``draft`` (``balance.spread_ok``)."""
    sizes = r.snapshot.connectors
    members = len(r.order)
    if members <= 1:
        return True
    if r.cache.spread_indexed():
        # The per-connector index; until it is built, the one pass below.
        index = r.cache.groups
        index.sync(draft.base)
        changed = {m: draft.edited[m] for m in draft.edited}
        return index.all_spread(changed, sizes, members)
    # One pass, no index: a member holding at most one task of each connector can
    # only break spread where it holds more than ``n // k``, which then is 0, and
    # a connector's ``n`` tasks never have more than ``n`` holders. Only members
    # holding two of one connector are counted.
    over = Counter[str]()
    for member in r.order:
        groups = doubled_within(r, draft.get(member), draft.base[member])
        if groups is None:
            continue
        for group, count in groups.items():
            floor, extra = divmod(sizes.get(group, 0), members)
            if count > floor:
                if count > floor + 1 or not extra:
                    return False
                over[group] += 1
    return all(n <= sizes.get(g, 0) % members for g, n in over.items())

