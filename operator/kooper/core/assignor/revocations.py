"""Stage six, revocations: whether balancing may revoke this round, and what.

With no delay pending, members above their target revoke just enough for the group
to end balanced (``balance.revocation_counts``), paced by ``core.backoff``. Nothing
is revoked for balance while a delay is pending, nor, under ``kooper``, while a
rollout is in progress (``rules.receivers``). Connectors and tasks go through the same
path, each kind balanced on its own (as Kafka does).
"""

from __future__ import annotations

import dataclasses
import heapq
import itertools
from collections import Counter
from collections.abc import Callable, Iterable

from kooper.core import backoff, balance, ids, model
from kooper.core.assignor import rules
from kooper.core.assignor.contested import Kept
from kooper.core.assignor.draft import Draft
from kooper.core.assignor.holdings import Round

Pick = Callable[[Iterable[str], int], list[str]]
"""Which ``count`` of a member's resources to revoke."""


Counts = dict[ids.WorkerId, int]
"""Per member, how many resources of one kind it gives up (``balance.revocation_counts``)."""


@dataclasses.dataclass(frozen=True, slots=True)
class Decision:
    """Whether balancing wants to revoke, whether it may this round, and the backoff;
    with ``counts``, how many of each kind (connectors, tasks) each member gives up."""

    wanted: bool
    may_revoke: bool
    held_back: model.RevocationBackoff
    counts: tuple[Counts, Counts] | None = None

    def revoking(self) -> tuple[Counts, Counts] | None:
        """The counts to revoke this round: None unless it may."""
        return self.counts if self.may_revoke else None


def kinds(r: Round, kept: Kept) -> tuple[tuple[Draft, int, bool], tuple[Draft, int, bool]]:
    """(draft, configured count, whether it is the tasks) of connectors, then tasks."""
    return ((kept.connectors, len(r.configured.connectors), False),
            (kept.tasks, len(r.configured.tasks), True))


def decide(r: Round, kept: Kept, delay: model.Delay | None) -> Decision:
    """Whether this round may revoke for balance (``core.backoff`` paces it)."""
    previous = r.previous
    if delay is not None or r.receivers is not None:
        # KIP-415: no revocation for balance while a delay is pending; and under
        # ``kooper`` none while a rollout is in progress (``rules.receivers``).
        return Decision(False, False, backoff.deferred(previous.backoff))
    counted = counts(r, kept) if r.order else ({}, {})
    wanted = wants_revocation(r, kept, counted)
    return Decision(wanted, *backoff.decide(
        previous.backoff, wants_revocation=wanted, now_ms=r.now_ms,
        max_delay_ms=r.snapshot.settings.max_delay_ms,
    ), counts=counted)


def insist(r: Round, decision: Decision, delay: model.Delay | None) -> Decision:
    """``decision`` once spreading wants a balancing revocation too (``spread.reshape``)."""
    if delay is not None or decision.wanted:
        return decision
    return Decision(True, *backoff.decide(
        r.previous.backoff, wants_revocation=True, now_ms=r.now_ms,
        max_delay_ms=r.snapshot.settings.max_delay_ms,
    ), counts=decision.counts)


def counts(r: Round, kept: Kept) -> tuple[Counts, Counts]:
    """(connectors, tasks): how many each member gives up for its kind to end balanced,
    counted once a round, before placement edits the drafts (``revoke`` trims by them)."""
    c, t = (balance.revocation_counts(draft.sizes(), total, moved(r, draft))
            for draft, total, _ in kinds(r, kept))
    return c, t


def wants_revocation(r: Round, kept: Kept, counted: tuple[Counts, Counts]) -> bool:
    """Whether balancing would stop something a member runs (``core.backoff`` asks).

    Trimming what a member was only handed this round stops nothing, so it is
    not a revocation.
    """
    held = r.held
    for (draft, _, is_tasks), kind_counts in zip(kinds(r, kept), counted, strict=True):
        for member, count in kind_counts.items():
            has = held[member].tasks if is_tasks else held[member].connectors
            if count > sum(1 for x in draft.get(member) if x not in has):
                return True
    return False


def moved(r: Round, draft: Draft) -> Callable[[ids.WorkerId, int], int] | None:
    """With ``least_moved``: the epoch of a member's ``n``-th least handed out resource
    in ``draft`` (``balance.revocation_counts`` keeps at ``hi`` the members whose work
    moved least); else None (Kafka's order)."""
    if not r.rules.least_moved:
        return None
    epochs = r.previous.epochs

    def nth(member: ids.WorkerId, n: int) -> int:
        resources = draft.get(member)
        largest = len(resources) - n + 1  # the n-th smallest is the this-th largest
        if n <= 0 or largest <= 0:
            return 0
        values = map(epochs.get, resources, itertools.repeat(0))
        return max(values) if largest == 1 else heapq.nlargest(largest, values)[-1]

    return nth


def revoke(r: Round, kept: Kept,
           counted: tuple[Counts, Counts]) -> tuple[frozenset[str], frozenset[str]]:
    """Trim members by ``counted`` (``counts``, on the drafts as they are still); return
    what was trimmed without being held (connectors, tasks): it goes back to the free
    work."""
    epochs = r.previous.epochs if r.rules.least_moved else None
    spread = r.rules.spread
    taken = Counter[str]()
    moved_first = rules.moved_first(r.snapshot)

    def pick_last(resources: Iterable[str], count: int) -> list[str]:
        return balance.pick_last(resources, count, epochs)

    def pick_spread(tasks: Iterable[str], count: int) -> list[str]:
        return balance.pick_spread_tasks(tasks, count, taken, epochs, moved_first=moved_first)

    freed: list[frozenset[str]] = []
    for (draft, _, is_tasks), kind_counts in zip(kinds(r, kept), counted, strict=True):
        pick = pick_spread if is_tasks and spread else pick_last
        trimmed: frozenset[str] = frozenset()
        for member, count in kind_counts.items():
            held = r.held[member]
            trimmed |= trim(draft, member, held.tasks if is_tasks else held.connectors,
                            count, pick)
        freed.append(trimmed)
    return freed[0], freed[1]


def trim(draft: Draft, member: ids.WorkerId, held: frozenset[str], count: int,
         pick: Pick) -> frozenset[str]:
    """Take ``count`` resources off a member's draft; return those it did not hold.

    What the member was only handed this round (its own lost work, a candidate's
    grant) goes first and goes back to the free work: trimming it stops nothing,
    so another member can start it in this very round.
    """
    current = draft.get(member)
    unheld = [x for x in current if x not in held] if member in draft.edited else []
    picked = pick(unheld, min(count, len(unheld))) if unheld else []
    if count > len(picked):
        mine = current if current <= held else [x for x in current if x in held]
        picked = [*picked, *pick(mine, count - len(picked))]
    draft.edit(member).difference_update(picked)
    return frozenset(x for x in picked if x not in held)
