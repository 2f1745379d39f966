"""Planned departures (``control.departures``): a member whose pod was terminating when
it left hands its work over in the next round; one that vanished waits for the delay."""

from __future__ import annotations

import dataclasses

import pytest

from kooper.control import modelled, state, views
from kooper.control import step as control
from kooper.core import ids, model
from kooper.protocol import codec

W = ids.WorkerId
GROUP = "g"


def settings(policy: model.Policy = model.Policy.KOOPER) -> model.Settings:
    return model.Settings(model.Protocol.COMPATIBLE, policy, max_delay_ms=60_000)


def member(name: str, owned: model.ConnectorsAndTasks = model.EMPTY,
           generation: int = -1) -> model.Member:
    return model.Member(W(name), owned, generation, frozenset(model.Protocol), "1")


def inputs(members: list[model.Member], *, policy: model.Policy = model.Policy.KOOPER,
           terminating: tuple[str, ...] = (), pods_only: tuple[str, ...] = ()
           ) -> control.Inputs:
    """``members`` live; ``terminating`` pods carry a deletionTimestamp; ``pods_only``
    names members whose Lease is gone while their (terminating) pod is still there."""
    by_id = {m.id: m for m in members}
    pods = [modelled.pod(GROUP, m) for m in members]
    pods = [dataclasses.replace(p, deleting=p.name in terminating) for p in pods]
    leases = [modelled.lease(m) for m in members if m.id not in pods_only]
    assert by_id.keys() >= set(pods_only)
    return control.Inputs(group=modelled.group(GROUP, settings(policy)), pods=pods,
                          leases=leases, connectors=modelled.connectors(GROUP, {"A": 5}),
                          gone_means_stopped=True)


def converged(policy: model.Policy = model.Policy.KOOPER
              ) -> tuple[control.Memory, list[model.Member]]:
    """Members a, b, c run A's instance and 5 tasks, balanced; the operator saw it."""
    members = [member("a"), member("b"), member("c")]
    memory = control.Memory()
    for now in range(0, 100, 10):
        decided = control.step(inputs(members, policy=policy), memory, now_ms=now)
        memory = decided.memory
        written = {w.member: w for w in decided.configmap_writes}
        members = [m if m.id not in written else dataclasses.replace(
            m, owned=written[m.id].assigned, generation=written[m.id].generation)
            for m in members]
    assert all(m.owned for m in members)
    return memory, members


def handed_to_others(decided: control.Step, gone: str, had: model.ConnectorsAndTasks) -> bool:
    assert decided.plan is not None
    given = model.EMPTY
    for name, plan in decided.plan.members.items():
        assert name != gone
        given = given.union(plan.assigned)
    return set(had.connectors) <= given.connectors and set(had.tasks) <= given.tasks


def test_a_terminating_pod_whose_worker_left_hands_its_work_over_in_the_next_round():
    memory, members = converged()
    b = next(m for m in members if m.id == "b")
    # SIGTERM: the pod is terminating, its worker still holds its Lease: nothing moves.
    sigterm = control.step(inputs(members, terminating=("b",)), memory, now_ms=200)
    assert sigterm.plan is None or not sigterm.plan.newly_assigned
    # The worker left (stopped everything, deleted its Lease); the pod is still there.
    left = control.step(inputs(members, terminating=("b",), pods_only=("b",)),
                        sigterm.memory, now_ms=300)
    assert left.memory.persisted.state.delay is None
    assert left.plan is not None
    assert not left.plan.unassigned
    assert handed_to_others(left, "b", b.owned)
    assert left.deletes == (W("b"),)


def test_a_planned_departure_is_remembered_when_the_pod_is_gone_by_the_next_round():
    memory, members = converged()
    b = next(m for m in members if m.id == "b")
    sigterm = control.step(inputs(members, terminating=("b",)), memory, now_ms=200)
    rest = [m for m in members if m.id != "b"]
    gone = control.step(inputs(rest), sigterm.memory, now_ms=300)
    assert gone.memory.persisted.state.delay is None
    assert handed_to_others(gone, "b", b.owned)
    assert gone.memory.persisted.terminating == frozenset()  # forgotten once handled


def test_a_planned_departure_never_assigns_work_its_member_still_reports_owning():
    memory, members = converged()
    b = next(m for m in members if m.id == "b")
    # Terminating but its Lease still live and reporting b's work: b is a member,
    # so its work stays with it (the barrier); only its departure frees it.
    for now in (200, 210, 220):
        decided = control.step(inputs(members, terminating=("b",)), memory, now_ms=now)
        memory = decided.memory
        if decided.plan is not None:
            assert decided.plan.members[W("b")].assigned == b.owned
            for name, plan in decided.plan.members.items():
                if name != "b":
                    assert not (set(plan.assigned.tasks) & set(b.owned.tasks))


@pytest.mark.parametrize("policy", [model.Policy.KOOPER, model.Policy.KIP415])
def test_a_vanished_pod_is_unplanned_and_waits_for_the_delay(policy: model.Policy):
    memory, members = converged(policy)
    rest = [m for m in members if m.id != "b"]
    gone = control.step(inputs(rest, policy=policy), memory, now_ms=300)
    assert gone.memory.persisted.state.delay is not None
    assert gone.plan is not None
    assert gone.plan.unassigned


