"""The planner state across operator restarts: ``WorkerGroup.status.state`` + ConfigMaps.

``status.state`` is kept small enough for etcd even with 100,000 tasks: it holds
what exists nowhere else (lost sets by member, the delay's candidates, member
incarnations, the eager flag, and the epochs of resources that no ConfigMap
assigns). Per-member assignments are *not* in it: the ConfigMaps are the
assignments, so on restart ``control.restore`` reads them back, with the epochs of
assigned resources and the generation each was written at. Resource sets are in
the wire shape of ``protocol.codec`` (``encode_resources``): one codec.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from typing import Any

from kooper.control import adaptive
from kooper.core import ids, model
from kooper.protocol import codec, messages

STATE_VERSION = 1


def encode(
    state: model.PlanState, *, previous: tuple[model.PlanState, Mapping[str, Any]] | None = None,
    owners: Mapping[str, tuple[str, str]] | None = None, member_epoch: int = 0,
    epoch_floor: int = 0, learned: adaptive.Learned | None = None,
    terminating: Iterable[tuple[str, str]] = (),
) -> dict[str, Any]:
    """``status.state``: everything in ``state`` that the ConfigMaps do not hold.

    ``previous`` is the state encoded last time and its document (``_unassigned_epochs``).
    """
    document: dict[str, Any] = {
        "version": STATE_VERSION,
        "generation": state.generation,
        "protocol": str(state.protocol),
        "eagerRevoking": state.eager_revoking,
        "backoff": {
            "revokedLast": state.backoff.revoked_last,
            "streak": state.backoff.streak,
            "heldUntilMs": state.backoff.held_until_ms,
        },
        "incarnations": dict(sorted(state.incarnations.items())),
        "lost": {
            member: codec.encode_resources(resources)
            for member, resources in sorted(state.lost.items())
            if resources
        },
        "epochs": _unassigned_epochs(state, previous),
        # Members whose document's revocations are not acknowledged yet. A document is
        # not rewritten once its member acknowledged them (``model.tells_more``), so a
        # restarted leader must not read what it still lists as work in flight.
        "revoking": sorted(member for member, gone in state.revoking.items() if gone),
        "owners": _owners(state, owners or {}),
    }
    document.update(_optional(state, member_epoch=member_epoch, epoch_floor=epoch_floor,
                              learned=learned, terminating=terminating))
    return document


def _unassigned_epochs(state: model.PlanState,
                       previous: tuple[model.PlanState, Mapping[str, Any]] | None
                       ) -> dict[str, int]:
    """The epochs of resources that no ConfigMap assigns (sorted by resource).

    When ``previous``'s epochs are the same object and its assignments are equal, its
    document's ``epochs`` are reused instead of set-subtracting 100,000 resources again
    (most rounds only acknowledge reports).
    """
    if (previous is not None and previous[0].epochs is state.epochs
            and previous[0].assignments == state.assignments):
        return dict(previous[1]["epochs"])
    in_configmaps: set[str] = set()
    for resources in state.assignments.values():
        in_configmaps.update(resources.connectors)
        in_configmaps.update(resources.tasks)
    # Set difference in C, then sort the few left: 100,000 epochs, a handful unassigned.
    unassigned = state.epochs.keys() - in_configmaps
    return {resource: state.epochs[resource] for resource in sorted(unassigned)}


def _owners(state: model.PlanState, owners: Mapping[str, tuple[str, str]]) -> dict[str, str]:
    """``member: "Kind/name"`` of the pod owners of members the state knows."""
    known = {*state.assignments, *state.lost}
    return {member: f"{kind}/{name}" for member, (kind, name) in sorted(owners.items())
            if member in known and kind and name}


def _optional(state: model.PlanState, *, member_epoch: int, epoch_floor: int,
              learned: adaptive.Learned | None, terminating: Iterable[tuple[str, str]]
              ) -> dict[str, Any]:
    """The fields of ``status.state`` written only when they hold something."""
    document: dict[str, Any] = {}
    if epoch_floor:
        # The largest resource epoch issued. Deletions of departed members' ConfigMaps
        # come first in a round: an operator dying right after them leaves their
        # resources' epochs in no document, and the next leader starts those above this.
        document["epochFloor"] = epoch_floor
    if member_epoch:
        # The last membership epoch issued: a new one is always larger, even for a member
        # whose ConfigMap (the only other place its epoch is written) was deleted.
        document["memberEpoch"] = member_epoch
    seen = sorted(terminating)
    if seen:
        # (member, pod uid) of members whose pod was seen terminating (``control.departures``):
        # a restarted leader still knows their departure is planned.
        document["terminating"] = [[member, uid] for member, uid in seen]
    if learned is not None and learned != adaptive.Learned():
        # What the group learned of its returns and handoffs (``control.adaptive``).
        document["adaptive"] = adaptive.encode(learned)
    if state.delay is not None:
        document["delay"] = {
            "deadlineMs": state.delay.deadline_ms,
            "candidates": list(state.delay.candidates),
        }
        if state.delay.departures:
            # ``kooper``: each lost origin's own deadline (``core.delays``).
            document["delay"]["departures"] = dict(sorted(state.delay.departures.items()))
    return document


def merge_partial(
    previous: model.PlanState, planned: model.PlanState, failed: Iterable[ids.WorkerId]
) -> model.PlanState:
    """The state after a round whose ConfigMap writes failed for some members.

    Members whose write failed keep their previous assignment in the state, so the
    barrier still counts what they may run, and the next round rewrites them.
    """
    failed = set(failed)
    if not failed:
        return planned
    assignments = dict(planned.assignments)
    assigned_at = dict(planned.assigned_at)
    revoking = dict(planned.revoking)
    for member in failed:
        # Previous and planned together: the barrier may over-count what the member may
        # run, never under-count it, so nothing runs twice while its ConfigMap is stale.
        both = previous.assignments.get(member, model.EMPTY).union(
            planned.assignments.get(member, model.EMPTY))
        assignments[member] = both
        if member in previous.assigned_at:
            assigned_at[member] = previous.assigned_at[member]
        if member in previous.revoking:
            revoking[member] = previous.revoking[member]
        else:
            revoking.pop(member, None)
    return dataclasses.replace(
        planned, assignments=assignments, assigned_at=assigned_at, revoking=revoking
    )


def assignment_message(
    *,
    group: str,
    member: str,
    plan: model.MemberPlan,
    protocol: model.Protocol,
    policy: str,
    delay_ms: int,
    leader: str,
    epochs: Mapping[str, int],
    configs: Mapping[str, Mapping[str, str]],
    states: Mapping[str, str],
    incarnation: str,
    member_epoch: int = 0,
    rejoins: int = 0,
    leader_epoch: int = 0,
) -> messages.Assignment:
    """The Assignment a member's ConfigMap carries for this round.

    ``incarnation`` is the member process the document was planned for
    (``PlanState.incarnations``): a process restarted under the same pod name
    must not apply its previous life's document, whose work may be moving.
    """
    connectors = set(plan.assigned.connectors)
    connectors.update(ids.task_connectors(plan.assigned.tasks))
    return messages.Assignment(
        group=group,
        member=member,
        generation=plan.generation,
        protocol=protocol,
        assigned=plan.assigned,
        revoked=plan.revoked,
        delay_ms=delay_ms,
        leader=leader,
        epochs={
            resource: epochs[resource]
            for resource in (*plan.assigned.connectors, *plan.assigned.tasks)
            if resource in epochs
        },
        configs={name: configs[name] for name in sorted(connectors) if name in configs},
        states={name: states[name] for name in sorted(connectors) if name in states},
        policy=policy,
        incarnation=incarnation,
        member_epoch=member_epoch,
        rejoins=rejoins,
        leader_epoch=leader_epoch,
    )

