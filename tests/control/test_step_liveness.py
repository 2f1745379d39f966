"""Lease expiry timed by the operator's own observations (issue 12, mechanism 2)."""

from __future__ import annotations

import dataclasses

from kooper.control import liveness, modelled, views
from kooper.control import step as control
from kooper.core import ids, model

W = ids.WorkerId
GROUP = "g"
SETTINGS = model.Settings(model.Protocol.COMPATIBLE, model.Policy.KOOPER, max_delay_ms=0)
LEASE_S, SKEW_S = 30, 5
T0 = 1_700_000_000_000  # the operator's clock


def group() -> views.GroupView:
    return dataclasses.replace(modelled.group(GROUP, SETTINGS), lease_duration_s=LEASE_S,
                               clock_skew_s=SKEW_S)


def member(name: str, owned: model.ConnectorsAndTasks = model.EMPTY,
           generation: int = -1) -> model.Member:
    return model.Member(W(name), owned, generation, frozenset(model.Protocol), "1")


def lease(m: model.Member, renew_ms: int) -> views.LeaseView:
    """``m``'s Lease as its worker wrote it, ``renewTime`` on the worker's own clock."""
    return dataclasses.replace(modelled.lease(m), renew_ms=renew_ms, duration_s=LEASE_S)


def inputs(members: list[tuple[model.Member, int]]) -> control.Inputs:
    return control.Inputs(
        group=group(), pods=[modelled.pod(GROUP, m) for m, _ in members],
        leases=[lease(m, renew) for m, renew in members],
        connectors=modelled.connectors(GROUP, {"A": 4}))


def settled(offset_ms: int) -> tuple[control.Memory, list[model.Member]]:
    """Members a and b formed the group and applied their documents at T0; ``a``'s
    clock is ``offset_ms`` off the operator's (b's is right)."""
    a, b = member("a"), member("b")
    first = control.step(inputs([(a, T0 + offset_ms), (b, T0)]), control.Memory(), now_ms=T0)
    docs = {w.member: w for w in first.configmap_writes}
    a = dataclasses.replace(a, owned=docs["a"].assigned, generation=docs["a"].generation)
    b = dataclasses.replace(b, owned=docs["b"].assigned, generation=docs["b"].generation)
    second = control.step(inputs([(a, T0 + offset_ms + 1), (b, T0 + 1)]), first.memory,
                          now_ms=T0 + 100)
    return second.memory, [a, b]


def test_a_worker_clock_7s_behind_does_not_expire_its_lease_early():
    memory, (a, b) = settled(-7_000)
    # a is cut off after its renewal observed at T0 + 100; b keeps renewing.
    # Its worker fences by its own budget; the operator must not hand its work over
    # before lease + margin after it *observed* the last renewal: T0 + 100 + 35 s.
    for now in (T0 + 28_100, T0 + 30_000, T0 + 35_099):
        decided = control.step(inputs([(a, T0 - 7_000 + 1), (b, now)]), memory, now_ms=now)
        plan = decided.plan or memory.volatile.last_plan
        assert plan is not None
        assert W("a") in plan.members
        assert all(not (w.assigned.intersection(a.owned)) for w in decided.configmap_writes)
        memory = decided.memory
    gone = control.step(inputs([(a, T0 - 7_000 + 1), (b, T0 + 35_100)]), memory,
                        now_ms=T0 + 35_100)
    assert gone.deletes == (W("a"),)
    assert gone.wake_at_ms is None or gone.wake_at_ms > T0 + 35_100


def test_a_worker_clock_10s_ahead_does_not_keep_a_silent_lease_alive():
    memory, (a, b) = settled(+10_000)
    gone = control.step(inputs([(a, T0 + 10_000 + 1), (b, T0 + 35_100)]), memory,
                        now_ms=T0 + 35_100)
    assert gone.deletes == (W("a"),)


def test_the_wake_up_is_at_the_observed_expiry():
    memory, (a, b) = settled(-7_000)
    decided = control.step(inputs([(a, T0 - 7_000 + 1), (b, T0 + 20_000)]), memory,
                           now_ms=T0 + 20_000)
    assert decided.wake_at_ms == T0 + 100 + (LEASE_S + SKEW_S) * 1000


def test_a_new_leader_treats_every_lease_as_observed_now():
    memory, (a, b) = settled(-7_000)
    fresh = memory.replace(observed={})  # restored(): nothing observed yet
    at = T0 + 34_000
    decided = control.step(inputs([(a, T0 - 7_000 + 1), (b, at)]), fresh, now_ms=at)
    assert decided.deletes == ()
    assert decided.memory.volatile.observed["kooper-a"][1] == at
    renewed = inputs([(a, T0 - 7_000 + 2), (b, at)]).leases
    observed = liveness.observe(decided.memory.volatile.observed, renewed, now_ms=at + 5)
    assert observed["kooper-a"][1] == at + 5


def test_a_forged_copy_of_another_members_lease_is_ignored_with_an_event():
    """Issue 12, mechanism 3: pod b rewrites its own Lease as a copy of a's (label, owner,
    report) and keeps renewing it; a hangs. The copy never vouches for a: a departs when
    its own Lease expires, and the copy is reported."""
    memory, (a, _) = settled(0)
    for now in (T0 + 10_000, T0 + 20_000, T0 + 30_000, T0 + 35_100):
        forged = dataclasses.replace(lease(a, now), name=views.configmap_name("b"))
        decided = control.step(dataclasses.replace(inputs([(a, T0 + 1)]),
                                                   leases=[lease(a, T0 + 1), forged]),
                               memory, now_ms=now)
        memory = decided.memory
        if now == T0 + 10_000:
            assert "LeaseIdentityMismatch" in [e.reason for e in decided.events]
            assert "LeaseIdentityMismatch" in decided.metrics.bad_input
    assert decided.deletes == (W("a"),)
    assert decided.plan is not None
    assert W("a") not in decided.plan.members
