"""Membership epochs, as ``control.step`` tables (issue 12)."""

from __future__ import annotations

import dataclasses

import pytest

from kooper.control import modelled, state, views
from kooper.control import step as control
from kooper.core import assignor, ids, model
from kooper.protocol import codec, messages

W = ids.WorkerId
GROUP = "g"
SETTINGS = model.Settings(model.Protocol.COMPATIBLE, model.Policy.KOOPER, max_delay_ms=0)


def member(name: str, incarnation: str = "1") -> model.Member:
    return model.Member(W(name), model.EMPTY, -1, frozenset(model.Protocol), incarnation)


def inputs(members: list[model.Member], epochs: dict[str, int] | None = None,
           status: dict[str, object] | None = None,
           configmaps: dict[str, views.ConfigMapView] | None = None) -> control.Inputs:
    """Members reporting (fenced ones say so in their report, with the epoch they fenced in)."""
    leases = [modelled.lease(m, (epochs or {}).get(m.id, 0)) for m in members]
    return control.Inputs(
        gone_means_stopped=True,
        group=modelled.group(GROUP, SETTINGS, status=status),
        pods=[modelled.pod(GROUP, m) for m in members], leases=leases,
        connectors=modelled.connectors(GROUP, {"A": 4}), configmaps=configmaps or {})


def applied(step: control.Step, members: list[model.Member]) -> list[model.Member]:
    written = {w.member: w for w in step.configmap_writes}
    return [m if m.id not in written else dataclasses.replace(
        m, owned=written[m.id].assigned, generation=written[m.id].generation) for m in members]


def epochs_written(step: control.Step) -> dict[str, int]:
    return {w.member: w.member_epoch for w in step.configmap_writes}


def test_every_member_gets_its_own_epoch_and_keeps_it_while_it_stays():
    first = control.step(inputs([member("a"), member("b")]), control.Memory(), now_ms=0)
    assert epochs_written(first) == {"a": 1, "b": 2}
    members = applied(first, [member("a"), member("b")])
    second = control.step(inputs([*members, member("c")]), first.memory, now_ms=10)
    written = epochs_written(second)
    assert written["c"] == 3
    assert {written[m] for m in written if m != "c"} <= {1, 2}
    assert second.memory.persisted.member_epochs[W("a")] == ("1", 1, 0)


def test_a_departure_retires_the_epoch_and_a_return_gets_a_new_one():
    first = control.step(inputs([member("a"), member("b")]), control.Memory(), now_ms=0)
    members = applied(first, [member("a"), member("b")])
    gone = control.step(inputs(members[:1]), first.memory, now_ms=10)
    assert gone.deletes == (W("b"),)
    assert W("b") not in gone.memory.persisted.member_epochs
    back = control.step(inputs([members[0], member("b")]), gone.memory, now_ms=20)
    assert epochs_written(back)["b"] == 3  # never 2 again


def test_a_restarted_process_gets_a_new_epoch():
    first = control.step(inputs([member("a")]), control.Memory(), now_ms=0)
    again = control.step(inputs([member("a", incarnation="2")]), first.memory, now_ms=10)
    assert epochs_written(again) == {"a": 2}


def test_a_member_that_fenced_itself_in_its_epoch_gets_a_new_one_once():
    first = control.step(inputs([member("a"), member("b")]), control.Memory(), now_ms=0)
    members = applied(first, [member("a"), member("b")])
    settled = control.step(inputs(members, {"a": 1, "b": 2}), first.memory, now_ms=10)
    fenced = [members[0], dataclasses.replace(members[1], owned=model.EMPTY, fenced=True)]
    renewed = control.step(inputs(fenced, {"a": 1, "b": 2}), settled.memory, now_ms=20)
    assert epochs_written(renewed)["b"] == 3
    # Still fenced (it has not applied epoch 3 yet): no further epoch.
    later = control.step(inputs([fenced[0], dataclasses.replace(fenced[1], generation=0)],
                                {"a": 1, "b": 2}), renewed.memory, now_ms=30)
    assert "b" not in epochs_written(later)
    assert later.memory.persisted.member_epochs[W("b")][1] == 3


