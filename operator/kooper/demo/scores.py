"""The demo table's numbers, computed from one run's event log.

``kooper.sim.metrics`` is meant to hold these for every source; until it exists
the demo computes them here, with the definitions of docs/demo.md:

* **pause**: for each resource, the time within the drill window during which
  no member ran it; ``total_pause_ms`` sums it over resources and
  ``max_pause_ms`` is the longest single gap.
* **rounds**: the operator's ``round`` rows in the window.
* **moves**: starts of a resource on a member other than the one that ran it last.
* **converge_ms**: from the drill's start to the last start/stop in the window.
* **overlaps**: starts of a resource while another member still ran it (the
  barrier forbids it: must be 0).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence

from kooper.core import events


@dataclasses.dataclass(frozen=True, slots=True)
class Scores:
    """One row of the demo table."""

    total_pause_ms: int
    max_pause_ms: int
    rounds: int
    moves: int
    converge_ms: int
    overlaps: int
    running_at_end: int
    resources: int


def running_at(rows: Iterable[events.Event], ts_ms: int) -> dict[str, set[str]]:
    """Resource -> members running it after every row up to ``ts_ms``."""
    running: dict[str, set[str]] = {}
    for row in rows:
        if row.ts_ms > ts_ms:
            break
        if row.event is events.Kind.START:
            running.setdefault(row.resource, set()).add(row.member)
        elif row.event is events.Kind.STOP:
            running.get(row.resource, set()).discard(row.member)
    return running


def score(rows: Sequence[events.Event], *, start_ms: int, end_ms: int) -> Scores:
    """The scores of the window ``[start_ms, end_ms]`` of a time-ordered log."""
    running: dict[str, set[str]] = {}
    last_owner: dict[str, str] = {}
    gap_since: dict[str, int] = {}
    total_pause = max_pause = rounds = moves = overlaps = 0
    last_change = start_ms

    def close_gap(resource: str, at_ms: int) -> None:
        nonlocal total_pause, max_pause
        since = gap_since.pop(resource, None)
        if since is not None:
            length = max(0, at_ms - max(since, start_ms))
            total_pause += length
            max_pause = max(max_pause, length)

    for row in rows:
        if row.ts_ms > end_ms:
            break
        in_window = row.ts_ms >= start_ms
        if row.event is events.Kind.ROUND:
            rounds += in_window
            continue
        owners = running.setdefault(row.resource, set()) if row.resource else set()
        if row.event is events.Kind.START:
            if in_window:
                overlaps += bool(owners - {row.member})
                previous = last_owner.get(row.resource)
                moves += previous is not None and previous != row.member
                last_change = row.ts_ms
            close_gap(row.resource, row.ts_ms)
            owners.add(row.member)
            last_owner[row.resource] = row.member
        elif row.event is events.Kind.STOP:
            owners.discard(row.member)
            if in_window:
                last_change = row.ts_ms
            if not owners:
                gap_since[row.resource] = row.ts_ms
    for resource in list(gap_since):
        close_gap(resource, end_ms)
    return Scores(
        total_pause_ms=total_pause, max_pause_ms=max_pause, rounds=rounds, moves=moves,
        converge_ms=max(0, last_change - start_ms), overlaps=overlaps,
        running_at_end=sum(1 for owners in running.values() if owners),
        resources=len(running),
    )
