"""Stage seven, placement: free work to the least-loaded members.

Each kind is balanced on its own, connectors and tasks through one path; under
``spread`` a connector's free tasks go first to the members with the fewest of that
connector (``balance.allocate``'s groups). Under ``lost_as_one_pool`` released lost
work is placed over connectors and tasks together, as KIP-415's tables do. During a
rollout only ``Round.receivers`` receive.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Set as AbstractSet

from kooper.core import balance, ids, model
from kooper.core.assignor import groups, revocations
from kooper.core.assignor.contested import Kept
from kooper.core.assignor.delay import Waiting
from kooper.core.assignor.draft import Draft
from kooper.core.assignor.free import Free
from kooper.core.assignor.holdings import Round

_NONE: frozenset[str] = frozenset()


def place(r: Round, kept: Kept, free: Free, waiting: Waiting, *,
          revoking: tuple[revocations.Counts, revocations.Counts] | None) -> None:
    """Revoke for balance (``revoking``: the counts, if it may), then place the free
    work, in ``kept``."""
    free_c, free_t = free.connectors, free.tasks
    pooled_c = pooled_t = _NONE
    if r.rules.lost_as_one_pool:
        pooled_c, pooled_t = pooled(r, free, waiting)
        free_c, free_t = free_c - pooled_c, free_t - pooled_t
    if revoking is not None:
        freed_c, freed_t = revocations.revoke(r, kept, revoking)
        free_c, free_t = free_c | freed_c, free_t | freed_t
    if free_c:
        _allocate(r, kept.connectors, free_c, len(r.configured.connectors))
    if free_t and r.rules.spread:
        place_spread(r, kept.tasks, free_t)
    elif free_t:
        _allocate(r, kept.tasks, free_t, len(r.configured.tasks))
    if pooled_c or pooled_t:
        place_as_one_pool(r, kept, pooled_c, pooled_t)


def pooled(r: Round, free: Free, waiting: Waiting) -> tuple[frozenset[str], frozenset[str]]:
    """The free work KIP-415 places as one pool: lost work released this round.

    Everything else follows Kafka's current assignor: each kind balanced on its own.
    """
    previous = r.previous
    if r.snapshot.settings.max_delay_ms <= 0:
        # No delay: Kafka reassigns lost work as new, each kind on its own.
        return _NONE, _NONE
    if not previous.forgotten:
        return free.connectors & waiting.released.connectors, \
            free.tasks & waiting.released.tasks
    # A new leader cannot tell lost work from new. It counts as lost what was assigned
    # before (it has an epoch) or belongs to a connector some member still runs part
    # of, and nobody owns now.
    seen = previous.epochs
    running = {
        name
        for holding in r.held.values()
        for name in (*holding.connectors, *map(ids.task_connector, holding.tasks))
    }
    return (frozenset(x for x in free.connectors if x in seen or x in running),
            frozenset(x for x in free.tasks if x in seen or ids.task_connector(x) in running))


def _allocate(r: Round, draft: Draft, free: AbstractSet[str], total: int) -> None:
    """Free resources of one kind to the least loaded receivers, KIP-415 order."""
    given = balance.allocate(sorted(free, key=model.resource_sort_key),
                             receiving(r, draft.sizes()), total=total)
    for member, resources in given.items():
        draft.edit(member).update(resources)


def place_spread(r: Round, nxt_t: Draft, free_t: AbstractSet[str]) -> None:
    """Free tasks to the members with the fewest of their connector, then the least load."""
    ordered = sorted(free_t, key=model.resource_sort_key)
    wanted = {balance.task_group(task) for task in ordered}
    if r.cache.persistent:
        index = r.cache.groups
        index.sync(nxt_t.base)
        group_counts = index.of(nxt_t.edited, wanted)  # the others' sets are the index's
    else:
        group_counts = groups.count_groups(r, nxt_t.holdings(), wanted)
    receivers = r.receivers
    if receivers is not None:
        group_counts = {group: Counter({m: n for m, n in counter.items() if m in receivers})
                        for group, counter in group_counts.items()}
    given = balance.allocate(
        ordered,
        receiving(r, nxt_t.sizes()),
        total=len(r.configured.tasks),
        group_of=balance.task_group,
        group_counts=group_counts,
    )
    for member, resources in given.items():
        nxt_t.edit(member).update(resources)


def receiving(r: Round, sizes: dict[ids.WorkerId, int]) -> dict[ids.WorkerId, int]:
    """``sizes`` of the members that may receive free work (``rules.receivers``)."""
    receivers = r.receivers
    if receivers is None:
        return sizes
    return {member: size for member, size in sizes.items() if member in receivers}


def place_as_one_pool(r: Round, kept: Kept, free_c: frozenset[str],
                      free_t: frozenset[str]) -> None:
    """Place free work by connectors and tasks together, tasks first (KIP-415's tables)."""
    nxt_c, nxt_t = kept.connectors, kept.tasks
    ordered = [
        *sorted(free_t, key=model.resource_sort_key),
        *sorted(free_c, key=model.resource_sort_key),
    ]
    loads = {m: nxt_c.size(m) + nxt_t.size(m) for m in r.order}
    given = balance.allocate(ordered, loads, total=len(r.configured))
    for member, resources in given.items():
        for resource in resources:
            (nxt_c if resource in free_c else nxt_t).edit(member).add(resource)
