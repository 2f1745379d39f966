"""Planned departures: a member whose pod was terminating when it left.

Kubernetes stops a pod gracefully by setting its ``deletionTimestamp`` and sending
its containers SIGTERM; the worker SDK then leaves (``Worker.leave``: stops
everything, reports owning nothing, deletes its Lease) and the kubelet removes the
pod. A crash, ``kill -9``, a forced delete or a lost node produce other facts: the
pod vanishes (its Lease is garbage-collected after it) or the Lease just stops
being renewed, and the pod never showed a ``deletionTimestamp``.

So a departure is *planned* when the member's pod carried a ``deletionTimestamp``
when the member departed: seen in this round (the pod is still there, terminating),
or in an earlier round while the member was still live (the pod has gone since). Or
when the worker said so: the last version of its deleted Lease says that incarnation
``left`` (``liveness.left``), which a round that never saw the pod terminate still
has (the pod went terminating, the worker left and the pod went, within one debounce).
A planned member's work is not coming back with it: the ``kooper`` policy hands it
to the other members at once instead of waiting for the pod (returning identity) or
for the scheduled-rebalance delay. The barrier is the one of every departure: its
work is free only once the member is no longer live (its Lease deleted or expired),
so nothing is started elsewhere before its stop is acknowledged.

What was seen is persisted (``status.state.terminating``: a pod starting to terminate
is a round of its own), so an operator that restarts between seeing the pod terminate
and seeing the member depart still judges the departure planned. One that never saw
it (it was down for the whole graceful stop) treats it as unplanned (the delay and
returning identity, ``control.adaptive``'s grace), never a double run.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from collections.abc import Set as AbstractSet

from kooper.control import liveness, views
from kooper.control.inputs import Inputs, Memory, OwnerFacts, absent_members, owner_of
from kooper.core import ids, model

Seen = frozenset[tuple[str, str]]
"""(member, pod uid) of live members whose pod was seen terminating."""


def terminating(pods: Mapping[str, views.PodView], members: Iterable[ids.WorkerId],
                seen: Seen) -> Seen:
    """``seen`` plus the live ``members`` whose pod is terminating now.

    Entries of members that are neither live nor have a pod any more are kept until
    ``forget`` drops them (the departure round reads them).
    """
    now = {(m, pods[m].uid) for m in members if m in pods and pods[m].deleting}
    return seen | now if now - seen else seen


def planned(member: str, pod: views.PodView | None, seen: Seen,
            left: AbstractSet[str] = frozenset()) -> bool:
    """Whether the departed ``member`` left on purpose: its pod is terminating, or is gone
    and was seen terminating or the member is in ``left`` (``said_left``). A worker that
    left while its pod stays (the kubelet restarts its container) comes back as the same
    identity: that is no planned departure."""
    if pod is not None:
        return pod.deleting
    return member in left or any(name == member for name, _ in seen)


def said_left(left: Mapping[ids.WorkerId, str], memory: Memory) -> frozenset[str]:
    """Members whose deleted Lease's last version says the incarnation that held their
    work left (``left``: ``liveness.left``)."""
    incarnations = memory.persisted.state.incarnations
    return frozenset(m for m, incarnation in left.items() if incarnations.get(m) == incarnation)


def forget(seen: Seen, state: model.PlanState, pods: Mapping[str, views.PodView]) -> Seen:
    """Drop entries of members the state no longer knows, or whose pod was replaced."""
    if not seen:
        return seen
    known = state.assignments.keys() | state.lost.keys()
    kept = frozenset((m, uid) for m, uid in seen
                     if m in known and (m not in pods or pods[m].uid == uid))
    return kept if len(kept) != len(seen) else seen


def judge(inputs: Inputs, memory: Memory, members: Mapping[ids.WorkerId, model.Member],
          seen: Seen, left: Mapping[ids.WorkerId, str] | None = None) -> dict[str, bool]:
    """Absent members judged so far: True for a departure whose work is reassigned now
    (a known-permanent one, or a planned one)."""
    judged: dict[str, bool] = {}
    said = said_left(left or {}, memory)
    for member, pod in absent_members(inputs, memory):
        if member in members:
            continue
        if member in memory.volatile.permanent:
            judged[member] = memory.volatile.permanent[member]
            continue
        if planned(member, pod, seen, said):
            judged[member] = True
            continue
        kind, name = owner_of(member, pod, memory)
        facts = OwnerFacts(exists=True)
        if kind in liveness.PERMANENT_OWNER_KINDS:
            read = inputs.owners.get((kind, name))
            if read is None:
                continue  # Not read (or the read failed): judge it next round.
            facts = read
        judged[member] = liveness.permanently_departed(
            pod_name=member, owner_kind=kind, owner_name=name, owner_exists=facts.exists,
            replicas=facts.replicas)
    return judged
