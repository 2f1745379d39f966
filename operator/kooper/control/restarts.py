"""``kooper.dev/restart``: which restarts a round performs, and which it finished.

A restart value is done once every member holding one of its resources was written
(``status.restart`` then records it on the Connector, so a restarted operator does
not act on it again). Resources of members whose write failed stay pending: the
next round bumps their epochs again and writes those members, so each resource
restarts once.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any

from kooper.control import connector_status, snapshot, views
from kooper.core import ids, model

Pending = Mapping[str, tuple[str, frozenset[str]]]
"""connector → (restart value, resources still to restart)."""
Done = Mapping[str, Mapping[str, Any]]
"""connector → the ``status.restart`` record of the last value acted on."""


def requested(connectors: Sequence[views.ConnectorView], *, done: Done,
              pending: Pending, counts: Mapping[str, int]) -> dict[str, tuple[str, frozenset[str]]]:
    """connector → (new restart value, resources to restart in place this round)."""
    handled = {name: str(record["observed"]) for name, record in done.items()}
    asked = snapshot.restart_requests(connectors, handled=handled)
    result: dict[str, tuple[str, frozenset[str]]] = {}
    for name, value in asked.items():
        waiting = pending.get(name)
        if waiting is not None and waiting[0] == value:
            result[name] = waiting
        else:
            result[name] = (value, snapshot.restart_resources(name, counts.get(name, 0)))
    return result


def written(restarts: Pending, *, done: Done, plan: model.Plan,
            failed: Collection[ids.WorkerId], now_ms: int,
            present: Collection[str]) -> tuple[dict[str, tuple[str, frozenset[str]]],
                                               dict[str, Mapping[str, Any]], list[str]]:
    """(pending, done, connectors whose restart finished this round) after the writes.

    ``done`` keeps only connectors in ``present`` (a deleted one starts afresh).
    """
    still: dict[str, tuple[str, frozenset[str]]] = {}
    finished: dict[str, Mapping[str, Any]] = {k: v for k, v in done.items() if k in present}
    names: list[str] = []
    for name, (value, resources) in restarts.items():
        left: set[str] = set()
        for member in failed:
            member_plan = plan.members.get(member)
            if member_plan is not None:
                left.update(r for r in resources if r in member_plan.assigned)
        if left:
            still[name] = (value, frozenset(left))
            continue
        finished[name] = connector_status.restart_record(value, now_ms=now_ms,
                                               generation=plan.state.generation)
        names.append(name)
    return still, finished, sorted(names)
