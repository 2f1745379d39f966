"""The planner state across operator restarts: ``WorkerGroup.status.state`` + ConfigMaps.

``status.state`` is kept small enough for etcd even with 100,000 tasks: it holds
what exists nowhere else (lost sets by member, the delay's candidates, member
incarnations, the eager flag, and the epochs of resources that no ConfigMap
assigns). Per-member assignments are *not* in it: the ConfigMaps are the
assignments, so on restart ``restore`` reads them back, with the epochs of
assigned resources and the generation each was written at. Resource sets are in
the wire shape of ``protocol.codec`` (``encode_resources``): one codec.

The order of writes in a round makes this safe (see ``control.step``):
deletions of departed members' ConfigMaps first, then changed ConfigMaps, then
the status. If the operator dies after the deletions, the departed member's work
is in no document: the next leader treats it as unassigned, and the barrier
still holds it while a live member reports owning it. If it dies between the
ConfigMaps and the status, the ConfigMaps are newer than the status; ``restore``
takes the newest generation, drops from the lost sets whatever a ConfigMap
assigns, and keeps the largest epoch.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Iterable, Mapping
from typing import Any

from kooper.control import adaptive
from kooper.core import errors, ids, model
from kooper.protocol import codec, messages

STATE_VERSION = 1


def encode(
    state: model.PlanState, *, previous: tuple[model.PlanState, Mapping[str, Any]] | None = None,
    owners: Mapping[str, tuple[str, str]] | None = None, member_epoch: int = 0,
    epoch_floor: int = 0, learned: adaptive.Learned | None = None,
    terminating: Iterable[tuple[str, str]] = (),
) -> dict[str, Any]:
    """``status.state``: everything in ``state`` that the ConfigMaps do not hold.

    ``previous`` is the state encoded last time and its document: when the epochs are
    the same object and the assignments are equal, its ``epochs`` are reused instead of
    set-subtracting 100,000 resources again (most rounds only acknowledge reports).
    """
    if (previous is not None and previous[0].epochs is state.epochs
            and previous[0].assignments == state.assignments):
        kept: dict[str, int] = dict(previous[1]["epochs"])
    else:
        in_configmaps: set[str] = set()
        for resources in state.assignments.values():
            in_configmaps.update(resources.connectors)
            in_configmaps.update(resources.tasks)
        # Set difference in C, then sort the few left: 100,000 epochs, a handful unassigned.
        unassigned = state.epochs.keys() - in_configmaps
        kept = {resource: state.epochs[resource] for resource in sorted(unassigned)}
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
        "epochs": kept,
        # Members whose document's revocations are not acknowledged yet. A document is
        # not rewritten once its member acknowledged them (``model.tells_more``), so a
        # restarted leader must not read what it still lists as work in flight.
        "revoking": sorted(member for member, gone in state.revoking.items() if gone),
    }
    known = {*state.assignments, *state.lost}
    document["owners"] = {member: f"{kind}/{name}"
                          for member, (kind, name) in sorted((owners or {}).items())
                          if member in known and kind and name}
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


def persisted_epochs(raw: object) -> tuple[int, int]:
    """(``memberEpoch``, ``epochFloor``) of a ``status.state`` as written (ConfigMaps aside)."""
    document = raw if isinstance(raw, Mapping) else {}
    return (max(0, _int(document.get("memberEpoch"), 0)),
            max(0, _int(document.get("epochFloor"), 0)))


@dataclasses.dataclass(frozen=True, slots=True)
class Restored:
    """A ``PlanState`` rebuilt after a restart, and what could not be read."""

    state: model.PlanState
    unreadable: tuple[str, ...]
    """ConfigMaps whose ``assignment.json`` does not decode (rewritten next round)."""
    member_epochs: Mapping[ids.WorkerId, int] = dataclasses.field(default_factory=dict)
    """Each member's current membership epoch, as its ConfigMap names it."""
    member_epoch: int = 0
    """The largest membership epoch ever issued (persisted or in a ConfigMap)."""
    member_rejoins: Mapping[ids.WorkerId, int] = dataclasses.field(default_factory=dict)
    """Each member's ``rejoins`` count its ConfigMap's epoch was issued for."""
    epoch_floor: int = 0
    """The largest resource epoch ever issued (persisted or in a ConfigMap)."""
    settings: Mapping[str, tuple[Mapping[str, str] | None, str | None]] = dataclasses.field(
        default_factory=dict)
    """connector → (config, state) as the newest ConfigMap naming it carries them."""


