"""Warming a group's ``assignor.Cache`` before the first departure needs it.

The assignor's cache indexes who holds and who is assigned what, and how many of
each connector's tasks each member has. Some of those indexes are only brought up
to date by a round that has work to hand out (a departure, a StatefulSet scale-down,
the end of a delay), so after the operator starts, the first such round indexes all
100,000 tasks of a 1,000-member group (~220 ms instead of ~65 ms) exactly when a
member has just left. ``warm`` plans that round once ahead of time, on a copy of
the snapshot without one member, and throws the plan away: the cache is then as a
departure leaves it, and the real departure only updates what changed. Plans never
depend on the cache (an empty one gives the same plan), so this cannot change one.
"""

from __future__ import annotations

import dataclasses

from kooper.core import assignor, ids, model


def victim(state: model.PlanState) -> ids.WorkerId | None:
    """The member a rehearsal takes out: the one assigned the most (ties: by name)."""
    loaded = [(len(resources), member) for member, resources in state.assignments.items()
              if resources]
    if len(loaded) < 2:
        return None  # Nobody to hand its work to: a departure plans nothing to index.
    return max(loaded, key=lambda pair: (pair[0], pair[1]))[1]


def warm(cache: assignor.Cache, snap: model.Snapshot, state: model.PlanState, *,
         now_ms: int, configured: model.ConnectorsAndTasks) -> bool:
    """Plan (and discard) the departure of ``victim(state)`` with ``cache``.

    ``state`` is the state the last round left (the next round's ``previous``). The
    rehearsal reassigns at once (no scheduled delay, the member counted as gone for
    good) so it takes the path a departure takes when its work moves; the group's
    own settings are otherwise kept. Returns whether it planned anything.
    """
    member = victim(state)
    if member is None or member not in snap.members:
        return False
    members = {name: report for name, report in snap.members.items() if name != member}
    rehearsal = dataclasses.replace(
        snap, members=members, departed_permanently=frozenset({member}),
        restarts=frozenset(),
        settings=dataclasses.replace(snap.settings, max_delay_ms=0),
    )
    assignor.plan(rehearsal, state, now_ms=now_ms, configured=configured, cache=cache)
    return True
