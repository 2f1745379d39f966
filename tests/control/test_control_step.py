"""``control.step`` as tables: what one round decides from its inputs and memory."""

from __future__ import annotations

import dataclasses
import random

from kooper.control import liveness, modelled, restore, state, views
from kooper.control import step as control
from kooper.core import ids, model
from kooper.protocol import codec

W = ids.WorkerId
GROUP = "g"
SETTINGS = model.Settings(model.Protocol.COMPATIBLE, model.Policy.KOOPER, max_delay_ms=60_000)


def member(name: str, owned: model.ConnectorsAndTasks = model.EMPTY, generation: int = -1,
           incarnation: str = "1") -> model.Member:
    return model.Member(W(name), owned, generation, frozenset(model.Protocol), incarnation)


def inputs(members: list[model.Member], *, connectors: dict[str, int] | None = None,
           owners: dict[control.Owner, control.OwnerFacts] | None = None,
           status: dict[str, object] | None = None,
           configmaps: dict[str, views.ConfigMapView] | None = None) -> control.Inputs:
    by_id = {m.id: m for m in members}
    pods, leases = modelled.Members(GROUP).views(by_id)
    return control.Inputs(
        gone_means_stopped=True,
        group=modelled.group(GROUP, SETTINGS, status=status), pods=pods, leases=leases,
        connectors=modelled.connectors(GROUP, connectors if connectors is not None
                                       else {"A": 3}),
        owners=owners or {}, configmaps=configmaps or {})


def settle(step: control.Step, members: list[model.Member]) -> list[model.Member]:
    """Every member applies what the step wrote to it and reports it."""
    written = {w.member: w for w in step.configmap_writes}
    result = []
    for m in members:
        doc = written.get(m.id)
        result.append(m if doc is None else dataclasses.replace(
            m, owned=doc.assigned, generation=doc.generation))
    return result


def run(members: list[model.Member], memory: control.Memory, now_ms: int, **kw: object
        ) -> tuple[control.Step, list[model.Member]]:
    decided = control.step(inputs(members, **kw), memory, now_ms=now_ms)  # type: ignore[arg-type]
    return decided, settle(decided, members)


def test_a_step_deletes_departed_members_then_writes_changed_ones_then_the_status():
    memory = control.Memory()
    first, members = run([member("a"), member("b")], memory, 0)
    assert [w.member for w in first.configmap_writes] == ["a", "b"]
    assert first.deletes == ()
    assert first.status is not None
    second, members = run(members, first.memory, 10)
    assert second.plan is not None  # reports changed: a round, but nothing to write
    assert second.configmap_writes == ()
    idle = control.step(inputs(members), second.memory, now_ms=20)
    assert idle.plan is None  # nothing changed at all: no round
    gone, _ = run([m for m in members if m.id == "a"], second.memory, 30, owners={
        ("ReplicaSet", "b"): control.OwnerFacts(exists=False)})
    assert gone.deletes == (W("b"),)
    kinds = [type(w) for w in gone.writes]
    assert kinds == [control.DeleteConfigMap, *[control.WriteConfigMap] * len(
        gone.configmap_writes), control.WriteStatus]
    assert [e.reason for e in gone.events] == ["MemberDeparted", "RebalanceCompleted"]


def test_owners_are_read_only_for_members_whose_pod_is_gone():
    first, members = run([member("a"), member("b")], control.Memory(), 0)
    assert control.owners_to_read(inputs(members), first.memory) == frozenset()
    only_a = [m for m in members if m.id == "a"]
    assert control.owners_to_read(inputs(only_a), first.memory) == {("ReplicaSet", "b")}


def test_a_known_permanent_departure_skips_the_delay_and_an_unknown_one_waits():
    first, members = run([member("a"), member("b")], control.Memory(), 0)
    only_a = [m for m in members if m.id == "a"]
    waits = control.step(inputs(only_a, owners={
        ("ReplicaSet", "b"): control.OwnerFacts(exists=True)}), first.memory, now_ms=10)
    assert waits.memory.persisted.state.delay is not None
    assert waits.plan is not None
    assert waits.plan.unassigned
    scaled = control.step(inputs(only_a, owners={
        ("ReplicaSet", "b"): control.OwnerFacts(exists=False)}), first.memory, now_ms=10)
    assert scaled.memory.persisted.state.delay is None
    assert scaled.plan is not None
    assert not scaled.plan.unassigned
    unread = control.step(inputs(only_a), first.memory, now_ms=10)
    assert unread.memory.volatile.permanent == {}  # not judged yet: asked again next round


