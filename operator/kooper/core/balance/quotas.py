"""Load arithmetic: how many each member should hold, and how many it gives up.

``N`` resources over ``k`` members: everyone ends with ``lo = N // k`` or
``hi = lo + 1``, and exactly ``N % k`` members with ``hi``. Revocation keeps the
heaviest members at ``hi`` (fewest moves); allocation (``placing``) hands the ``hi``
slots out lazily, so the spreading rule can choose who gets them. A connector's
tasks are *spread* when every member holds ``n // k`` or ``n // k + 1`` of its
``n`` tasks (``spread_ok``; ``target.spread_target`` builds such a shape).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping

from kooper.core import ids


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
    return _spread(max(held.values()), floor, extra, lambda: _at_ceil(held, floor))


def spread_of(histogram: Mapping[int, int], size: int, members: int) -> bool:
    """``spread_ok`` from a connector's histogram (held count → how many members hold
    that many; zero entries allowed), for an index that keeps histograms
    (``assignor.spreadindex.Groups``): the rule reads only the largest count and how many
    members hold ``floor + 1``. ``tests/core/test_spread.py`` checks the two agree."""
    held = [count for count, holders in histogram.items() if holders > 0]
    if not held or members <= 0:
        return True
    floor, extra = divmod(size, members)
    return _spread(max(held), floor, extra, lambda: histogram[floor + 1])


def _spread(most: int, floor: int, extra: int, at_ceil: Callable[[], int]) -> bool:
    """The spread rule on the largest count: nobody above ``floor + 1``, and no more
    than ``extra`` members (``at_ceil()``, asked only then) at ``floor + 1``."""
    if extra == 0:
        return most <= floor
    if most <= floor:
        return True
    if most > floor + 1:
        return False
    return at_ceil() <= extra


def _at_ceil(held: Mapping[ids.WorkerId, int], floor: int) -> int:
    """How many members hold more than ``floor`` (the largest count being ``floor + 1``)."""
    if floor == 0 and min(held.values()) > 0:
        return len(held)  # every member listed holds one: no count to walk
    return sum(1 for count in held.values() if count > floor)
