"""The eager protocol: stop the world on any change, then assign from scratch.

Eager revokes everything on any change, waits until every member owns nothing, then
assigns round-robin over sorted members, as Kafka's ``EagerAssignor``.
"""

from __future__ import annotations

from kooper.core import ids, model
from kooper.core.assignor import outcome
from kooper.core.assignor.holdings import Holdings, Round


def eager(r: Round) -> model.Plan:
    """Stop the world on any change, then assign from scratch."""
    previous = r.previous
    members = r.order
    anything_held = any(r.held[m] for m in members)
    joined = any(m not in previous.assignments for m in members)
    union_c: set[str] = set()
    union_t: set[str] = set()
    for member in members:
        union_c.update(r.current[member].connectors)
        union_t.update(r.current[member].tasks)
    config_changed = union_c != r.configured.connectors or union_t != r.configured.tasks
    must_rebalance = (
        previous.eager_revoking
        or previous.protocol is not model.Protocol.EAGER
        or bool(r.departed)
        or joined
        or config_changed
        or previous.forgotten
    )
    protocol = model.Protocol.EAGER
    if not must_rebalance:
        return outcome.finish(r, protocol, dict(r.current), lost={}, delay=None)
    if anything_held:
        # Round one of two: everybody stops everything (the stop-the-world barrier).
        empty: Holdings = {member: model.EMPTY for member in members}
        return outcome.finish(r, protocol, empty, lost={}, delay=None, eager_revoking=True)
    return outcome.finish(r, protocol, from_scratch(r), lost={}, delay=None)


def from_scratch(r: Round) -> Holdings:
    """Kafka's eager assignment: one iterator over sorted members, connectors then tasks."""
    members = r.order
    if not members:
        return {}
    connectors: dict[ids.WorkerId, list[str]] = {m: [] for m in members}
    tasks: dict[ids.WorkerId, list[str]] = {m: [] for m in members}
    position = 0
    names = sorted(r.snapshot.connectors)
    for name in names:
        connectors[members[position % len(members)]].append(name)
        position += 1
    for name in names:
        for number in range(r.snapshot.connectors[name]):
            tasks[members[position % len(members)]].append(f"{name}-{number}")
            position += 1
    return {m: model.ConnectorsAndTasks.of(connectors[m], tasks[m]) for m in members}
