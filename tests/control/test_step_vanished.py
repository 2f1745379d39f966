"""A gone pod is not a stopped process (issue 22, part 2).

A pod force-deleted (``kubectl delete pod --force --grace-period=0``, a lost node) is
gone from the API while its process may still run: it can no longer renew, so it fences
itself by its own timing budget. Its member therefore departs no sooner than
``L + clockSkewSeconds`` after the operator last observed its renewal, and the next
incarnation under its name gets nothing of its work before then either.
"""

from __future__ import annotations

import dataclasses

import pytest

from kooper.control import modelled, views
from kooper.control import step as control
from kooper.core import ids, model

W = ids.WorkerId
GROUP = "g"
SETTINGS = model.Settings(model.Protocol.COMPATIBLE, model.Policy.KOOPER, max_delay_ms=0)
LEASE_S, SKEW_S = 30, 5
BUDGET_MS = (LEASE_S + SKEW_S) * 1000
T0 = 1_700_000_000_000  # the operator's clock
SEEN = T0 + 100  # when the operator last observed a's renewal (see ``settled``)


def group() -> views.GroupView:
    return dataclasses.replace(modelled.group(GROUP, SETTINGS), lease_duration_s=LEASE_S,
                               clock_skew_s=SKEW_S)


def member(name: str, incarnation: str = "1") -> model.Member:
    return model.Member(W(name), model.EMPTY, -1, frozenset(model.Protocol), incarnation)


def lease(m: model.Member, renew_ms: int) -> views.LeaseView:
    return dataclasses.replace(modelled.lease(m), renew_ms=renew_ms, duration_s=LEASE_S,
                               holder=f"{m.id}/{m.incarnation}")


def inputs(leases: list[tuple[model.Member, int]], pods: list[model.Member],
           **more: object) -> control.Inputs:
    """Leases of ``leases`` (renewed at the given times), pods of ``pods``."""
    return control.Inputs(
        group=group(), pods=[modelled.pod(GROUP, m) for m in pods],
        leases=[lease(m, renew) for m, renew in leases],
        connectors=modelled.connectors(GROUP, {"A": 4}), **more)  # type: ignore[arg-type]


def settled() -> tuple[control.Memory, model.Member, model.Member]:
    """a and b formed the group at T0 and applied their documents; the operator last
    observed a's renewal at ``SEEN``."""
    a, b = member("a"), member("b")
    first = control.step(inputs([(a, T0), (b, T0)], [a, b]), control.Memory(), now_ms=T0)
    docs = {w.member: w for w in first.configmap_writes}
    a = dataclasses.replace(a, owned=docs["a"].assigned, generation=docs["a"].generation)
    b = dataclasses.replace(b, owned=docs["b"].assigned, generation=docs["b"].generation)
    second = control.step(inputs([(a, T0 + 1), (b, T0 + 1)], [a, b]), first.memory,
                          now_ms=SEEN)
    assert a.owned
    assert b.owned
    return second.memory, a, b


def given(decided: control.Step, *, to: str, incarnation: str = "") -> model.ConnectorsAndTasks:
    """What this round's documents assign to member ``to`` (of ``incarnation``, if set)."""
    result = model.EMPTY
    for doc in decided.configmap_writes:
        if doc.member == to and (not incarnation or doc.incarnation == incarnation):
            result = result.union(doc.assigned)
    return result


def run(memory: control.Memory, times: tuple[int, ...], make: object
        ) -> tuple[control.Memory, list[control.Step]]:
    steps = []
    for now in times:
        decided = control.step(make(now), memory, now_ms=now)  # type: ignore[operator]
        steps.append(decided)
        memory = decided.memory
    return memory, steps


