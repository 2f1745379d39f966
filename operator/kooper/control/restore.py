"""The planner state read back after a restart: ``status.state`` and the ConfigMaps.

``control.state`` writes ``status.state``; a leader that just started reads it here,
with every member's ConfigMap (``restore``): the ConfigMaps are the assignments, with
the epochs of assigned resources and the generation each was written at.

The order of writes in a round makes this safe (see ``control.step``): deletions of
departed members' ConfigMaps first, then changed ConfigMaps, then the status. If the
operator dies after the deletions, the departed member's work is in no document: the
next leader treats it as unassigned, and the barrier still holds it while a live
member reports owning it. If it dies between the ConfigMaps and the status, the
ConfigMaps are newer than the status; ``restore`` takes the newest generation, drops
from the lost sets whatever a ConfigMap assigns, and keeps the largest epoch.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Iterable, Mapping
from typing import Any

from kooper.control import adaptive, views
from kooper.control.inputs import Issued, Memory
from kooper.core import errors, ids, model
from kooper.protocol import codec, messages

Settings = Mapping[str, tuple[Mapping[str, str] | None, str | None]]
"""connector → (config, state), as a document carries them."""


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
    settings: Settings = dataclasses.field(default_factory=dict)
    """connector → (config, state) as the newest ConfigMap naming it carries them."""


def restore(
    raw: object, configmaps: Iterable[tuple[str, str]], *, group: str
) -> Restored:
    """Rebuild the planner state from ``status.state`` and ``(member, assignment.json)`` pairs."""
    document = raw if isinstance(raw, Mapping) else {}
    persisted_generation = _int(document.get("generation"), 0)
    protocol = _protocol(document.get("protocol", "compatible"))
    read = _read(document, configmaps, group=group)
    assignments, assigned_anywhere = _newest_first(read.assignments, read.assigned_at)
    lost, still = _lost(document, read.settled, assigned_anywhere)
    revoking = _acknowledged_dropped({**read.revoking, **still}, assignments, read.assigned_at)
    incarnations = {
        ids.WorkerId(str(k)): str(v)
        for k, v in _mapping(document.get("incarnations")).items()
        if ids.WorkerId(str(k)) in assignments
    }
    # A ConfigMap is written before the status of its round: the incarnation its
    # document was planned for is at least as new as the one the status names.
    incarnations.update(read.planned_for)
    state = model.PlanState(
        generation=read.generation,
        protocol=protocol,
        assignments=assignments,
        assigned_at=read.assigned_at,
        incarnations=incarnations,
        lost=lost,
        delay=_delay(document.get("delay")),
        epochs=read.epochs,
        revoking=revoking,
        # A ConfigMap newer than the status: the last round died mid-write. Under eager
        # that round was a stop-the-world one (or the assignment after it), and the
        # documents it left look like a finished, unbalanced assignment: go on revoking.
        eager_revoking=bool(document.get("eagerRevoking", False)) or (
            protocol is model.Protocol.EAGER and read.generation > persisted_generation),
        backoff=_backoff(document.get("backoff")),
    )
    floor = max([_int(document.get("epochFloor"), 0), *read.epochs.values()])
    return Restored(state, tuple(sorted(read.unreadable)), read.member_epochs,
                    read.member_epoch, read.member_rejoins, floor, _settings(read.documents))


@dataclasses.dataclass(slots=True)
class _Read:
    """What the status and the ConfigMaps that decode say, gathered by ``_read``."""

    generation: int
    """The newest generation: the status's, or a newer ConfigMap's."""
    member_epoch: int
    """The largest membership epoch: the status's, or a larger one a ConfigMap names."""
    epochs: dict[str, int]
    """resource → the largest epoch the status or a ConfigMap gives it."""
    assignments: dict[ids.WorkerId, model.ConnectorsAndTasks] = dataclasses.field(
        default_factory=dict)
    assigned_at: dict[ids.WorkerId, int] = dataclasses.field(default_factory=dict)
    revoking: dict[ids.WorkerId, model.ConnectorsAndTasks] = dataclasses.field(
        default_factory=dict)
    """Revoked sets whose revocation may be in flight."""
    settled: dict[ids.WorkerId, model.ConnectorsAndTasks] = dataclasses.field(
        default_factory=dict)
    """Revoked sets the status says no revocation of is in flight (acknowledged, or the
    member departed: then what the status counts lost from it is read by ``_lost``)."""
    member_epochs: dict[ids.WorkerId, int] = dataclasses.field(default_factory=dict)
    member_rejoins: dict[ids.WorkerId, int] = dataclasses.field(default_factory=dict)
    planned_for: dict[ids.WorkerId, str] = dataclasses.field(default_factory=dict)
    """member → the incarnation its document was planned for."""
    unreadable: list[str] = dataclasses.field(default_factory=list)
    documents: list[tuple[int, Mapping[str, Mapping[str, str]], Mapping[str, str]]] = \
        dataclasses.field(default_factory=list)
    """(generation, configs, states) of each document."""


