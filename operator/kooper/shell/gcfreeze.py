"""Freezing the objects of the operator's startup out of the garbage collector's scans.

After the initial sync the operator holds, for a 100,000-task group, hundreds of
thousands of long-lived objects (kopf's indexes and diff bases, the last plan's
sets, the encoded documents). CPython's full collections scan all of them every
time new survivors reach a quarter of that population: 0.3–1 s pauses that land on
whatever round is running. ``gc.freeze()`` moves everything alive at that moment
to a permanent generation that collections skip. Frozen objects are never
collected, so this happens once per process, after the first rounds of every group
and a quiet spell: freezing again later would pin garbage for good (a leak).
"""

from __future__ import annotations

import asyncio
import gc
import logging
import time
from collections.abc import Callable, Iterable
from typing import Protocol

logger = logging.getLogger("kooper.shell")

_frozen = False


class Planner(Protocol):
    """What the freezer reads of a group's runner."""

    rounds_planned: int


def freeze_once() -> int:
    """Collect, then freeze what survives; at most once per process. Returns objects frozen."""
    global _frozen
    if not _frozen:
        _frozen = True
        gc.collect()
        gc.freeze()
    return gc.get_freeze_count()


async def freeze_when_settled(
    runners: Callable[[], Iterable[Planner]],
    *,
    quiet_s: float = 5.0,
    poll_s: float = 0.5,
    max_wait_s: float = 600.0,
    freeze: Callable[[], int] = freeze_once,
) -> int:
    """Wait until every group planned once and no round planned for ``quiet_s``, then freeze.

    ``max_wait_s`` bounds the wait (a group that keeps planning would otherwise keep
    the whole startup heap in every full collection). Returns ``freeze()``'s count.
    """
    started = last_change = time.monotonic()
    seen: tuple[int, ...] | None = None
    while True:
        await asyncio.sleep(poll_s)
        now = time.monotonic()
        counts = tuple(runner.rounds_planned for runner in runners())
        if counts != seen:
            seen, last_change = counts, now
        settled = all(counts) and now - last_change >= quiet_s
        if settled or now - started >= max_wait_s:
            break
    frozen = freeze()
    logger.info("froze %d objects out of the garbage collector's scans "
                "(%.1f s after startup)", frozen, time.monotonic() - started)
    return frozen
