"""The audit log: one JSON line per assignment change, in the drill event-log schema.

Rows are ``core.events.Event`` rows (readable by ``kooper analyze``) with one extra
column, ``change``, that readers of the base schema ignore:

* ``start`` / ``assigned``: the resource was written into ``member``'s ConfigMap
  at ``generation`` with ``epoch``;
* ``stop`` / ``revoked``: the member was told to stop it;
* ``stop`` / ``lost``: the member departed (pod gone or Lease expired) holding it;
* ``join`` / ``leave``: membership changes; ``round``: a round that changed
  assignments.

These are the leader's decisions, not the workers' actions: a worker starts a
resource some milliseconds after its ``start`` row. The workers' own recorder
gives the exact times; this log is what the operator can vouch for.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Iterator
from typing import IO, Any

from kooper.control import events as events_
from kooper.core import events, model

logger = logging.getLogger("kooper.audit")


departed = events_.departed
"""Members that held an assignment last round and are gone (or restarted) now."""


def rows(
    *,
    previous: model.PlanState,
    plan: model.Plan,
    group: str,
    policy: str,
    run: str,
    now_ms: int,
) -> Iterator[dict[str, Any]]:
    """The audit rows of one round (plain dicts, ``change`` included)."""
    generation = plan.state.generation
    protocol = str(plan.protocol)

    def row(member: str, resource: str, kind: events.Kind, change: str,
            epoch: int = -1) -> dict[str, Any]:
        event = events.Event(
            ts_ms=now_ms, run=run, group=group, member=member, resource=resource,
            event=kind, generation=generation, epoch=epoch, protocol=protocol, policy=policy,
        )
        result = event.to_row()
        result["change"] = change
        return result

    gone = departed(previous, plan)
    for member in gone:
        for resource in previous.assignments[member].sorted():
            yield row(member, resource, events.Kind.STOP, "lost",
                      previous.epochs.get(resource, -1))
        yield row(member, "", events.Kind.LEAVE, "leave")
    for member in sorted(plan.members):
        if member not in previous.assignments or member in gone:
            yield row(member, "", events.Kind.JOIN, "join")
    for member, member_plan in sorted(plan.members.items()):
        already = previous.revoking.get(member, model.EMPTY) if member not in gone else model.EMPTY
        for resource in member_plan.revoked.difference(already).sorted():
            yield row(member, resource, events.Kind.STOP, "revoked",
                      plan.state.epochs.get(resource, -1))
    for member, resources in sorted(plan.newly_assigned.items()):
        for resource in resources.sorted():
            yield row(member, resource, events.Kind.START, "assigned",
                      plan.state.epochs.get(resource, -1))
    if plan.changed:
        yield row("", "", events.Kind.ROUND, "round")


class AuditLog:
    """Writes audit rows as JSON lines to the ``kooper.audit`` logger and an optional file."""

    def __init__(self, path: str | None = None) -> None:
        self._file: IO[str] | None = open(path, "a", encoding="utf-8") if path else None  # noqa: SIM115
        self.count = 0

    def write(self, rows_: Iterable[dict[str, Any]]) -> int:
        """Write rows; returns how many."""
        written = 0
        lines = []
        for row in rows_:
            line = json.dumps(row, separators=(",", ":"))
            lines.append(line)
            written += 1
        if not lines:
            return 0
        if logger.isEnabledFor(logging.INFO):
            for line in lines:
                logger.info(line)
        if self._file is not None:
            self._file.write("\n".join(lines) + "\n")
            self._file.flush()
        self.count += written
        return written

    def close(self) -> None:
        """Close the file, if any."""
        if self._file is not None:
            self._file.close()
            self._file = None