def _read(document: Mapping[Any, Any], configmaps: Iterable[tuple[str, str]], *,
          group: str) -> _Read:
    """The status's generation, membership epoch and epochs, and every ConfigMap's word."""
    persisted_generation = _int(document.get("generation"), 0)
    unacknowledged = document.get("revoking")
    in_flight = frozenset(str(m) for m in unacknowledged) \
        if isinstance(unacknowledged, list) else None
    read = _Read(
        generation=persisted_generation,
        member_epoch=max(0, _int(document.get("memberEpoch"), 0)),
        epochs={str(k): v for k, v in _mapping(document.get("epochs")).items()
                if isinstance(v, int)})
    for member_name, text in configmaps:
        member = ids.WorkerId(member_name)
        if not text:
            continue  # no document yet: a new leader's fence occupied the name
        try:
            assignment = codec.decode_assignment(text)
        except errors.RemoteProtocolError:
            read.unreadable.append(member_name)
            continue
        if assignment.group != group or assignment.member != member_name:
            read.unreadable.append(member_name)
            continue
        read.assignments[member] = assignment.assigned
        read.assigned_at[member] = assignment.generation
        read.documents.append((assignment.generation, assignment.configs, assignment.states))
        if assignment.incarnation:
            read.planned_for[member] = assignment.incarnation
        if assignment.member_epoch:
            read.member_epochs[member] = assignment.member_epoch
            read.member_rejoins[member] = assignment.rejoins
            read.member_epoch = max(read.member_epoch, assignment.member_epoch)
        if assignment.revoked and (in_flight is None or member_name in in_flight
                                   or assignment.generation > persisted_generation):
            # In flight: the status says so, or it predates the document (the round
            # that wrote it died before its status), or it is too old to say (no list).
            read.revoking[member] = assignment.revoked
        elif assignment.revoked:
            read.settled[member] = assignment.revoked
        read.generation = max(read.generation, assignment.generation)
        _raise_epochs(read.epochs, assignment)
    return read


def _raise_epochs(epochs: dict[str, int], assignment: messages.Assignment) -> None:
    """Each of ``epochs`` at least as large as the one ``assignment`` gives it."""
    for resource, epoch in assignment.epochs.items():
        epochs[resource] = max(epoch, epochs.get(resource, 0))


def _newest_first(assignments: Mapping[ids.WorkerId, model.ConnectorsAndTasks],
                  assigned_at: Mapping[ids.WorkerId, int]
                  ) -> tuple[dict[ids.WorkerId, model.ConnectorsAndTasks],
                             model.ConnectorsAndTasks]:
    """The assignments without what a newer document assigns, and everything assigned.

    A ConfigMap older than another that assigns the same resource is stale: the round
    that wrote the newer one had the barrier's word that the older holder stopped or
    departed, and died before it deleted or rewrote the older document.
    """
    result = dict(assignments)
    connectors: set[str] = set()
    tasks: set[str] = set()
    for member in sorted(assignments, key=lambda m: (-assigned_at[m], m)):
        mine = assignments[member]
        if not (connectors.isdisjoint(mine.connectors) and tasks.isdisjoint(mine.tasks)):
            result[member] = model.ConnectorsAndTasks(mine.connectors - connectors,
                                                      mine.tasks - tasks)
        connectors.update(mine.connectors)
        tasks.update(mine.tasks)
    return result, model.ConnectorsAndTasks(frozenset(connectors), frozenset(tasks))


def _lost(document: Mapping[Any, Any], settled: Mapping[ids.WorkerId, model.ConnectorsAndTasks],
          assigned_anywhere: model.ConnectorsAndTasks
          ) -> tuple[dict[ids.WorkerId, model.ConnectorsAndTasks],
                     dict[ids.WorkerId, model.ConnectorsAndTasks]]:
    """What the status counts lost from each member that no document assigns, and the
    settled revocations of departed members that are still in flight."""
    lost: dict[ids.WorkerId, model.ConnectorsAndTasks] = {}
    still_revoking: dict[ids.WorkerId, model.ConnectorsAndTasks] = {}
    for member, raw_resources in _mapping(document.get("lost")).items():
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
            still_revoking[departed] = still
        resources = resources.difference(assigned_anywhere)
        if resources:
            lost[departed] = resources
    return lost, still_revoking


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


def _protocol(text: Any) -> model.Protocol:
    """The persisted protocol; anything else is ``compatible``."""
    return model.Protocol(text) if text in ("eager", "compatible") \
        else model.Protocol.COMPATIBLE