def restore(
    raw: object, configmaps: Iterable[tuple[str, str]], *, group: str
) -> Restored:
    """Rebuild the planner state from ``status.state`` and ``(member, assignment.json)`` pairs."""
    document = raw if isinstance(raw, Mapping) else {}
    generation = persisted_generation = _int(document.get("generation"), 0)
    protocol_text = document.get("protocol", "compatible")
    protocol = (
        model.Protocol(protocol_text)
        if protocol_text in ("eager", "compatible")
        else model.Protocol.COMPATIBLE
    )
    epochs: dict[str, int] = {
        str(k): v for k, v in (document.get("epochs") or {}).items() if isinstance(v, int)
    }
    assignments: dict[ids.WorkerId, model.ConnectorsAndTasks] = {}
    assigned_at: dict[ids.WorkerId, int] = {}
    revoking: dict[ids.WorkerId, model.ConnectorsAndTasks] = {}
    member_epochs: dict[ids.WorkerId, int] = {}
    member_rejoins: dict[ids.WorkerId, int] = {}
    planned_for: dict[ids.WorkerId, str] = {}
    member_epoch = max(0, _int(document.get("memberEpoch"), 0))
    unacknowledged = document.get("revoking")
    in_flight = frozenset(str(m) for m in unacknowledged) \
        if isinstance(unacknowledged, list) else None
    unreadable: list[str] = []
    documents: list[tuple[int, Mapping[str, Mapping[str, str]], Mapping[str, str]]] = []
    settled: dict[ids.WorkerId, model.ConnectorsAndTasks] = {}
    """Revoked sets the status says no revocation of is in flight (acknowledged, or the
    member departed: then what the status counts lost from it is read below)."""
    for member_name, text in configmaps:
        member = ids.WorkerId(member_name)
        if not text:
            continue  # no document yet: a new leader's fence occupied the name
        try:
            assignment = codec.decode_assignment(text)
        except errors.RemoteProtocolError:
            unreadable.append(member_name)
            continue
        if assignment.group != group or assignment.member != member_name:
            unreadable.append(member_name)
            continue
        assignments[member] = assignment.assigned
        assigned_at[member] = assignment.generation
        documents.append((assignment.generation, assignment.configs, assignment.states))
        if assignment.incarnation:
            planned_for[member] = assignment.incarnation
        if assignment.member_epoch:
            member_epochs[member] = assignment.member_epoch
            member_rejoins[member] = assignment.rejoins
            member_epoch = max(member_epoch, assignment.member_epoch)
        if assignment.revoked and (in_flight is None or member_name in in_flight
                                   or assignment.generation > persisted_generation):
            # In flight: the status says so, or it predates the document (the round
            # that wrote it died before its status), or it is too old to say (no list).
            revoking[member] = assignment.revoked
        elif assignment.revoked:
            settled[member] = assignment.revoked
        generation = max(generation, assignment.generation)
        for resource, epoch in assignment.epochs.items():
            epochs[resource] = max(epoch, epochs.get(resource, 0))
    # A ConfigMap older than another that assigns the same resource is stale: the round
    # that wrote the newer one had the barrier's word that the older holder stopped or
    # departed, and died before it deleted or rewrote the older document.
    connectors: set[str] = set()
    tasks: set[str] = set()
    for member in sorted(assignments, key=lambda m: (-assigned_at[m], m)):
        mine = assignments[member]
        if not (connectors.isdisjoint(mine.connectors) and tasks.isdisjoint(mine.tasks)):
            assignments[member] = model.ConnectorsAndTasks(mine.connectors - connectors,
                                                           mine.tasks - tasks)
        connectors.update(mine.connectors)
        tasks.update(mine.tasks)
    assigned_anywhere = model.ConnectorsAndTasks(frozenset(connectors), frozenset(tasks))
    lost: dict[ids.WorkerId, model.ConnectorsAndTasks] = {}
    for member, raw_resources in (document.get("lost") or {}).items():
        try:
            resources = codec.decode_resources(raw_resources, f"status.state.lost[{member!r}]")
        except errors.RemoteProtocolError:
            continue  # Unreadable: nothing is known lost from it (the round reassigns it).
        departed = ids.WorkerId(str(member))
        if still := settled.get(departed, model.EMPTY).intersection(resources):
            # It departed with this revocation unacknowledged (the status counts it lost
            # from it) and its document outlived it. A restored leader presumes that a
            # member whose pod is gone may run what its document gives it until its
            # budget runs out (``liveness.vanished``), and this is part of that. Hard
            # chaos seed 5259 (families 4): read as done, the revoked task was not held
            # by the vanished member, which as a member got its lost task back and lost
            # it to balancing in the same round: on another member inside its grace.
            revoking[departed] = still
        resources = resources.difference(assigned_anywhere)
        if resources:
            lost[departed] = resources
    revoking = _acknowledged_dropped(revoking, assignments, assigned_at)
    delay: model.Delay | None = None
    raw_delay = document.get("delay")
    if isinstance(raw_delay, Mapping) and isinstance(raw_delay.get("deadlineMs"), int):
        departures = raw_delay.get("departures")
        delay = model.Delay(
            deadline_ms=raw_delay["deadlineMs"],
            candidates=tuple(ids.WorkerId(str(c)) for c in raw_delay.get("candidates") or ()),
            departures={ids.WorkerId(str(m)): at for m, at in departures.items()
                        if isinstance(at, int) and not isinstance(at, bool)}
            if isinstance(departures, Mapping) else {},
        )
    incarnations = {
        ids.WorkerId(str(k)): str(v)
        for k, v in (document.get("incarnations") or {}).items()
        if ids.WorkerId(str(k)) in assignments
    }
    # A ConfigMap is written before the status of its round: the incarnation its
    # document was planned for is at least as new as the one the status names.
    incarnations.update(planned_for)
    state = model.PlanState(
        generation=generation,
        protocol=protocol,
        assignments=assignments,
        assigned_at=assigned_at,
        incarnations=incarnations,
        lost=lost,
        delay=delay,
        epochs=epochs,
        revoking=revoking,
        # A ConfigMap newer than the status: the last round died mid-write. Under eager
        # that round was a stop-the-world one (or the assignment after it), and the
        # documents it left look like a finished, unbalanced assignment: go on revoking.
        eager_revoking=bool(document.get("eagerRevoking", False)) or (
            protocol is model.Protocol.EAGER and generation > persisted_generation),
        backoff=_decode_backoff(document.get("backoff")),
    )
    floor = max([_int(document.get("epochFloor"), 0), *epochs.values()])
    settings: dict[str, tuple[Mapping[str, str] | None, str | None]] = {}
    for _, configs, states in sorted(documents, key=lambda d: d[0]):
        for name in {*configs, *states}:
            settings[name] = (configs.get(name), states.get(name))
    return Restored(state, tuple(sorted(unreadable)), member_epochs, member_epoch,
                    member_rejoins, floor, settings)