def test_a_restarted_leader_knows_departed_pods_owners_from_the_persisted_state():
    first, members = run([member("a"), member("b")], control.Memory(), 0)
    assert first.status is not None
    persisted = state.encode(first.status.state, owners=first.status.owners)
    assert persisted["owners"] == {"a": "ReplicaSet/a", "b": "ReplicaSet/b"}
    configmaps = {w.member: views.ConfigMapView("default", views.configmap_name(w.member),
                                                GROUP, w.member, "1",
                                                codec.encode_assignment(w))
                  for w in first.configmap_writes}
    group = modelled.group(GROUP, SETTINGS, status={"state": persisted})
    restarted = control.restored(group, configmaps)
    only_a = [m for m in settle(first, members) if m.id == "a"]
    assert control.owners_to_read(inputs(only_a), restarted) == {("ReplicaSet", "b")}
    scaled = control.step(inputs(only_a, owners={
        ("ReplicaSet", "b"): control.OwnerFacts(exists=False)}), restarted, now_ms=10)
    assert scaled.memory.persisted.state.delay is None


def test_a_failed_configmap_write_keeps_the_previous_assignment_and_retries():
    first, members = run([member("a")], control.Memory(), 0)
    members = settle(first, members)
    joined = control.step(inputs([*members, member("b")]), first.memory, now_ms=10)
    assert joined.plan is not None
    assert joined.plan.revoking
    failed = joined.failed(frozenset({W("a")}), retry_ms=500)
    before = first.memory.persisted.state.assignments[W("a")]
    assert failed.memory.persisted.state.assignments[W("a")] == before
    assert failed.memory.volatile.last_key is None  # the next round plans even if nothing changes
    assert failed.wake_at_ms is not None
    assert failed.wake_at_ms <= 10 + 500
    assert failed.status is not None
    assert failed.status.state == failed.memory.persisted.state


def test_restore_keeps_a_resource_only_in_the_newest_configmap_that_assigns_it():
    both = model.ConnectorsAndTasks.of(["A"], ["A-0"])
    old = codec.encode_assignment(state.assignment_message(
        group=GROUP, member="old", plan=model.MemberPlan(both, model.EMPTY, 3),
        protocol=model.Protocol.COMPATIBLE, policy="kooper", delay_ms=0, leader="",
        epochs={}, configs={}, states={}, incarnation="1"))
    new = codec.encode_assignment(state.assignment_message(
        group=GROUP, member="new", plan=model.MemberPlan(both, model.EMPTY, 4),
        protocol=model.Protocol.COMPATIBLE, policy="kooper", delay_ms=0, leader="",
        epochs={}, configs={}, states={}, incarnation="1"))
    restored = restore.restore({}, [("old", old), ("new", new)], group=GROUP).state
    assert restored.assignments[W("new")] == both
    assert restored.assignments[W("old")] == model.EMPTY
    assert restored.generation == 4


def test_ten_thousand_members_joining_and_leaving_under_random_names_leave_no_entry():
    rng = random.Random(10)
    memory = control.Memory()
    caches = control.Caches()
    live: dict[str, model.Member] = {}
    joined = 0
    now = 0
    owners: dict[control.Owner, control.OwnerFacts] = {}
    while joined < 10_000 or live:
        now += 1_000
        for name in rng.sample(sorted(live), k=min(len(live), rng.randint(0, 300))):
            del live[name]  # scaled away: its ReplicaSet is gone
        if joined < 10_000:
            for _ in range(250):
                name = f"w-{rng.getrandbits(48):012x}"
                owned = model.ConnectorsAndTasks.of([], ["A-0"]) if rng.random() < 0.05 \
                    else model.EMPTY  # a few claim work they were never given
                live[name] = member(name, owned)
                joined += 1
        probe = inputs(list(live.values()), connectors={"A": 20})
        owners = {owner: control.OwnerFacts(exists=False)
                  for owner in control.owners_to_read(probe, memory)}
        decided = control.step(dataclasses.replace(probe, owners=owners), memory,
                               now_ms=now, caches=caches)
        memory = decided.memory
        live = {m.id: m for m in settle(decided, list(live.values()))}
    assert memory.persisted.state.assignments == {}
    assert memory.persisted.state.lost == {}
    assert memory.persisted.state.incarnations == {}
    assert memory.persisted.state.assigned_at == {}
    assert memory.persisted.state.revoking == {}
    for part, field in (("volatile", "good_reports"), ("persisted", "given"),
                        ("persisted", "pod_owners"), ("volatile", "permanent"),
                        ("persisted", "configmaps")):
        assert not getattr(getattr(memory, part), field), field
    assert not [e for e in memory.volatile.reported.entries if e[2]]
    assert caches.claims.seen == {}
    assert caches.untrue.seen == {}
    assert caches.members.members == {}
    assert caches.members.matches == {}


