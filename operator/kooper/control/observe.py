"""Stage 1 of a step: what the round observes of its members (pure).

Leases renewed since the last round, the members (pods with a Lease and a report),
members whose pod vanished while their process may still run (``liveness.vanished``),
the last good report of each leased member, pod owners, pods being stopped, which
absent members are gone for good (``departures.judge``), and which connectors' work
still runs outside the group (``elsewhere.held``).
"""

from __future__ import annotations

from collections.abc import Mapping

from kooper.control import departures, elsewhere, liveness, snapshot
from kooper.control.decision import Observation
from kooper.control.inputs import Caches, Inputs, Memory, Owner
from kooper.core import ids
from kooper.protocol import messages


def observe(inputs: Inputs, memory: Memory, *, now_ms: int, caches: Caches) -> Observation:
    """The members of this round (see the module docstring)."""
    group = inputs.group
    observed = liveness.observe(memory.volatile.observed, inputs.leases, now_ms=now_ms)
    found = snapshot.collect_members(group, pods=inputs.pods, leases=inputs.leases,
                                     last_good=memory.volatile.good_reports, now_ms=now_ms,
                                     memo=caches.members, observed=observed)
    vanished: Mapping[ids.WorkerId, liveness.Vanished] = {}
    left = liveness.left(inputs.released) if inputs.released else {}
    if not inputs.gone_means_stopped:
        vanished = liveness.vanished(
            memory.volatile.vanished, state=memory.persisted.state, live=found.members,
            pods=found.pods,
            leases=inputs.leases, before=memory.volatile.observed, observed=observed,
            reports=memory.volatile.good_reports, now_ms=now_ms,
            documents=memory.persisted.given if memory.persisted.documents is not None else None,
            gone=left,
            owning=liveness.still_owning(inputs.released) if inputs.released else None,
            default_duration_s=group.lease_duration_s, skew_s=group.clock_skew_s)
        found = snapshot.with_vanished(found, vanished)
    good: Mapping[ids.WorkerId, messages.Report] = found.reports
    if len(found.reports) != len(inputs.leases):  # some Lease is not (yet) a member
        leased = {lease.member for lease in inputs.leases}
        good = {m: r for m, r in memory.volatile.good_reports.items() if m in leased}
        good.update(found.reports)
    owners: Mapping[str, Owner] = memory.persisted.pod_owners
    if any(owners.get(pod.name) != (pod.owner_kind, pod.owner_name)
           for pod in found.new_pods if pod.owner_kind):
        owners = {**owners, **{pod.name: (pod.owner_kind, pod.owner_name)
                               for pod in found.new_pods if pod.owner_kind}}
    seen = departures.terminating(found.pods, found.members, memory.persisted.terminating)
    permanent = departures.judge(inputs, memory, found.members, seen, left)
    outside = elsewhere.NOTHING
    if len(inputs.leases) != len(found.members):  # some Lease is not a member's
        outside = elsewhere.held(
            inputs.connectors, inputs.leases, matching=found.pods,
            state=memory.persisted.state, members=found.members, observed=observed,
            now_ms=now_ms, default_duration_s=group.lease_duration_s, skew_s=group.clock_skew_s)
    return Observation(observed=observed, found=found, vanished=vanished, good=good,
                       owners=owners, seen=seen, permanent=permanent, outside=outside,
                       left=left)
