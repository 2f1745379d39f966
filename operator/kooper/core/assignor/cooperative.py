"""The cooperative round: the stages, in order, over one ``Round``.

Each stage is a function of its own module; this one only runs them (the table is in
``kooper.core.assignor``'s docstring).
"""

from __future__ import annotations

from kooper.core import ids, model
from kooper.core.assignor import (
    contested,
    delay,
    free,
    lost,
    outcome,
    placement,
    revocations,
    spread,
)
from kooper.core.assignor.draft import Draft
from kooper.core.assignor.holdings import Holdings, Round


def cooperative(r: Round) -> model.Plan:
    """Incremental cooperative rebalancing with deferred resolution of imbalance."""
    held = contested.union(r)
    kept = contested.kept(r, held)
    lost_work = lost.lost(r, held, kept)
    waiting = delay.wait(r, held, kept, lost_work)
    free_work = free.free(held, kept, waiting)
    decision = revocations.decide(r, kept, waiting.delay)
    tasks = kept.tasks
    if r.order:
        before = kept.tasks.copy() if r.rules.spread else None
        placement.place(r, kept, free_work, waiting, revoking=decision.revoking())
        if before is not None:
            tasks, decision = spread.reshape(r, before, kept.tasks, free_work.tasks,
                                             delay=waiting.delay, decision=decision)
    nxt = assignments(r, kept.connectors, tasks, everyone=kept.dropped)
    return outcome.finish(
        r, model.Protocol.COMPATIBLE, nxt, lost=lost_work, delay=waiting.delay,
        held_back=decision.held_back, wanted_revocation=decision.wanted,
    )


def assignments(r: Round, nxt_c: Draft, nxt_t: Draft, *, everyone: bool) -> Holdings:
    """The drafts as assignments; a member's old object where nothing changed.

    ``everyone``: compare every member (some lost work to the barrier or the
    configuration); else only those whose sets were edited.
    """
    current_of = r.current
    result: Holdings = dict(current_of)  # members whose sets were not edited
    touched: list[ids.WorkerId] = (
        r.order if everyone else sorted(nxt_c.edited.keys() | nxt_t.edited.keys())
    )
    for member in touched:
        current = current_of[member]
        connectors, tasks = nxt_c.frozen(member), nxt_t.frozen(member)
        # ``is`` first: frozenset equality does not shortcut on identity.
        if (connectors is current.connectors or connectors == current.connectors) and (
            tasks is current.tasks or tasks == current.tasks
        ):
            result[member] = current
        else:
            result[member] = model.ConnectorsAndTasks(connectors, tasks)
    return result