def test_a_vanished_pods_member_keeps_its_work_until_its_fence_budget_ran_out():
    memory, a, b = settled()
    # a's pod is force-deleted at T0 + 1 s; its Lease (owned by the pod) is still there,
    # unchanged, until the garbage collector deletes it at T0 + 5 s.
    times = (T0 + 1_000, T0 + 5_000, T0 + 20_000, SEEN + BUDGET_MS - 1)
    memory, steps = run(memory, times, lambda now: inputs(
        [(a, T0 + 1), (b, now)] if now < T0 + 5_000 else [(b, now)], [b]))
    for decided in steps:
        assert decided.deletes == ()
        assert not given(decided, to="b").intersection(a.owned)
        assert decided.wake_at_ms is not None
        assert decided.wake_at_ms <= SEEN + BUDGET_MS
    gone = control.step(inputs([(b, SEEN + BUDGET_MS)], [b]), memory,
                        now_ms=SEEN + BUDGET_MS)
    assert gone.deletes == (W("a"),)
    assert not a.owned.difference(given(gone, to="b"))  # delay 0: handed over at once


def test_a_pod_and_lease_gone_together_wait_the_budget_from_when_that_was_seen():
    """The Lease's last versions may never have been observed: the worker may have
    renewed right up to the deletion. The budget runs from when the operator saw it gone."""
    memory, a, b = settled()
    noticed = T0 + 3_000
    times = (noticed, SEEN + BUDGET_MS, noticed + BUDGET_MS - 1)
    memory, steps = run(memory, times, lambda now: inputs([(b, now)], [b]))
    for decided in steps:
        assert decided.deletes == ()
        assert not given(decided, to="b").intersection(a.owned)
    gone = control.step(inputs([(b, noticed + BUDGET_MS)], [b]), memory,
                        now_ms=noticed + BUDGET_MS)
    assert gone.deletes == (W("a"),)


def test_the_next_incarnation_under_its_name_gets_nothing_of_its_work_before_then():
    memory, a, b = settled()
    a2 = member("a", incarnation="2")
    # a's pod is force-deleted and re-created under its name; the new process renews
    # the same Lease kooper-a, with a new holder a/2 and its pod's uid.
    noticed = T0 + 1_000
    times = (noticed, T0 + 10_000, SEEN + BUDGET_MS, noticed + BUDGET_MS - 1)
    memory, steps = run(memory, times, lambda now: inputs([(a2, now), (b, now)], [a2, b]))
    for decided in steps:
        assert not given(decided, to="a", incarnation="2").intersection(a.owned)
        assert not given(decided, to="b").intersection(a.owned)
    after = control.step(inputs([(a2, noticed + BUDGET_MS), (b, noticed + BUDGET_MS)],
                                [a2, b]), memory, now_ms=noticed + BUDGET_MS)
    assert given(after, to="a", incarnation="2") == a.owned  # kooper: returning identity


def test_a_known_permanent_departure_still_waits_for_the_fence_budget():
    """Scaled away (its owner is gone): known not to come back, not known to be stopped."""
    memory, a, b = settled()
    gone_owner = {(modelled.OWNER_KIND, "a"): control.OwnerFacts(exists=False)}
    times = (T0 + 1_000, SEEN + BUDGET_MS - 1)
    memory, steps = run(memory, times, lambda now: inputs(
        [(a, T0 + 1), (b, now)], [b], owners=gone_owner))
    for decided in steps:
        assert not given(decided, to="b").intersection(a.owned)
    gone = control.step(inputs([(a, T0 + 1), (b, SEEN + BUDGET_MS)], [b], owners=gone_owner),
                        memory, now_ms=SEEN + BUDGET_MS)
    assert not a.owned.difference(given(gone, to="b"))


def test_a_new_leader_counts_the_budget_from_its_first_step():
    """Observations are not persisted: a new leader that finds a member's pod replaced
    cannot know when the old process last renewed, so it waits a whole budget."""
    memory, a, b = settled()
    fresh = memory.replace(observed={})
    a2 = member("a", incarnation="2")
    start = T0 + 40_000
    times = (start, start + BUDGET_MS - 1)
    memory, steps = run(fresh, times, lambda now: inputs([(a2, now), (b, now)], [a2, b]))
    for decided in steps:
        assert not given(decided, to="a", incarnation="2").intersection(a.owned)
        assert not given(decided, to="b").intersection(a.owned)
    after = control.step(inputs([(a2, start + BUDGET_MS), (b, start + BUDGET_MS)], [a2, b]),
                         memory, now_ms=start + BUDGET_MS)
    assert given(after, to="a", incarnation="2") == a.owned