def test_a_member_that_fenced_before_it_saw_any_epoch_gets_one_issued_for_its_rejoin():
    # It fenced with no epoch to retire (its report says epoch 0), so only its fence
    # count tells the operator that epoch 2 may have been retired on the worker's side.
    first = control.step(inputs([member("a"), member("b")]), control.Memory(), now_ms=0)
    members = applied(first, [member("a"), member("b")])
    settled = control.step(inputs(members, {"a": 1, "b": 2}), first.memory, now_ms=10)
    rejoined = [members[0], dataclasses.replace(member("b"), fenced=True, rejoins=1)]
    renewed = control.step(inputs(rejoined, {"a": 1}), settled.memory, now_ms=20)
    written = {w.member: w for w in renewed.configmap_writes}
    assert (written["b"].member_epoch, written["b"].rejoins) == (3, 1)
    later = control.step(inputs([rejoined[0], dataclasses.replace(rejoined[1], generation=0)],
                                {"a": 1}), renewed.memory, now_ms=30)
    assert "b" not in epochs_written(later)
    assert later.memory.persisted.member_epochs[W("b")] == ("1", 3, 1)


def test_epochs_survive_an_operator_restart_and_stay_above_any_issued():
    first = control.step(inputs([member("a"), member("b")]), control.Memory(), now_ms=0)
    members = applied(first, [member("a"), member("b")])
    gone = control.step(inputs(members[:1]), first.memory, now_ms=10)
    assert gone.status is not None
    persisted = state.encode(gone.status.state, owners=gone.status.owners,
                             member_epoch=gone.status.member_epoch)
    assert persisted["memberEpoch"] == 2
    configmaps = {w.member: views.ConfigMapView(
        namespace=modelled.NAMESPACE, name=views.configmap_name(w.member), group=GROUP,
        member=w.member, resource_version="1", text=codec.encode_assignment(w))
        for w in first.configmap_writes if w.member == "a"}
    group = modelled.group(GROUP, SETTINGS, status={"state": persisted})
    memory = control.restored(group, configmaps)
    assert memory.persisted.member_epochs == {W("a"): ("1", 1, 0)}
    assert memory.persisted.issued.member_epoch == 2
    back = control.step(inputs([members[0], member("b")], status={"state": persisted},
                               configmaps=configmaps), memory, now_ms=20)
    assert epochs_written(back)["b"] == 3
    assert "a" not in epochs_written(back) or epochs_written(back)["a"] == 1


def test_a_worker_reporting_a_larger_epoch_than_persisted_still_gets_a_larger_one():
    memory = control.Memory()
    decided = control.step(inputs([member("a")], {"a": 7}), memory, now_ms=0)
    assert epochs_written(decided) == {"a": 8}


def test_the_assignment_document_carries_the_epoch():
    decided = control.step(inputs([member("a")]), control.Memory(), now_ms=0)
    text = codec.encode_assignment(decided.configmap_writes[0])
    assert codec.decode_assignment(text).member_epoch == 1
    assert isinstance(decided.configmap_writes[0], messages.Assignment)


def configmaps_of(*steps: control.Step) -> dict[str, views.ConfigMapView]:
    """The ConfigMaps these steps' writes leave (later steps overwrite, deletes remove)."""
    found: dict[str, views.ConfigMapView] = {}
    for decided in steps:
        for gone in decided.deletes:
            found.pop(gone, None)
        for w in decided.configmap_writes:
            found[w.member] = views.ConfigMapView(
                namespace=modelled.NAMESPACE, name=views.configmap_name(w.member), group=GROUP,
                member=w.member, resource_version="1", text=codec.encode_assignment(w))
    return found


def persisted(status: control.GroupStatus) -> dict[str, object]:
    return {"state": state.encode(status.state, owners=status.owners,
                                  member_epoch=status.member_epoch,
                                  epoch_floor=status.epoch_floor)}


