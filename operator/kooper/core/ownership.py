"""Double ownership: one resource held by two holders at one instant (pure).

Every checker states what *holding* means for its source (a worker's ``start`` to its
``stop``, a process's run to its exit, a drill interval ending at a ``leave`` or a
``join``), turns its rows into ``Interval`` values, and asks ``overlaps`` which of them
share an instant: the simulator's online check (``sim.chaos.check_log``), the drill
metrics (``sim.metrics``), the drill invariants (``e2e/invariants.py``) and the
process-level log of the real-cluster chaos runs (``e2e/chaos_log.py``).
``analytics.intervals.overlaps`` computes the same in PySpark over the drill intervals
(its parity with ``sim.metrics`` is tested).

Intervals are half-open: one that ends at the instant another starts is a hand-over,
not an overlap, and an empty interval holds nothing.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import NamedTuple


class Interval(NamedTuple):
    """``holder`` held ``resource`` from ``start_ms`` to ``end_ms`` (excluded)."""

    resource: Hashable
    holder: str
    start_ms: int
    end_ms: int


def overlaps(intervals: Sequence[Interval]) -> list[tuple[int, int]]:
    """Every pair ``(i, j)`` (indexes into ``intervals``) of one resource's intervals on
    two holders that share an instant, ``i`` the one that began first (at the same
    instant: the one listed first); ordered by ``j``, then ``i``."""
    by_resource: dict[Hashable, list[int]] = {}
    for index, interval in enumerate(intervals):
        by_resource.setdefault(interval.resource, []).append(index)
    found: list[tuple[int, int]] = []
    for indexes in by_resource.values():
        indexes.sort(key=lambda k: intervals[k].start_ms)  # stable: listed order at ties
        active: list[int] = []
        for j in indexes:
            later = intervals[j]
            active = [i for i in active if intervals[i].end_ms > later.start_ms]
            if later.end_ms > later.start_ms:
                found.extend((i, j) for i in active if intervals[i].holder != later.holder)
                active.append(j)
    found.sort(key=lambda pair: (pair[1], intervals[pair[0]].start_ms, pair[0]))
    return found