def test_a_member_whose_last_report_says_it_left_is_a_planned_departure():
    """Its pod's terminating and gone, its Lease deleted, all within one debounce: the
    round never saw the pod terminate, but the Lease's last version (the watch's DELETED
    event) says that incarnation stopped everything on SIGTERM and left."""
    memory, members = converged()
    b = next(m for m in members if m.id == "b")
    rest = [m for m in members if m.id != "b"]
    last = modelled.lease(dataclasses.replace(b, owned=model.EMPTY))
    assert last.report is not None
    said = dataclasses.replace(last, report=dataclasses.replace(last.report, left=True))
    gone = control.step(dataclasses.replace(inputs(rest), released=[said]), memory,
                        now_ms=300)
    assert gone.memory.persisted.state.delay is None
    assert gone.plan is not None
    assert not gone.plan.unassigned
    assert handed_to_others(gone, "b", b.owned)
    # Another incarnation's word says nothing of this one.
    other = dataclasses.replace(said, report=dataclasses.replace(said.report, incarnation="2"))
    waits = control.step(dataclasses.replace(inputs(rest), released=[other]), memory,
                         now_ms=300)
    assert waits.memory.persisted.state.delay is not None


def test_a_worker_that_left_while_its_pod_stays_is_no_planned_departure():
    """The kubelet restarts its container (a failed liveness probe): SIGTERM, the worker
    leaves saying so, and the same identity comes back in the same pod. Its work waits
    for it, as for any unplanned departure."""
    memory, members = converged()
    b = next(m for m in members if m.id == "b")
    last = modelled.lease(dataclasses.replace(b, owned=model.EMPTY))
    assert last.report is not None
    said = dataclasses.replace(last, report=dataclasses.replace(last.report, left=True))
    gone = control.step(dataclasses.replace(inputs(members, pods_only=("b",)),
                                            released=[said]), memory, now_ms=300)
    assert gone.memory.persisted.state.delay is not None
    assert gone.plan is not None
    assert gone.plan.unassigned


def test_kip415_waits_the_delay_even_for_a_planned_departure():
    memory, members = converged(model.Policy.KIP415)
    kip = model.Policy.KIP415
    sigterm = control.step(inputs(members, policy=kip, terminating=("b",)), memory, now_ms=200)
    left = control.step(inputs(members, policy=kip, terminating=("b",), pods_only=("b",)),
                        sigterm.memory, now_ms=300)
    assert left.memory.persisted.state.delay is not None
    assert left.plan is not None
    assert left.plan.unassigned


def test_a_restarted_operator_that_never_saw_the_pod_terminate_treats_it_as_unplanned():
    memory, members = converged()
    forgetful = memory.replace(terminating=frozenset())
    rest = [m for m in members if m.id != "b"]
    gone = control.step(inputs(rest), forgetful, now_ms=300)
    assert gone.memory.persisted.state.delay is not None


def test_only_a_terminating_pod_of_a_live_member_is_recorded():
    memory, members = converged()
    sigterm = control.step(inputs(members, terminating=("b",)), memory, now_ms=200)
    assert {name for name, _ in sigterm.memory.persisted.terminating} == {"b"}
    back = control.step(inputs(members), sigterm.memory, now_ms=300)  # deletion cancelled?
    assert {name for name, _ in back.memory.persisted.terminating} == {"b"}  # b's pod uid unchanged


def test_a_departure_whose_work_waits_persists_it_before_deleting_the_configmap():
    # An operator that died right after deleting b's ConfigMap left no trace of b's
    # work: the restarted one found it unowned and handed it out at once, long before
    # b's grace ran out. The round's status is now written first.
    memory, members = converged()
    b = next(m for m in members if m.id == "b")
    rest = [m for m in members if m.id != "b"]
    gone = control.step(inputs(rest), memory, now_ms=300)
    kinds = [type(w).__name__ for w in gone.writes]
    assert kinds[:2] == ["WriteStatus", "DeleteConfigMap"]
    assert gone.writes[0] == gone.writes[-1]
    # Die right after the deletion, then restore from what the API holds.
    first = gone.writes[0]
    assert isinstance(first, control.WriteStatus)
    persisted = first.status
    doc = {"state": state.encode(persisted.state, owners=persisted.owners,
                                 member_epoch=persisted.member_epoch,
                                 epoch_floor=persisted.epoch_floor)}
    before = memory.persisted.state  # a's and c's documents are still the converged ones
    configmaps = {}
    for m in rest:
        message = state.assignment_message(
            group=GROUP, member=m.id, plan=model.MemberPlan(
                before.assignments[m.id], model.EMPTY, before.assigned_at[m.id]),
            protocol=model.Protocol.COMPATIBLE, policy="kooper", delay_ms=0, leader="",
            epochs=before.epochs, configs={}, states={}, incarnation="1",
            member_epoch=memory.persisted.member_epochs[m.id][1])
        configmaps[str(m.id)] = views.ConfigMapView(
            namespace=modelled.NAMESPACE, name=views.configmap_name(m.id), group=GROUP,
            member=m.id, resource_version="1", text=codec.encode_assignment(message))
    restored = control.restored(modelled.group(GROUP, settings(), status=doc), configmaps)
    after = control.step(dataclasses.replace(inputs(rest), configmaps=configmaps), restored,
                         now_ms=400)
    assert not handed_to_others(after, "b", b.owned)
    assert after.memory.persisted.state.lost.get(W("b")) == b.owned