def test_epochs_read_only_from_configmaps_are_persisted_before_any_configmap_is_deleted():
    # a and b settle; c joins and is given work at new epochs; the operator dies before
    # that round's status write, restarts (the epochs are in c's ConfigMap only), and c
    # departs: the round that deletes c's ConfigMap must first persist those epochs, or
    # a second death right after the deletion would issue them again.
    a, b, c = member("a"), member("b"), member("c")
    first = control.step(inputs([a, b]), control.Memory(), now_ms=0)
    a, b = applied(first, [a, b])
    settled = control.step(inputs([a, b]), first.memory, now_ms=10)
    assert settled.status is not None
    joined = control.step(inputs([a, b, c]), settled.memory, now_ms=20)  # a and b revoke
    assert joined.status is not None
    a, b, c = applied(joined, [a, b, c])
    given_step = control.step(inputs([a, b, c]), joined.memory, now_ms=25)
    given = next(w for w in given_step.configmap_writes if w.member == "c")
    assert given.epochs
    assert max(given.epochs.values()) > joined.status.epoch_floor
    status = persisted(joined.status)  # the round giving c work died before its status
    configmaps = configmaps_of(first, joined, given_step)
    memory = control.restored(modelled.group(GROUP, SETTINGS, status=status), configmaps)
    departed = control.step(inputs([a, b], status=status, configmaps=configmaps), memory,
                            now_ms=30)
    assert departed.deletes == (W("c"),)
    writes = departed.writes
    assert isinstance(writes[0], control.WriteStatus)
    assert writes[0].status.epoch_floor >= max(given.epochs.values())
    assert isinstance(writes[1], control.DeleteConfigMap)
    # The operator dies again right after the deletion: the next leader still issues
    # every one of c's resources a larger epoch than c had.
    status = persisted(writes[0].status)
    configmaps = configmaps_of(first, joined, given_step)
    del configmaps["c"]
    memory = control.restored(modelled.group(GROUP, SETTINGS, status=status), configmaps)
    again = control.step(inputs([a, b], status=status, configmaps=configmaps), memory,
                         now_ms=40)
    issued = {r: e for w in again.configmap_writes for r, e in w.epochs.items()}
    for resource, epoch in given.epochs.items():
        assert issued[resource] > epoch, resource
    # With nothing unpersisted, a round writes its status last only.
    calm = control.step(inputs([a, b]), settled.memory, now_ms=50)
    assert calm.epochs_first is None


def test_a_restart_after_an_eager_round_died_mid_write_finishes_the_rebalance():
    # Eager: a round revoking everything wrote one member's document and died before the
    # other's and before the status. The documents look like a finished (unbalanced)
    # assignment; the restored leader must go on with the stop-the-world round.
    eager = model.Settings(model.Protocol.EAGER, model.Policy.KOOPER, max_delay_ms=0)

    def eager_inputs(members: list[model.Member], **kw: object) -> control.Inputs:
        plain = inputs(members, **kw)  # type: ignore[arg-type]
        return dataclasses.replace(plain, group=modelled.group(
            GROUP, eager, status=kw.get("status")))  # type: ignore[arg-type]

    a = member("a")
    only = control.step(eager_inputs([a]), control.Memory(), now_ms=0)
    (a,) = applied(only, [a])
    settled = control.step(eager_inputs([a]), only.memory, now_ms=10)
    assert settled.status is not None
    b = member("b")
    revoking = control.step(eager_inputs([a, b]), settled.memory, now_ms=20)
    assert revoking.plan is not None
    assert revoking.plan.state.eager_revoking
    status = persisted(settled.status)
    configmaps = configmaps_of(only, dataclasses.replace(revoking, configmap_writes=tuple(
        w for w in revoking.configmap_writes if w.member == "b")))  # only b's was written
    memory = control.restored(modelled.group(GROUP, eager, status=status), configmaps)
    b = dataclasses.replace(b, generation=configmaps_doc(configmaps, "b").generation)
    after = control.step(eager_inputs([a, b], status=status, configmaps=configmaps), memory,
                         now_ms=30)
    assert after.plan is not None
    assert after.plan.members[W("a")].revoked == a.owned  # the stop-the-world goes on


def configmaps_doc(configmaps: dict[str, views.ConfigMapView], name: str) -> messages.Assignment:
    return codec.decode_assignment(configmaps[name].text)


