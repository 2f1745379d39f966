"""Stage four, the delay: lost work waits, is handed to candidates, or is released.

With a delay ``d > 0`` and none pending, the leader schedules a rebalance at
``now + d`` and leaves lost work unassigned; members that join empty meanwhile are
*candidates*. When the deadline passes, lost work goes round-robin to the candidates
(or, without candidates, is balanced like new work). Every round in between reports
the remaining delay ``d'``. The rules themselves are ``core.delays``'.
"""

from __future__ import annotations

import dataclasses

from kooper.core import delays, model
from kooper.core.assignor.contested import Kept
from kooper.core.assignor.holdings import Round
from kooper.core.assignor.indexes import Union
from kooper.core.assignor.lost import held_by_other
from kooper.core.assignor.rules import Lost


@dataclasses.dataclass(frozen=True, slots=True)
class Waiting:
    """What the delay decided: the pending delay, and lost work released or deferred."""

    delay: model.Delay | None
    released: model.ConnectorsAndTasks
    """Lost work placed this round: handed to candidates or balanced as free work."""
    deferred: model.ConnectorsAndTasks
    """Lost work still waiting (in ``lost``)."""


def wait(r: Round, held: Union, kept: Kept, lost: Lost) -> Waiting:
    """Resolve the delay; grants go into ``kept``, released origins leave ``lost``."""
    nxt_c, nxt_t = kept.connectors, kept.tasks
    resolution = delays.resolve(
        lost=lost,
        previous=r.previous.delay,
        departed=r.departed,
        max_delay_ms=r.snapshot.settings.max_delay_ms,
        now_ms=r.now_ms,
        policy=r.snapshot.settings.policy,
        live=r.order,
        # Only a round with lost work reads this list (``resolve`` returns first).
        empty_members=[
            m for m in r.order
            if not nxt_c.get(m) and not nxt_t.get(m) and not r.held[m]
        ] if lost else [],
        grace_ms=r.snapshot.grace_ms,
    )
    held_c, held_t = held.c.has, held.t.has
    for member, resources in resolution.grants.items():
        # Never what another member still holds (a returned member letting go of
        # its own lost work: ``lost.returned_holding``); it is placed once let go.
        nxt_c.edit(member).update(x for x in resources.connectors
                                  if x not in held_c or not held_by_other(r, member, x))
        nxt_t.edit(member).update(x for x in resources.tasks
                                  if x not in held_t or not held_by_other(r, member, x))
    released = model.EMPTY
    for origin in resolution.released:
        released = released.union(lost.pop(origin))
    deferred = model.EMPTY
    for resources in lost.values():
        deferred = deferred.union(resources)
    return Waiting(resolution.delay, released, deferred)