def test_the_persisted_lost_sets_use_the_wire_codec_and_survive_dashed_names():
    lost = model.ConnectorsAndTasks.of(["db-1"], ["db-1-0", "a-b-2", "db-10"])
    planner = model.PlanState(generation=3, lost={W("gone"): lost},
                              delay=model.Delay(deadline_ms=5_000))
    document = state.encode(planner)
    assert document["lost"]["gone"] == codec.encode_resources(lost)
    assert document["lost"]["gone"]["tasks"] == {"db-1": [0], "a-b": [2], "db": [10]}
    assert restore.restore(document, [], group=GROUP).state.lost == {W("gone"): lost}
    broken = {**document, "lost": {"gone": {"tasks": {"A": ["x"]}}}}
    assert restore.restore(broken, [], group=GROUP).state.lost == {}


def test_the_members_memo_never_changes_who_is_a_member():
    from kooper.control import snapshot
    from kooper.sim import chaos, runner

    config, scenario = chaos.draw(5108)
    sim = runner.Sim(config, scenario)
    sim.steps = []
    sim.run()
    memo = snapshot.Memo()
    observed: liveness.Observed = {}
    for inputs, memory, now_ms, _ in sim.steps:
        observed = liveness.observe(observed, inputs.leases, now_ms=now_ms)
        kwargs = {"pods": inputs.pods, "leases": inputs.leases,
                  "last_good": memory.volatile.good_reports, "now_ms": now_ms, "observed": observed}
        fast = snapshot.collect_members(inputs.group, memo=memo, **kwargs)
        slow = snapshot.collect_members(inputs.group, **kwargs)
        assert (fast.members, fast.reports, fast.issues, fast.next_expiry_ms, fast.pods) == \
            (slow.members, slow.reports, slow.issues, slow.next_expiry_ms, slow.pods)


def test_a_group_created_again_writes_generations_newer_than_its_members_report():
    """A WorkerGroup deleted and created again under its name: no status, no ConfigMaps
    (they went with the old object), members still running the old group's generation 7.
    A worker ignores a generation not newer than one it accepted, so the new group's
    first documents must be newer than 7, not generation 1."""
    members = [member("a", model.ConnectorsAndTasks.of(["A"], ["A-0"]), generation=7),
               member("b", model.ConnectorsAndTasks.of([], ["A-1", "A-2"]), generation=7)]
    fresh = modelled.group(GROUP, SETTINGS, status=None)
    memory = control.restored(fresh, {}, reported=[m.generation for m in members])
    decided = control.step(inputs(members), memory, now_ms=0)
    assert decided.configmap_writes
    assert all(w.generation > 7 for w in decided.configmap_writes)
    assert control.restored(fresh, {}, reported=[]).persisted.state.generation == 0


def test_a_document_whose_write_was_unanswered_is_rewritten_without_blaming_anyone():
    """``edits``: "edited" and "deleted" are someone else's doing (a Warning Event each);
    "unanswered" is the operator's own write whose answer was lost: written again all
    the same, silently."""
    first, members = run([member("a"), member("b")], control.Memory(), 0)
    members = settle(first, members)
    settled_memory = control.step(inputs(members), first.memory, now_ms=5).memory
    for how, warned in (("edited", True), ("deleted", True), ("unanswered", False)):
        decided = control.step(dataclasses.replace(inputs(members), edits={W("a"): how}),
                               settled_memory, now_ms=10)
        assert [w.member for w in decided.configmap_writes] == ["a"], how
        # ...at a generation above every one issued: its worker may have accepted the
        # document found there, and ignores one that is not newer.
        issued = settled_memory.persisted.state.generation
        assert decided.configmap_writes[0].generation > issued, how
        reasons = {e.reason for e in decided.events}
        assert bool(reasons & {"ConfigMapEdited", "ConfigMapDeleted"}) == warned, how