def test_a_process_restarted_in_the_same_pod_gets_its_work_back_at_once():
    """The kubelet restarts a container only after it exited: the same pod (same uid)
    with a new incarnation proves the old process stopped."""
    memory, a, b = settled()
    a2 = member("a", incarnation="2")
    same_pod = dataclasses.replace(modelled.pod(GROUP, a2), uid=modelled.pod(GROUP, a).uid)
    renewed = dataclasses.replace(lease(a2, T0 + 1_000), pod_uid=same_pod.uid)
    decided = control.step(dataclasses.replace(
        inputs([(b, T0 + 1_000)], [b]), pods=[same_pod, modelled.pod(GROUP, b)],
        leases=[renewed, lease(b, T0 + 1_000)]), memory, now_ms=T0 + 1_000)
    assert given(decided, to="a", incarnation="2") == a.owned


def terminating(m: model.Member) -> views.PodView:
    return dataclasses.replace(modelled.pod(GROUP, m), deleting=True)


@pytest.mark.parametrize("last", ["unseen", "owning nothing"])
def test_a_worker_that_left_while_its_pod_was_stopping_departs_at_once(last):
    """``Worker.leave`` deletes the Lease after stopping everything; the pod goes later.
    (A worker that predates ``Report.left`` says no more than that: its last report owns
    nothing, or the operator did not see the Lease's last version.)"""
    memory, a, b = settled()
    released = [] if last == "unseen" else [last_version(a, left=False)]
    decided = control.step(dataclasses.replace(
        inputs([(b, T0 + 1_000)], [b], released=released),
        pods=[terminating(a), modelled.pod(GROUP, b)]), memory, now_ms=T0 + 1_000)
    assert decided.deletes == (W("a"),)
    assert not a.owned.difference(given(decided, to="b"))


def test_a_lease_deleted_while_its_worker_still_stops_its_work_moves_none_of_it():
    """The pod is terminating and its worker still stops what it ran (a flush, a commit)
    when someone deletes its Lease: the last version still owns that work, so the pod
    stopping proves nothing yet. Found on the local plane: the work ran on two pods for
    1.3 s when a stopping pod counted as a stopped process."""
    memory, a, b = settled()
    pods = [terminating(a), modelled.pod(GROUP, b)]
    deleted = [last_version(a, left=False, owned=a.owned)]
    memory, steps = run(memory, (T0 + 1_000, T0 + 2_000), lambda now: dataclasses.replace(
        inputs([(b, now)], [b], released=deleted), pods=pods))
    for decided in steps:
        assert decided.deletes == ()
        assert not given(decided, to="b").intersection(a.owned)
    # Its next renewal creates the Lease again; then it leaves, saying so.
    back = control.step(dataclasses.replace(
        inputs([(a, T0 + 2_500), (b, T0 + 2_500)], [b]), pods=pods), memory,
        now_ms=T0 + 2_500)
    assert back.deletes == ()
    assert not given(back, to="b").intersection(a.owned)
    gone = control.step(dataclasses.replace(
        inputs([(b, T0 + 3_000)], [b], released=[last_version(a, left=True)]), pods=pods),
        back.memory, now_ms=T0 + 3_000)
    assert gone.deletes == (W("a"),)
    assert not a.owned.difference(given(gone, to="b"))


def test_a_lease_someone_else_deleted_moves_none_of_the_work_of_the_worker_running_on():
    """``kubectl delete lease``: the worker does not know and runs on; its next renewal
    creates the Lease again. Found on the local plane: the work ran on two pods for
    0.6 s when such a Lease counted as the worker's own leave."""
    memory, a, b = settled()
    times = (T0 + 1_000, T0 + 3_000)
    memory, steps = run(memory, times, lambda now: inputs([(b, now)], [a, b]))
    for decided in steps:
        assert decided.deletes == ()
        assert not given(decided, to="b").intersection(a.owned)
    back = control.step(inputs([(a, T0 + 4_000), (b, T0 + 4_000)], [a, b]), memory,
                        now_ms=T0 + 4_000)
    assert back.deletes == ()
    assert not given(back, to="b").intersection(a.owned)
    assert not back.memory.volatile.vanished  # a member again, holding its work


