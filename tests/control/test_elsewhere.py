"""Work running outside the group (``control.elsewhere``, ``liveness._renewed``).

Resource names are unique in a namespace, not in a WorkerGroup: a connector moved here
from another group, or a pod relabelled out of this group, leaves work running on a
pod this group does not count as a member. Nothing of it may start here meanwhile.
"""

from __future__ import annotations

import dataclasses

from kooper.control import modelled, status, views
from kooper.control import step as control
from kooper.core import ids, model

W = ids.WorkerId
GROUP = "g"
SETTINGS = model.Settings(model.Protocol.COMPATIBLE, model.Policy.KOOPER, max_delay_ms=0)
LEASE_S, SKEW_S = 30, 5
BUDGET_MS = (LEASE_S + SKEW_S) * 1000
T0 = 1_700_000_000_000


def member(name: str, owned: model.ConnectorsAndTasks = model.EMPTY) -> model.Member:
    return model.Member(W(name), owned, -1, frozenset(model.Protocol), "1")


def lease(m: model.Member, renew_ms: int) -> views.LeaseView:
    return dataclasses.replace(modelled.lease(m), renew_ms=renew_ms, duration_s=LEASE_S,
                               holder=f"{m.id}/{m.incarnation}")


def group() -> views.GroupView:
    return dataclasses.replace(modelled.group(GROUP, SETTINGS), lease_duration_s=LEASE_S,
                               clock_skew_s=SKEW_S)


def inputs(ours: list[tuple[model.Member, int]], theirs: list[tuple[model.Member, int]],
           counts: dict[str, int]) -> control.Inputs:
    """``ours`` are this group's members, ``theirs`` another group's (pods labelled for
    it), each with its Lease renewed at the given time."""
    pods = [modelled.pod(GROUP, m) for m, _ in ours]
    pods += [modelled.pod("other", m) for m, _ in theirs]
    return control.Inputs(group=group(), pods=pods,
                          leases=[lease(m, at) for m, at in (*ours, *theirs)],
                          connectors=modelled.connectors(GROUP, counts))


def given(decided: control.Step) -> set[str]:
    result: set[str] = set()
    for doc in decided.configmap_writes:
        result.update(doc.assigned.sorted())
    return result


def problems(decided: control.Step, reason: str) -> list[str]:
    assert decided.status is not None
    return [message for why, message in decided.status.facts.problems if why == reason]


MOVED = model.ConnectorsAndTasks(frozenset({"B"}), frozenset({"B-0", "B-1"}))


def test_a_connector_still_running_in_another_group_waits_until_it_stopped_there():
    a, x = member("a"), member("x-0", owned=MOVED)
    first = control.step(inputs([(a, T0)], [(x, T0)], {"A": 2, "B": 2}), control.Memory(),
                         now_ms=T0)
    assert given(first) == {"A", "A-0", "A-1"}
    [message] = problems(first, "ConnectorHeldElsewhere")
    assert "B" in message
    assert "x-0" in message
    assert first.wake_at_ms == T0 + BUDGET_MS  # when x-0's Lease runs out unless renewed
    stopped = dataclasses.replace(x, owned=model.EMPTY)
    then = control.step(inputs([(a, T0 + 100)], [(stopped, T0 + 100)], {"A": 2, "B": 2}),
                        first.memory, now_ms=T0 + 100)
    assert MOVED.sorted() == sorted(given(then) & set(MOVED.sorted()))
    assert not problems(then, "ConnectorHeldElsewhere")


def test_an_outside_lease_that_expired_holds_nothing_back():
    """Its worker stopped renewing it (it fenced itself) for a whole budget, as this
    operator observed it."""
    a, x = member("a"), member("x-0", owned=MOVED)
    first = control.step(inputs([(a, T0)], [(x, T0)], {"B": 2}), control.Memory(), now_ms=T0)
    assert not given(first) & set(MOVED.sorted())
    later = T0 + BUDGET_MS
    decided = control.step(inputs([(a, later)], [(x, T0)], {"B": 2}), first.memory,
                           now_ms=later)
    assert set(MOVED.sorted()) <= given(decided)


def test_a_connector_this_group_already_runs_part_of_is_not_held_back():
    """A report never takes work from a member: one outside claiming B-1 does not stop
    this group's member from keeping B and B-0, nor the round from placing B-1."""
    part = model.ConnectorsAndTasks(frozenset({"B"}), frozenset({"B-0"}))
    first = control.step(inputs([(member("a"), T0)], [], {"B": 2}), control.Memory(),
                         now_ms=T0)
    a = member("a", owned=first.configmap_writes[0].assigned)
    assert part.difference(a.owned) == model.EMPTY
    x = member("x-0", owned=model.ConnectorsAndTasks(frozenset(), frozenset({"B-1"})))
    decided = control.step(inputs([(a, T0 + 1)], [(x, T0 + 1)], {"B": 2}), first.memory,
                           now_ms=T0 + 1)
    assert not problems(decided, "ConnectorHeldElsewhere")


