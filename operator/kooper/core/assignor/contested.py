"""Stage two, contested: the union of all holdings, and what each member keeps.

The barrier: a resource held by two live members is in nobody's assignment; a
resource held by anyone is never handed to someone else. A move therefore takes two
rounds: revoke, wait for the owner's report (or its departure), then assign.
"""

from __future__ import annotations

import dataclasses

from kooper.core.assignor.draft import Draft
from kooper.core.assignor.holdings import Round
from kooper.core.assignor.indexes import Union


def union(r: Round) -> Union:
    """The union of all live members' holdings (who holds what, and what twice)."""
    if not r.cache.persistent:
        r.contested = Union.once(r.held, r.configured)
        return r.contested
    index = r.cache.held
    index.sync(r.held)
    return index


@dataclasses.dataclass(slots=True)
class Kept:
    """Each member's assignment less what is contested or no longer configured."""

    connectors: Draft
    tasks: Draft
    dropped: bool
    """Whether any member lost something to the barrier or the configuration."""


def kept(r: Round, held: Union) -> Kept:
    """What each member keeps before balancing.

    Most members keep everything: their sets are shared, not copied (``Draft``),
    which keeps big rounds cheap.
    """
    twice = held.c.twice | held.t.twice
    bad_c = held.c.outside | {x for x in twice if x in held.c.has}
    bad_t = held.t.outside | {x for x in twice if x in held.t.has}
    nxt_c = Draft()
    nxt_t = Draft()
    nxt_c.base = {
        member: current.connectors
        if not bad_c or bad_c.isdisjoint(current.connectors)
        else current.connectors - bad_c
        for member, current in r.current.items()
    }
    nxt_t.base = {
        member: current.tasks
        if not bad_t or bad_t.isdisjoint(current.tasks)
        else current.tasks - bad_t
        for member, current in r.current.items()
    }
    return Kept(nxt_c, nxt_t, bool(bad_c or bad_t))