def test_a_lease_deleted_for_good_while_its_pod_runs_departs_when_the_budget_ran_out():
    """A worker that cannot renew fences itself by the budget: its work moves then."""
    memory, a, b = settled()
    noticed = T0 + 1_000
    memory, steps = run(memory, (noticed, noticed + BUDGET_MS - 1),
                        lambda now: inputs([(b, now)], [a, b]))
    for decided in steps:
        assert not given(decided, to="b").intersection(a.owned)
    gone = control.step(inputs([(b, noticed + BUDGET_MS)], [a, b]), memory,
                        now_ms=noticed + BUDGET_MS)
    assert gone.deletes == (W("a"),)
    assert not a.owned.difference(given(gone, to="b"))


def test_a_worker_that_said_it_left_while_its_pod_runs_departs_at_once():
    """A container stopped without its pod (a failed liveness probe): SIGTERM, the
    worker leaves, the kubelet restarts the container later."""
    memory, a, b = settled()
    decided = control.step(inputs([(b, T0 + 1_000)], [a, b], released=[
        last_version(a, left=True)]), memory, now_ms=T0 + 1_000)
    assert decided.deletes == (W("a"),)
    assert not a.owned.difference(given(decided, to="b"))


def test_a_runner_that_models_its_processes_departs_a_vanished_member_at_once():
    """The simulator's crash stops the process with its pod (``Inputs.gone_means_stopped``)."""
    memory, a, b = settled()
    decided = control.step(inputs([(b, T0 + 1_000)], [b], gone_means_stopped=True), memory,
                           now_ms=T0 + 1_000)
    assert decided.deletes == (W("a"),)
    assert not a.owned.difference(given(decided, to="b"))


def last_version(m: model.Member, *, left: bool, owned: model.ConnectorsAndTasks = model.EMPTY,
                 incarnation: str | None = None) -> views.LeaseView:
    """The last version of ``m``'s deleted Lease (the watch's DELETED event), whose report
    says it ``left`` (or not), owning ``owned``, written by ``incarnation``."""
    found = lease(m, T0 + 900)
    assert found.report is not None
    report = dataclasses.replace(found.report, owned=owned, left=left,
                                 incarnation=incarnation or m.incarnation)
    return dataclasses.replace(found, report=report)


def test_a_worker_that_said_it_left_departs_at_once_even_when_its_pod_went_with_its_lease():
    """The worker wrote its last report, deleted its Lease and exited within one
    debounce: the round sees both gone. The Lease's last version, which the DELETED event
    carried, says that incarnation stopped everything and left."""
    memory, a, b = settled()
    decided = control.step(inputs([(b, T0 + 1_000)], [b], released=[
        last_version(a, left=True)]), memory, now_ms=T0 + 1_000)
    assert decided.deletes == (W("a"),)
    assert not a.owned.difference(given(decided, to="b"))


def test_a_member_kept_as_vanished_departs_when_its_lease_goes_saying_it_left():
    """The pod's DELETED event came before the Lease's: kept for the budget, then the
    Lease's last version says the worker left."""
    memory, a, b = settled()
    kept = control.step(inputs([(a, T0 + 1), (b, T0 + 1_000)], [b]), memory, now_ms=T0 + 1_000)
    assert kept.deletes == ()
    decided = control.step(inputs([(b, T0 + 1_100)], [b], released=[
        last_version(a, left=True)]), kept.memory, now_ms=T0 + 1_100)
    assert decided.deletes == (W("a"),)
    assert not a.owned.difference(given(decided, to="b"))


def test_a_last_version_that_does_not_say_so_proves_nothing():
    """A force-deleted pod's Lease, collected after it, carries a report owning work; one
    of another incarnation, or one still owning something, is no word of this process."""
    memory, a, b = settled()
    for last in (last_version(a, left=False, owned=a.owned), last_version(a, left=False),
                 last_version(a, left=True, incarnation="2"),
                 last_version(a, left=True, owned=a.owned)):
        decided = control.step(inputs([(b, T0 + 1_000)], [b], released=[last]), memory,
                               now_ms=T0 + 1_000)
        assert decided.deletes == ()
        assert not given(decided, to="b").intersection(a.owned)