def _acknowledged_dropped(revoking: Mapping[ids.WorkerId, model.ConnectorsAndTasks],
                          assignments: Mapping[ids.WorkerId, model.ConnectorsAndTasks],
                          assigned_at: Mapping[ids.WorkerId, int]
                          ) -> dict[ids.WorkerId, model.ConnectorsAndTasks]:
    """Each document's revoked set without what a newer document assigns.

    The round that wrote the newer document had the barrier's word that the revoked
    member stopped it (acknowledged) or departed, and a document is not rewritten
    only to clear a revocation its member acknowledged (``model.tells_more``): what
    such a set still lists runs elsewhere now, and the member no longer holds it.
    """
    if not revoking:
        return dict(revoking)
    result: dict[ids.WorkerId, model.ConnectorsAndTasks] = {}
    newer_c: set[str] = set()
    newer_t: set[str] = set()
    order = sorted(assignments, key=lambda m: -assigned_at[m])
    for _, same in itertools.groupby(order, key=lambda m: assigned_at[m]):
        written = list(same)
        for member in written:
            revoked = revoking.get(member)
            if revoked:
                kept = model.ConnectorsAndTasks(revoked.connectors - newer_c,
                                                revoked.tasks - newer_t)
                if kept:
                    result[member] = revoked if len(kept) == len(revoked) else kept
        for member in written:
            newer_c.update(assignments[member].connectors)
            newer_t.update(assignments[member].tasks)
    return result


def restore_owners(raw: object) -> dict[str, tuple[str, str]]:
    """The pod owners persisted in ``status.state.owners`` (``member: "Kind/name"``).

    They are how a restarted operator knows a departed pod's StatefulSet or
    ReplicaSet, and so whether the departure is permanent, without having seen the pod.
    """
    document = raw if isinstance(raw, Mapping) else {}
    found = document.get("owners")
    result: dict[str, tuple[str, str]] = {}
    for member, text in (found.items() if isinstance(found, Mapping) else ()):
        kind, _, name = str(text).partition("/")
        if kind and name:
            result[str(member)] = (kind, name)
    return result


def restore_terminating(raw: object) -> frozenset[tuple[str, str]]:
    """The (member, pod uid) pairs persisted in ``status.state.terminating``."""
    document = raw if isinstance(raw, Mapping) else {}
    found = document.get("terminating")
    return frozenset((str(entry[0]), str(entry[1])) for entry in (
        found if isinstance(found, list) else ())
        if isinstance(entry, list) and len(entry) == 2)


def _decode_backoff(raw: object) -> model.RevocationBackoff:
    """The persisted revocation backoff; anything unreadable starts over (it only delays)."""
    if not isinstance(raw, Mapping):
        return model.RevocationBackoff()
    held = raw.get("heldUntilMs")
    return model.RevocationBackoff(
        revoked_last=raw.get("revokedLast") is True,
        streak=max(0, _int(raw.get("streak"), 0)),
        held_until_ms=held if isinstance(held, int) and not isinstance(held, bool) else None,
    )


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
    connectors.update(model.task_connector(task) for task in plan.assigned.tasks)
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


def _int(value: object, default: int) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default