def settled() -> tuple[control.Memory, model.Member, model.Member]:
    """a and b run A's instance and 4 tasks, acknowledged."""
    a, b = member("a"), member("b")
    first = control.step(inputs([(a, T0), (b, T0)], [], {"A": 4}), control.Memory(), now_ms=T0)
    docs = {w.member: w for w in first.configmap_writes}
    a = dataclasses.replace(a, owned=docs["a"].assigned, generation=docs["a"].generation)
    b = dataclasses.replace(b, owned=docs["b"].assigned, generation=docs["b"].generation)
    second = control.step(inputs([(a, T0 + 1), (b, T0 + 1)], [], {"A": 4}), first.memory,
                          now_ms=T0 + 1)
    return second.memory, a, b


def test_a_pod_relabelled_out_of_the_group_keeps_its_work_while_its_worker_renews():
    memory, a, b = settled()
    assert b.owned
    times = range(T0 + 1_000, T0 + 3 * BUDGET_MS, 10_000)
    for now in times:  # b renews every 10 s, its pod no longer matches the selector
        decided = control.step(_relabelled(a, b, now, renewed=now), memory, now_ms=now)
        memory = decided.memory
        assert decided.deletes == ()
        assert not given(decided) & set(b.owned.sorted())
        if now == times[0]:
            [message] = problems(decided, "MemberOutsideSelector")
            assert "pod b no longer matches spec.selector" in message
    # It stops renewing (its worker stopped, or fenced itself): it departs after its budget.
    last = times[-1]
    gone = control.step(_relabelled(a, b, last + BUDGET_MS, renewed=last), memory,
                        now_ms=last + BUDGET_MS)
    assert gone.deletes == (W("b"),)
    assert set(b.owned.sorted()) <= given(gone)


def _relabelled(a: model.Member, b: model.Member, now: int, *, renewed: int) -> control.Inputs:
    """a a member; b's pod relabelled out of every group, its Lease renewed at ``renewed``."""
    found = inputs([(a, now)], [], {"A": 4})
    return dataclasses.replace(found, pods=[*found.pods, modelled.pod("none", b)],
                               leases=[*found.leases, lease(b, renewed)])


def overlapping(created: str) -> views.GroupView:
    """Another group, created at ``created``, whose selector matches this group's pods."""
    return dataclasses.replace(modelled.group("o", SETTINGS), created=created,
                               selector=group().selector)


def test_pods_an_older_groups_selector_matches_too_are_left_to_it():
    """Each would hand the pod its own work through one ConfigMap, ``kooper-<pod>``."""
    a = member("a")
    mine = dataclasses.replace(inputs([(a, T0)], [], {"A": 2}),
                               group=dataclasses.replace(group(), created="2026-01-02T00:00:00Z"))
    older = control.step(dataclasses.replace(
        mine, others=[overlapping("2026-01-01T00:00:00Z")]), control.Memory(), now_ms=T0)
    assert older.configmap_writes == ()
    [message] = problems(older, "SelectorOverlap")
    assert "WorkerGroup o" in message
    assert "a" in message
    assert older.status is not None
    degraded = {c.type: c for c in status.group_conditions(older.status.facts)}["Degraded"]
    assert degraded.reason == "SelectorOverlap"
    younger = control.step(dataclasses.replace(
        mine, others=[overlapping("2026-01-03T00:00:00Z")]), control.Memory(), now_ms=T0)
    assert given(younger) == {"A", "A-0", "A-1"}
    assert not problems(younger, "SelectorOverlap")


def test_what_a_relabelled_member_gave_up_is_free_for_the_others():
    """Its Lease still says what it runs: a revocation it applied (for balance, when a
    new member joined) frees that work, as a live member's acknowledgement does."""
    memory, a, b = settled()
    c = member("c")
    memory = control.step(_relabelled(a, b, T0 + 1_000, renewed=T0 + 1_000), memory,
                          now_ms=T0 + 1_000).memory
    joined = _relabelled(a, b, T0 + 2_000, renewed=T0 + 2_000)
    joined = dataclasses.replace(joined, pods=[*joined.pods, modelled.pod(GROUP, c)],
                                 leases=[*joined.leases, lease(c, T0 + 2_000)])
    revoking = control.step(joined, memory, now_ms=T0 + 2_000)
    told = {doc.member: doc for doc in revoking.configmap_writes}
    assert "b" in told, "the relabelled member is told to give work up"
    gave_up = model.ConnectorsAndTasks(told["b"].revoked.connectors, told["b"].revoked.tasks)
    assert gave_up
    applied = dataclasses.replace(b, owned=b.owned.difference(gave_up),
                                  generation=told["b"].generation)
    later = _relabelled(a, applied, T0 + 3_000, renewed=T0 + 3_000)
    later = dataclasses.replace(later, pods=[*later.pods, modelled.pod(GROUP, c)],
                                leases=[*later.leases, lease(c, T0 + 3_000)])
    freed = control.step(later, revoking.memory, now_ms=T0 + 3_000)
    to_c = {r for doc in freed.configmap_writes if doc.member == "c"
            for r in doc.assigned.sorted()}
    assert set(gave_up.sorted()) <= to_c
