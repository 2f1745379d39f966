"""Under ``spread`` (``kooper``), after placement: keep every connector's tasks spread.

When placement could not keep every connector spread, the round moves towards a
shape that is balanced and spread (``balance.spread_target``). Revoking for it is a
balancing revocation: paced by the backoff, never while a delay is pending, and only
through the barrier.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Mapping
from collections.abc import Set as AbstractSet

from kooper.core import balance, ids, model
from kooper.core.assignor import groups, placement, revocations
from kooper.core.assignor.draft import Draft
from kooper.core.assignor.holdings import Round
from kooper.core.assignor.revocations import Decision

Counts = dict[str, Counter[ids.WorkerId]]
Order = Callable[[ids.WorkerId, str], list[str]]


def moot(delay: model.Delay | None, free_t: frozenset[str], nxt_t: Draft) -> bool:
    """Whether ``reshape`` may skip asking if the draft is spread.

    While a delay is pending nothing is revoked, and with no task placed or edited
    every task in the draft is one its member holds: a move towards spread could only
    revoke, so the answer cannot change the plan. Not asking saves a pass over every
    task in the rounds of a delay.
    """
    return delay is not None and not free_t and not nxt_t.edited


def reshape(r: Round, before: Draft, placed: Draft, free_t: frozenset[str], *,
            delay: model.Delay | None, decision: Decision) -> tuple[Draft, Decision]:
    """The tasks' draft to plan (``placed``, or one moved towards spread from ``before``,
    the draft before placement) and the revocation decision that goes with it."""
    if r.receivers is not None or moot(delay, free_t, placed) \
            or groups.is_spread(r, projected(r, before, placed)):
        return placed, decision
    shaped, revokes = toward_spread(r, before, free_t)
    if revokes:
        decision = revocations.insist(r, decision, delay)
    if not revokes or (delay is None and decision.may_revoke):
        return shaped, decision
    return placed, decision


def projected(r: Round, before: Draft, after: Draft) -> Draft:
    """``after`` as it will be once this round's revocations are acknowledged and placed.

    Balancing revokes in one round and places in the next; whether the group ends
    spread is a question about that end, so it is asked of the projection.
    """
    revoked: set[str] = set()
    for member in after.edited:
        gone = before.get(member) - after.get(member)
        if gone:
            revoked.update(gone & r.held[member].tasks)
    if not revoked:
        return after
    result = after.copy()
    placement.place_spread(r, result, revoked)
    return result


def toward_spread(r: Round, draft: Draft, free_t: frozenset[str]) -> tuple[Draft, bool]:
    """``draft`` moved to ``balance.spread_target``: what to revoke, and free work placed.

    Returns the new draft and whether it revokes anything a member holds (a
    balancing revocation). Excess a member was only handed this round goes back to
    the free work first; held excess is revoked, highest task numbers first, and its
    place is filled once the owner acknowledges (the barrier).
    """
    sizes = {g: n for g, n in r.snapshot.connectors.items() if n > 0}
    shaped = draft.copy()
    holdings = shaped.holdings()
    counts = balance.count_groups(holdings, sizes)
    order = _revocation_order(r, holdings)
    epochs = r.previous.epochs

    def moved(group: str, member: ids.WorkerId, floor: int) -> int:
        return epochs.get(order(member, group)[floor], 0)

    target = balance.spread_target(counts, sizes, r.order, shaped.sizes(), moved)
    free, revokes = _shed_excess(r, shaped, counts, target, order)
    free.update(free_t)
    _fill(r, shaped, counts, target, free)
    return shaped, revokes


def _revocation_order(r: Round, holdings: Mapping[ids.WorkerId, AbstractSet[str]]) -> Order:
    """A member's tasks of a connector in the order to give them up: unheld first
    (trimming those stops nothing), then those handed out most often (work that already
    moved, e.g. during a rollout, moves again before work that never did), then the
    highest numbers: the last ones go."""
    epochs = r.previous.epochs
    sorted_of: dict[ids.WorkerId, dict[str, list[str]]] = {}

    def order(member: ids.WorkerId, group: str) -> list[str]:
        by_group = sorted_of.get(member)
        if by_group is None:
            by_group = sorted_of[member] = defaultdict(list)
            for task in holdings[member]:
                by_group[balance.task_group(task)].append(task)
        held = r.held[member].tasks
        return sorted(by_group[group], key=lambda t: (t not in held, epochs.get(t, 0),
                                                      model.resource_sort_key(t)))

    return order


def _shed_excess(r: Round, shaped: Draft, counts: Counts,
                 target: dict[str, dict[ids.WorkerId, int]], order: Order) -> tuple[set[str], bool]:
    """Take each member's tasks above its target off ``shaped``; return those it did
    not hold (free again) and whether any it held goes (a revocation)."""
    free: set[str] = set()
    revokes = False
    for member in r.order:
        excess = {
            g: n - target.get(g, {}).get(member, 0)
            for g, counter in counts.items()
            if (n := counter.get(member, 0)) > target.get(g, {}).get(member, 0)
        }
        if not excess:
            continue
        held = r.held[member].tasks
        edit = shaped.edit(member)
        for group, count in excess.items():
            ordered = order(member, group)
            for task in ordered[len(ordered) - count:]:
                edit.discard(task)
                counts[group][member] -= 1
                if task in held:
                    revokes = True
                else:
                    free.add(task)
    return free, revokes


def _fill(r: Round, shaped: Draft, counts: Counts,
          target: dict[str, dict[ids.WorkerId, int]], free: set[str]) -> None:
    """Place ``free`` up to each member's target; what the target has no room for
    (never expected) by load."""
    by_group_free: dict[str, list[str]] = defaultdict(list)
    for task in sorted(free, key=model.resource_sort_key):
        by_group_free[balance.task_group(task)].append(task)
    leftover: list[str] = []
    for group, waiting in by_group_free.items():
        row = target.get(group, {})
        counter = counts.get(group, Counter())
        queue = iter(waiting)
        for member in r.order:
            for _ in range(row.get(member, 0) - counter.get(member, 0)):
                placed = next(queue, None)
                if placed is None:
                    break
                shaped.edit(member).add(placed)
        leftover.extend(queue)
    if leftover:
        given = balance.allocate(leftover, shaped.sizes(), total=len(r.configured.tasks))
        for member, resources in given.items():
            shaped.edit(member).update(resources)