def _delay(raw: object) -> model.Delay | None:
    """The persisted delay (``kooper``: with each lost origin's own deadline), if any."""
    if not (isinstance(raw, Mapping) and isinstance(raw.get("deadlineMs"), int)):
        return None
    departures = raw.get("departures")
    return model.Delay(
        deadline_ms=raw["deadlineMs"],
        candidates=tuple(ids.WorkerId(str(c)) for c in raw.get("candidates") or ()),
        departures={ids.WorkerId(str(m)): at for m, at in departures.items()
                    if isinstance(at, int) and not isinstance(at, bool)}
        if isinstance(departures, Mapping) else {},
    )


def _settings(documents: Iterable[tuple[int, Mapping[str, Mapping[str, str]],
                                        Mapping[str, str]]]) -> Settings:
    """connector → (config, state) as the newest document naming it carries them."""
    settings: dict[str, tuple[Mapping[str, str] | None, str | None]] = {}
    for _, configs, states in sorted(documents, key=lambda d: d[0]):
        for name in {*configs, *states}:
            settings[name] = (configs.get(name), states.get(name))
    return settings


def _backoff(raw: object) -> model.RevocationBackoff:
    """The persisted revocation backoff; anything unreadable starts over (it only delays)."""
    if not isinstance(raw, Mapping):
        return model.RevocationBackoff()
    held = raw.get("heldUntilMs")
    return model.RevocationBackoff(
        revoked_last=raw.get("revokedLast") is True,
        streak=max(0, _int(raw.get("streak"), 0)),
        held_until_ms=held if isinstance(held, int) and not isinstance(held, bool) else None,
    )


def owners(raw: object) -> dict[str, tuple[str, str]]:
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


def terminating(raw: object) -> frozenset[tuple[str, str]]:
    """The (member, pod uid) pairs persisted in ``status.state.terminating``."""
    document = raw if isinstance(raw, Mapping) else {}
    found = document.get("terminating")
    return frozenset((str(entry[0]), str(entry[1])) for entry in (
        found if isinstance(found, list) else ())
        if isinstance(entry, list) and len(entry) == 2)


def persisted_epochs(raw: object) -> tuple[int, int]:
    """(``memberEpoch``, ``epochFloor``) of a ``status.state`` as written (ConfigMaps aside)."""
    document = raw if isinstance(raw, Mapping) else {}
    return (max(0, _int(document.get("memberEpoch"), 0)),
            max(0, _int(document.get("epochFloor"), 0)))


def _mapping(value: object) -> Mapping[Any, Any]:
    """A field of ``status.state`` that should be a mapping; anything else reads as absent
    (``status.state`` is free-form: a hand edit of the status can put anything there)."""
    return value if isinstance(value, Mapping) else {}


def _int(value: object, default: int) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def restored(group: views.GroupView, configmaps: Mapping[str, views.ConfigMapView], *,
             reported: Iterable[int] = ()) -> Memory:
    """The memory of a leader that just started: the persisted state, nothing else.

    ``reported``: the generations the group's members report having applied. The next
    generation planned must be newer than each: a WorkerGroup deleted and created again
    under its name starts from no status and no ConfigMaps (they went with the old
    object) while its members still hold the old one's documents, and a worker ignores
    every document whose generation is not newer than one it accepted, so the new
    group's documents were all ignored until its generation passed the old one's.
    """
    result = restore(group.status.get("state"),
                           ((member, cm.text) for member, cm in configmaps.items()),
                           group=group.name)
    planner = result.state
    given = {member: (planner.incarnations.get(member, ""),
                      assigned.union(planner.revoking.get(member, model.EMPTY)))
             for member, assigned in planner.assignments.items()}
    documents = {member: (planner.incarnations.get(member, ""), assigned)
                 for member, assigned in planner.assignments.items()}
    epochs = {member: (planner.incarnations.get(member, ""), epoch,
                       result.member_rejoins.get(member, 0))
              for member, epoch in result.member_epochs.items()
              if member in planner.assignments}
    return Memory.of(
        state=planner, given=given, documents=documents, pod_owners=owners(
        group.status.get("state")), configmaps=frozenset(ids.WorkerId(m) for m in configmaps),
        member_epochs=epochs, settings_written=result.settings,
        issued=Issued(member_epoch=result.member_epoch, epoch_floor=result.epoch_floor,
                      floor_pending=result.epoch_floor > 0,
                      written=persisted_epochs(group.status.get("state"))),
        learned=adaptive.decode((group.status.get("state") or {}).get("adaptive")),
        terminating=terminating(group.status.get("state"))).issuing_above(
            max(reported, default=0))