@pytest.mark.parametrize("documented", [True, False])
def test_a_leader_that_forgot_the_assignments_never_keeps_work_at_an_epoch_issued_to_another(
        documented: bool):
    # KIP-415's new leader adopts what each member reports. b's document (read at the
    # restore) assigns it nothing; it only listed A-1 as revoked, after b claimed A-1
    # while nobody held it. a ran A-1 at its epoch, stopped it, and the operator died.
    # Keeping A-1 with b at a's epoch would start one task twice at one epoch (hard
    # chaos seed 58615): it restarts in place at a new epoch instead. The same when b
    # has no ConfigMap at all (seeds 662 and 4058: a forged claim in a join report):
    # a member the restored leader found no document for was given nothing.
    kip415 = model.Settings(model.Protocol.COMPATIBLE, model.Policy.KIP415, max_delay_ms=0)
    a = member("a")
    first = control.step(inputs([a]), control.Memory(), now_ms=0)
    (a,) = applied(first, [a])
    issued = first.configmap_writes[0].epochs["A-1"]
    b_doc = messages.Assignment(
        group=GROUP, member="b", generation=2, protocol=model.Protocol.COMPATIBLE,
        assigned=model.EMPTY, revoked=model.ConnectorsAndTasks(frozenset(), frozenset({"A-1"})),
        incarnation="1", member_epoch=2)
    a_doc = dataclasses.replace(first.configmap_writes[0], generation=2,
                                assigned=a.owned.difference(b_doc.revoked),
                                revoked=b_doc.revoked)
    configmaps = {doc.member: views.ConfigMapView(
        namespace=modelled.NAMESPACE, name=views.configmap_name(doc.member), group=GROUP,
        member=doc.member, resource_version="1", text=codec.encode_assignment(doc))
        for doc in (a_doc, b_doc) if documented or doc is a_doc}
    group = modelled.group(GROUP, kip415)
    memory = control.restored(group, configmaps)
    memory = memory.replace(state=assignor.forget(memory.persisted.state))
    a = dataclasses.replace(a, owned=a_doc.assigned, generation=2)
    b = dataclasses.replace(member("b"), owned=b_doc.revoked, generation=2)
    plain = inputs([a, b], {"a": 1, "b": 2}, configmaps=configmaps)
    after = control.step(dataclasses.replace(plain, group=group), memory, now_ms=10)
    written = {w.member: w for w in after.configmap_writes}
    holder = next(w for w in written.values() if "A-1" in w.assigned.tasks)
    assert holder.epochs["A-1"] > issued
    # What a's document did assign stays at its epoch: nothing else restarts.
    kept = [r for r in a_doc.assigned.tasks if r in written.get(W("a"), a_doc).assigned.tasks]
    assert all(written.get(W("a"), a_doc).epochs.get(r) == issued for r in kept)


def test_a_restored_leader_hands_out_every_epoch_above_any_ever_issued():
    # Seed 99265 of the leader families: an older term handed a resource a larger epoch
    # in a document that a later one revoked, and its status never landed; the restore
    # sees only the ConfigMap still assigning the resource at its old epoch, and the
    # persisted floor (the largest epoch ever issued). Moving it must go above the floor.
    a, b = member("a"), member("b")
    first = control.step(inputs([a, b]), control.Memory(), now_ms=0)
    a, b = applied(first, [a, b])
    settled = control.step(inputs([a, b]), first.memory, now_ms=10)
    assert settled.status is not None
    status = persisted(settled.status)
    held = {r: e for w in first.configmap_writes if w.member == "a" for r, e in w.epochs.items()}
    assert held
    assert max(held.values()) < 10
    status["state"]["epochFloor"] = 10  # type: ignore[index]
    configmaps = configmaps_of(first)
    memory = control.restored(modelled.group(GROUP, SETTINGS, status=status), configmaps)
    moved = control.step(inputs([b], status=status, configmaps=configmaps), memory, now_ms=20)
    issued = {r: e for w in moved.configmap_writes if w.member == "b"
              for r, e in w.epochs.items() if r in held}
    assert issued.keys() == held.keys()
    assert min(issued.values()) > 10
