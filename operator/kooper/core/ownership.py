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

from collections.abc import Hashable, Iterable, Sequence
from typing import NamedTuple


class Interval(NamedTuple):
    """``holder`` held ``resource`` from ``start_ms`` to ``end_ms`` (excluded)."""

    resource: Hashable
    holder: str
    start_ms: int
    end_ms: int


OPEN = 2**63
"""The end of an interval nothing ended: after every ``ts_ms`` a row can hold (a signed
64-bit long, ``docs/events.md``), so it holds past the log's last row however late."""

Held = tuple[Hashable, str, int, int]
"""An ``Interval`` or a plain tuple of the same fields (cheaper to build in bulk)."""


def overlaps(intervals: Sequence[Held]) -> list[tuple[int, int]]:
    """Every pair ``(i, j)`` (indexes into ``intervals``) of one resource's intervals on
    two holders that share an instant, ``i`` the one that began first (at the same
    instant: the one listed first); ordered by ``j``'s start, then ``i``'s.

    Fastest when each resource's intervals are listed in start order (the callers' own
    walks list them so); otherwise they are sorted first.
    """
    found = _sweep(intervals, range(len(intervals)))
    if found is None:
        starts = [interval[2] for interval in intervals]
        found = _sweep(intervals, sorted(range(len(intervals)), key=starts.__getitem__))
        assert found is not None  # in start order now
    return sorted(found, key=lambda pair: (intervals[pair[1]][2], pair[1],
                                           intervals[pair[0]][2], pair[0])) if found else found


def _sweep(intervals: Sequence[Held], order: Iterable[int]) -> list[tuple[int, int]] | None:
    """``overlaps`` visiting ``order``; None when a resource's starts go backwards in it."""
    # resource -> (the latest end so far, the last start, what may still run then)
    latest: dict[Hashable, tuple[int, int, list[int] | int]] = {}
    found: list[tuple[int, int]] = []
    for j in order:
        resource, holder, start, end = intervals[j]
        seen = latest.get(resource)
        if seen is not None and start < seen[1]:
            return None
        if end <= start:
            continue  # holds nothing
        if seen is None or seen[0] <= start:
            latest[resource] = (end, start, j)  # all before it had ended: the common case
            continue
        earlier = seen[2]
        running = [i for i in ([earlier] if isinstance(earlier, int) else earlier)
                   if intervals[i][3] > start]
        found.extend((i, j) for i in running if intervals[i][1] != holder)
        running.append(j)
        latest[resource] = (max(seen[0], end), start, running)
    return found
