"""Stage five, free work: configured work nobody holds, neither waiting nor placed."""

from __future__ import annotations

import dataclasses

from kooper.core.assignor.contested import Kept
from kooper.core.assignor.delay import Waiting
from kooper.core.assignor.indexes import Union


@dataclasses.dataclass(frozen=True, slots=True)
class Free:
    """Free connectors and tasks, to be placed this round."""

    connectors: frozenset[str]
    tasks: frozenset[str]


def free(held: Union, kept: Kept, waiting: Waiting) -> Free:
    """What is free to place: unheld, not deferred, not granted or returned this round
    (members whose sets were not edited only hold what they held)."""
    free_c = frozenset(held.c.free.difference(waiting.deferred.connectors))
    free_t = frozenset(held.t.free.difference(waiting.deferred.tasks))
    for edited in kept.connectors.edited.values():
        if free_c:
            free_c -= edited
    for edited in kept.tasks.edited.values():
        if free_t:
            free_t -= edited
    return Free(free_c, free_t)
