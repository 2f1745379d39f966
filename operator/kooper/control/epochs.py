"""Epochs the step issues: membership epochs per member incarnation, and the floor
under per-resource epochs after a restore.

* A member keeps its membership epoch while it stays a member under the same
  incarnation and gets a new, larger one when it joins, returns, restarts or reports
  that it fenced itself; a departed member's epoch is retired with it.
* Per-resource epochs only grow: a restored leader raises every wanted resource
  that no ConfigMap assigns to the largest epoch ever issued (``epochFloor``), and
  hands out every epoch after that above it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from kooper.control import snapshot
from kooper.control.inputs import Inputs, Membership, Memory
from kooper.core import ids, model
from kooper.protocol import messages


@dataclasses.dataclass(frozen=True, slots=True)
class Memberships:
    """Each member's membership after a round (``member_epochs``), computed once a round."""

    by_member: Mapping[ids.WorkerId, Membership]
    """member → (incarnation, membership epoch, ``rejoins`` count it was issued for)."""
    issued: int
    """The largest membership epoch issued."""
    fresh: frozenset[ids.WorkerId]
    """Members that start a new membership this round (each gets a document)."""


def member_epochs(memory: Memory, plan: model.Plan,
                  reports: Mapping[ids.WorkerId, messages.Report]) -> Memberships:
    """Each member's membership epoch after this round, the largest issued, the new ones.

    A member keeps its epoch while it stays a member under the same incarnation. It
    gets a new one (larger than any issued, or any a worker reports) when it joins,
    comes back after being declared departed, restarts as a new process, or reports
    that it fenced itself (a larger ``rejoins`` count than the epoch was issued for, or,
    from a worker that does not count, fenced in its current epoch). A member that is
    not in the plan has none: its epoch is retired with it.
    """
    issued = max([memory.persisted.issued.member_epoch,
                  *(r.member_epoch for r in reports.values())])
    result: dict[ids.WorkerId, Membership] = {}
    fresh: set[ids.WorkerId] = set()
    for member in sorted(plan.members):
        incarnation = plan.state.incarnations.get(member, "")
        known = memory.persisted.member_epochs.get(member)
        report = reports.get(member)
        retired = known is not None and report is not None and (
            report.rejoins > known[2]
            or (report.fenced and report.member_epoch >= known[1]))
        if known is None or known[0] != incarnation or retired:
            issued += 1
            result[member] = (incarnation, issued, report.rejoins if report else 0)
            fresh.add(member)
        else:
            result[member] = known
    return Memberships(result, issued, frozenset(fresh))


def floored(memory: Memory, inputs: Inputs) -> Memory:
    """A just-restored memory whose every next epoch is larger than any ever issued.

    Every wanted resource that no ConfigMap assigns gets the largest epoch ever issued
    (per-resource epochs only grow, even when the operator died right after a deletion
    or a new KIP-415 leader forgot the assignments), and that floor becomes the base of
    every epoch handed out later (``PlanState.epoch_base``): a resource a ConfigMap
    still assigns at an old epoch may have run at a larger one, handed out by an older
    leader in a document revoked since and recorded in no status it wrote."""
    epochs = dict(memory.persisted.state.epochs)
    floor = memory.persisted.issued.epoch_floor
    assigned = memory.persisted.state.assignments
    for connector in inputs.connectors:
        tasks = 0 if connector.state == "stopped" else connector.tasks_max
        for resource in snapshot.restart_resources(connector.name, tasks):
            if epochs.get(resource, 0) < floor and not any(
                    resource in mine for mine in assigned.values()):
                epochs[resource] = floor
    state = dataclasses.replace(memory.persisted.state, epochs=epochs, epoch_base=floor)
    return memory.replace(state=state, issued=dataclasses.replace(
        memory.persisted.issued, floor_pending=False))


def unpersisted(memory: Memory) -> tuple[int, int] | None:
    """(membership epoch, resource epoch floor) to persist before this round's other writes,
    or None when the last status write already holds both.

    A restarted operator learns the largest epochs from the ConfigMaps as well as the
    status; a round that then deleted or rewrote those ConfigMaps and died before its
    own status write would leave them in no document, and the next leader would issue
    them again (two members started one task at one epoch). So such a round writes the
    status first.
    """
    issued = memory.persisted.issued
    wanted = (issued.member_epoch, issued.epoch_floor)
    persisted = issued.written
    if wanted[0] <= persisted[0] and wanted[1] <= persisted[1]:
        return None
    return max(wanted[0], persisted[0]), max(wanted[1], persisted[1])


def unissued(members: Mapping[ids.WorkerId, model.Member],
             documents: Mapping[ids.WorkerId, tuple[str, model.ConnectorsAndTasks]] | None
             ) -> frozenset[str]:
    """Resources a leader that forgot the assignments would adopt from a report at an
    epoch that was never issued to the reporter: what a member reports beyond what its
    ConfigMap (read at the restore, same incarnation) assigns it.

    KIP-415's new leader keeps each member's reported work with it, and a kept resource
    keeps its epoch. That epoch belongs to the member the last document assigned it to;
    a report can hold more (work only revoked from it, or a forged claim that nobody
    else held), and keeping that at the same epoch would start one task twice at one
    epoch. Such resources restart in place with a new epoch instead (``restarts``).
    A member without a document for its incarnation was given nothing. Only a leader
    that read no ConfigMaps at all (``documents`` None: ``kooper replay``) keeps what
    members report at its epoch, as Kafka's leader does.
    """
    if documents is None:
        return frozenset()
    found: set[str] = set()
    for member_id, member in members.items():
        document = documents.get(member_id)
        mine = document[1] if document is not None and document[0] == member.incarnation \
            else model.EMPTY
        extra = member.owned.difference(mine)
        found.update(extra.connectors)
        found.update(extra.tasks)
    return frozenset(found)
