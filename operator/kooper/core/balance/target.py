"""The spread target: each connector's tasks over as many members as it has tasks.

Under ``kooper`` a group is *spread* when every connector's ``n`` tasks are held by
the ``k`` members ``n // k`` or ``n // k + 1`` each (so over ``min(n, k)`` members,
within one; ``quotas.spread_ok``). Placement alone cannot keep that: a connector
created in the round a member joins finds every other member full, and the newcomer
takes all of it (KAFKA-17049). ``spread_target`` computes an assignment shape that is
both count-balanced and spread, as close to the current holdings as its search finds
(``search``: exact for small groups; ``paths`` from the holdings for big ones); the
assignor moves towards it only when the group is not spread.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from kooper.core import ids
from kooper.core.balance import paths, search
from kooper.core.balance.search import Shape

_FLOW_BUDGET = 4_000_000
"""Above this (connectors × members × remainders) the exact search gives way to
``paths.from_holdings`` and ``search.improve``'s exchanges."""
_POLISH_BUDGET = 1_000
"""The pairs ``search.improve`` tries after ``paths.from_holdings`` (10,000 after the
greedy, which starts further away)."""


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

    Which members take which remainders: the exact search (a minimum-cost flow) when
    ``connectors x members x remainders`` is within ``_FLOW_BUDGET``; above it,
    ``paths.from_holdings`` (the holdings kept, the rest placed along shortest
    exchange paths), improved by ``search.improve``'s exchanges. Should that
    find no path, Ryser's construction of a 0-1 matrix with given row and column sums
    (connectors, largest remainder first, to the members with the most remainders still
    to take; it never gets stuck) is the start instead. Members with no entry in a
    connector's result hold none of it.

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
    rows = [g for g in sorted(shape) if shape[g][1]]
    best: Mapping[str, set[ids.WorkerId]] | None
    if len(rows) * k * remainders <= _FLOW_BUDGET:
        best = search.fewest_moves(rows, shape, counts, members,
                                   demands=(base, extra_members), moved=moved)
    else:
        start = paths.from_holdings(shape, counts, members,
                                    demands=(base, extra_members), moved=moved)
        if start is None:
            demand = _demand(shape, counts, members, loads, (base, extra_members))
            best = search.improve(_greedy(shape, counts, members, demand), shape, counts,
                                  members)
        else:
            # A few exchanges polish what the paths found (their start is close already).
            best = search.improve({group: search.row(shape[group][0], chosen, members)
                                   for group, chosen in start.items()}, shape, counts,
                                  members, budget=_POLISH_BUDGET)
    # (In the greedy's order, largest remainder first, as the rows always came.)
    return {group: search.row(shape[group][0], best.get(group, set()), members)
            for group in sorted(shape, key=lambda g: (-shape[g][1], g))}


def _demand(
    shape: Shape,
    counts: Mapping[str, Mapping[ids.WorkerId, int]],
    members: Sequence[ids.WorkerId],
    loads: Mapping[ids.WorkerId, int],
    demands: tuple[int, int],
) -> dict[ids.WorkerId, int]:
    """How many remainders each member takes: ``base``, and one more for ``extra_members``
    of them, those holding the most extra tasks first, then the heaviest, then by id."""
    base, extra_members = demands
    no_counts: Mapping[ids.WorkerId, int] = {}

    def holds_extra(member: ids.WorkerId) -> int:
        return sum(
            1 for group, (floor, extra) in shape.items()
            if extra and counts.get(group, no_counts).get(member, 0) > floor
        )

    ranked = sorted(members, key=lambda m: (-holds_extra(m), -loads.get(m, 0), m))
    return {m: base + (1 if rank < extra_members else 0) for rank, m in enumerate(ranked)}


def _greedy(
    shape: Shape,
    counts: Mapping[str, Mapping[ids.WorkerId, int]],
    members: Sequence[ids.WorkerId],
    demand: dict[ids.WorkerId, int],
) -> dict[str, dict[ids.WorkerId, int]]:
    """Ryser's construction: connectors, largest remainder first, give theirs to the
    members with the most remainders still to take (``demand``, used up), those already
    holding the extra task first."""
    no_counts: Mapping[ids.WorkerId, int] = {}
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
    return target
