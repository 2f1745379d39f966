"""The pure parts of the shell: parsing, liveness, persisted state, status documents, audit."""

from __future__ import annotations

import dataclasses
import json

import pytest

from kooper.control import (
    connector_status,
    liveness,
    restore,
    selectors,
    snapshot,
    state,
    status,
    views,
)
from kooper.control import events as control_events
from kooper.core import assignor, events, ids, model
from kooper.protocol import codec, messages
from kooper.shell import audit

W = ids.WorkerId


@pytest.mark.parametrize(("text", "ms"), [
    ("300s", 300_000), ("5m", 300_000), ("1m30s", 90_000), ("0s", 0), ("250ms", 250),
    ("1h", 3_600_000), (None, 300_000),
])
def test_the_max_delay_is_read_as_written_and_absent_means_the_default(text, ms):
    spec = {} if text is None else {"scheduledRebalanceMaxDelay": text}
    assert views.parse_max_delay(spec) == (ms, "")
    group = views.parse_group({"metadata": {"name": "g"}, "spec": spec})
    assert (group.settings.max_delay_ms, group.invalid) == (ms, "")


@pytest.mark.parametrize("text", ["bogus", "5x", "0", "100ns", "500us", "", 300])
def test_a_max_delay_kooper_cannot_read_marks_the_group_invalid_instead_of_a_default(text):
    group = views.parse_group({"metadata": {"name": "g"},
                               "spec": {"scheduledRebalanceMaxDelay": text}})
    assert group.invalid.startswith("spec.scheduledRebalanceMaxDelay: ")
    assert "is not a duration" in group.invalid


def test_selector_terms_all_have_to_match():
    selector = selectors.parse_selector({
        "matchLabels": {"app": "w"},
        "matchExpressions": [{"key": "tier", "operator": "In", "values": ["a", "b"]},
                             {"key": "canary", "operator": "DoesNotExist"}],
    })
    assert selector.matches({"app": "w", "tier": "a"})
    assert not selector.matches({"app": "w", "tier": "c"})
    assert not selector.matches({"app": "w", "tier": "a", "canary": "1"})
    assert not selectors.parse_selector({}).matches({"app": "w"})
    assert not selectors.parse_selector({"matchExpressions": [{"key": "a", "operator": "Gt"}]}
                                    ).matches({"a": "1"})


def _lease(renew="2024-01-01T00:00:00.000000Z", duration=10, report=None, member="w-0"):
    report = report if report is not None else codec.encode_report(messages.Report(
        member=member, incarnation="i1", protocols=frozenset({model.Protocol.COMPATIBLE}),
        generation=3, owned=model.ConnectorsAndTasks.of(["A"], ["A-0"])))
    return views.parse_lease({
        "metadata": {"name": f"kooper-{member}", "namespace": "default",
                     "labels": {"kooper.dev/member": member},
                     "annotations": {messages.REPORT_ANNOTATION: report},
                     "ownerReferences": [{"kind": "Pod", "uid": "u1", "name": member}]},
        "spec": {"holderIdentity": f"{member}/i1", "renewTime": renew,
                 "leaseDurationSeconds": duration},
    })


def test_lease_expires_after_duration_plus_skew_from_when_it_was_observed():
    lease = _lease()
    seen = 5_000_000  # our clock, nothing to do with the worker-written renewTime
    assert liveness.lease_live(lease, now_ms=seen + 14_999, default_duration_s=30, skew_s=5,
                               observed_ms=seen)
    assert not liveness.lease_live(lease, now_ms=seen + 15_000, default_duration_s=30,
                                   skew_s=5, observed_ms=seen)


def test_malformed_or_foreign_reports_are_errors_not_exceptions():
    assert _lease(report="{nope").error.startswith("malformed report")
    foreign = codec.encode_report(messages.Report(member="other", incarnation="i1",
                                                  protocols=frozenset({model.Protocol.EAGER}),
                                                  generation=1))
    assert "belongs to" in _lease(report=foreign).error
    assert _lease().report is not None


def test_scale_down_and_missing_owner_are_permanent_but_a_replicaset_pod_is_not():
    assert liveness.permanently_departed(pod_name="w-3", owner_kind="StatefulSet",
                                         owner_name="w", owner_exists=True, replicas=3)
    assert not liveness.permanently_departed(pod_name="w-2", owner_kind="StatefulSet",
                                             owner_name="w", owner_exists=True, replicas=3)
    assert liveness.permanently_departed(pod_name="x-abc", owner_kind="ReplicaSet",
                                         owner_name="x", owner_exists=False, replicas=None)
    assert not liveness.permanently_departed(pod_name="x-abc", owner_kind="ReplicaSet",
                                             owner_name="x", owner_exists=True, replicas=2)
    assert not liveness.permanently_departed(pod_name="lone", owner_kind="", owner_name="",
                                             owner_exists=False, replicas=None)


def test_members_need_a_matching_pod_with_the_leases_uid():
    group = views.parse_group({"metadata": {"name": "wg", "namespace": "default"},
                               "spec": {"selector": {"matchLabels": {"app": "w"}}}})
    pod = views.PodView("default", "w-0", "u1", {"app": "w"}, False, "", "")
    now = views.parse_time_ms("2024-01-01T00:00:01Z")
    found = snapshot.collect_members(group, pods=[pod], leases=[_lease()], last_good={},
                                     now_ms=now)
    assert list(found.members) == ["w-0"]
    assert found.next_expiry_ms == now + 15_000  # observed now (no history given)
    other_uid = views.PodView("default", "w-0", "u2", {"app": "w"}, False, "", "")
    assert not snapshot.collect_members(group, pods=[other_uid], leases=[_lease()],
                                        last_good={}, now_ms=now).members


def test_stopped_connector_keeps_its_instance_and_paused_keeps_its_tasks():
    def conn(name, state):
        return views.parse_connector({"metadata": {"name": name, "namespace": "d"},
                                      "spec": {"workerGroup": "wg", "tasksMax": 3,
                                               "state": state}})
    counts, states = snapshot.wanted([conn("A", "Running"), conn("B", "Paused"),
                                      conn("C", "Stopped")])
    assert counts == {"A": 3, "B": 3, "C": 0}
    assert states == {"B": "paused", "C": "stopped"}  # the Assignment's lowercase states


@pytest.mark.parametrize(("written", "read"), [
    ("Running", "running"), ("Paused", "paused"), ("Stopped", "stopped"),
    # Objects stored under the CRD of an earlier kooper: the same meaning.
    ("running", "running"), ("paused", "paused"), ("stopped", "stopped"),
    # Never admitted: the CRD's default.
    ("PAUSED", "running"), ("exploded", "running"), (None, "running"), (3, "running"),
])
def test_spec_state_is_read_in_either_casing_the_crd_admits(written, read):
    spec = {"workerGroup": "wg"} if written is None else {"workerGroup": "wg", "state": written}
    assert views.parse_connector({"metadata": {"name": "A"}, "spec": spec}).state == read


def _converged_plan():
    members = {W(f"w-{n}"): model.Member(W(f"w-{n}"), incarnation=f"i{n}") for n in range(3)}
    snap = model.Snapshot(connectors={"A": 5}, members=members)
    plan = assignor.plan(snap, model.PlanState(), now_ms=1000)
    return snap, plan


def test_persisted_state_plus_configmaps_restore_the_plan_state():
    snap, plan = _converged_plan()
    configmaps = []
    for member, member_plan in plan.members.items():
        message = state.assignment_message(
            group="wg", member=member, plan=member_plan, protocol=plan.protocol,
            policy="kooper", delay_ms=0, leader="op", epochs=plan.state.epochs, configs={},
            states={}, incarnation=plan.state.incarnations[member])
        configmaps.append((member, codec.encode_assignment(message)))
    lost = model.ConnectorsAndTasks.of(tasks=["B-0"])
    persisted = model.PlanState(
        generation=plan.state.generation, protocol=plan.state.protocol,
        assignments=plan.state.assignments, incarnations=plan.state.incarnations,
        lost={W("gone"): lost}, delay=model.Delay(99_000, (W("w-0"),)),
        epochs={**plan.state.epochs, "B-0": 7},
        backoff=model.RevocationBackoff(revoked_last=False, streak=2, held_until_ms=5_000))
    encoded = json.loads(json.dumps(state.encode(persisted)))
    assert "A-0" not in encoded["epochs"]  # assigned epochs live in the ConfigMaps
    assert encoded["epochs"] == {"B-0": 7}
    restored = restore.restore(encoded, configmaps, group="wg").state
    assert restored.assignments == plan.state.assignments
    assert restored.epochs == persisted.epochs
    assert restored.lost == {W("gone"): lost}
    assert restored.delay == persisted.delay
    assert restored.backoff == persisted.backoff
    assert restored.incarnations == plan.state.incarnations
    again = assignor.plan(snap, restored, now_ms=2000)
    assert not again.revoking
    assert all(again.members[m].assigned == plan.members[m].assigned for m in plan.members)


def test_restore_prefers_configmaps_newer_than_the_status():
    configmaps = [("w-0", codec.encode_assignment(messages.Assignment(
        group="wg", member="w-0", generation=9, protocol=model.Protocol.COMPATIBLE,
        assigned=model.ConnectorsAndTasks.of(tasks=["A-0"]), epochs={"A-0": 4})))]
    old_status = {"generation": 8, "lost": {"gone": {"connectors": [], "tasks": {"A": [0]}}},
                  "epochs": {"A-0": 3}}
    restored = restore.restore(old_status, configmaps, group="wg")
    assert restored.state.generation == 9
    assert restored.state.lost == {}
    assert restored.state.epochs["A-0"] == 4
    assert restored.state.backoff == model.RevocationBackoff()  # a status from before it
    bad = restore.restore({}, [("w-1", "{}")], group="wg")
    assert bad.unreadable == ("w-1",)


@pytest.mark.parametrize("field", ["incarnations", "lost", "epochs"])
@pytest.mark.parametrize("value", ["x", 5, [1], None])
def test_a_status_state_field_of_the_wrong_type_restores_as_if_absent(field, value):
    # status.state is free-form: whoever may write the status subresource can put
    # anything there. A restarted leader reads what it can, as it does an unreadable lost
    # set, instead of failing every round of the group until someone repairs the status.
    configmaps = [("w-0", codec.encode_assignment(messages.Assignment(
        group="wg", member="w-0", generation=3, protocol=model.Protocol.COMPATIBLE,
        assigned=model.ConnectorsAndTasks.of(tasks=["A-0"]), epochs={"A-0": 4},
        incarnation="i1")))]
    restored = restore.restore({"generation": 3, field: value}, configmaps, group="wg").state
    assert restored.assignments == {W("w-0"): model.ConnectorsAndTasks.of(tasks=["A-0"])}
    assert (restored.lost, restored.epochs, restored.incarnations) == (
        {}, {"A-0": 4}, {W("w-0"): "i1"})


def test_failed_writes_keep_the_old_assignment_counted_for_the_barrier():
    previous = model.PlanState(assignments={W("a"): model.ConnectorsAndTasks.of(tasks=["A-0"])},
                               assigned_at={W("a"): 1})
    planned = model.PlanState(generation=2,
                              assignments={W("a"): model.ConnectorsAndTasks.of(tasks=["A-1"])},
                              assigned_at={W("a"): 2})
    merged = state.merge_partial(previous, planned, {W("a")})
    assert merged.assignments[W("a")] == model.ConnectorsAndTasks.of(tasks=["A-0", "A-1"])
    assert merged.assigned_at[W("a")] == 1
    assert state.merge_partial(previous, planned, ()) is planned


def test_merge_patch_deletes_removed_keys_and_leaves_equal_ones_out():
    old = {"a": 1, "b": {"c": 2, "d": 3}, "e": [1]}
    new = {"a": 1, "b": {"c": 2}, "e": [2], "f": None}
    assert status.merge_patch(old, new) == {"b": {"d": None}, "e": [2], "f": None}


def test_conditions_keep_their_transition_time_unless_status_flips():
    before = [{"type": "Ready", "status": "True", "lastTransitionTime": "T0"}]
    kept = status.conditions([status.Condition("Ready", True, "Balanced", "ok")],
                             previous=before, generation=2, now="T1")
    flipped = status.conditions([status.Condition("Ready", False, "WorkUnassigned", "x")],
                                previous=before, generation=2, now="T1")
    assert kept[0]["lastTransitionTime"] == "T0"
    assert flipped[0]["lastTransitionTime"] == "T1"
    assert flipped[0]["observedGeneration"] == 2


def test_group_status_makes_unassigned_work_impossible_to_miss():
    snap = model.Snapshot(connectors={"A": 2}, members={})
    plan = assignor.plan(snap, model.PlanState(), now_ms=0)
    facts = status.GroupFacts(snapshot=snap, plan=plan, now_ms=0, pods_matched=1)
    doc = status.group_status(facts, state={}, generation=1, previous={})
    by_type = {c["type"]: c for c in doc["conditions"]}
    assert doc["unassigned"] == 3
    assert by_type["Ready"]["status"] == "False"
    assert by_type["Degraded"]["reason"] == "WorkUnassigned"
    assert by_type["Degraded"]["message"] == (
        "2 tasks and 1 connector unassigned: the group has no live member")


def _join_that_revokes() -> tuple[model.Snapshot, model.PlanState, model.Plan]:
    # a runs all four tasks of A; b joins with nothing: a is told to stop two of them,
    # which no member is assigned until a acknowledges and the next round hands them on.
    a = model.Member(W("a"), model.ConnectorsAndTasks.of(["A"], ["A-0", "A-1", "A-2", "A-3"]),
                     generation=1, incarnation="a")
    snap = model.Snapshot(connectors={"A": 4},
                          members={W("a"): a, W("b"): model.Member(W("b"), incarnation="b")})
    previous = model.PlanState(generation=1, assignments={W("a"): a.owned},
                               assigned_at={W("a"): 1}, incarnations={W("a"): "a"})
    plan = assignor.plan(snap, previous, now_ms=1_000)
    assert plan.revoking
    assert len(plan.unassigned) == 2
    return snap, previous, plan


def test_work_being_handed_over_is_rebalancing_not_a_degraded_group():
    snap, _, plan = _join_that_revokes()
    assert plan.stranded() == model.EMPTY
    facts = status.GroupFacts(snapshot=snap, plan=plan, now_ms=1_000, pods_matched=2)
    doc = status.group_status(facts, state={}, generation=1, previous={})
    by_type = {c["type"]: c for c in doc["conditions"]}
    assert doc["unassigned"] == 2  # the column still counts it: nobody is assigned it
    assert (by_type["Ready"]["status"], by_type["Ready"]["reason"]) == (
        "False", "RevokingForBalance")
    assert (by_type["Degraded"]["status"], by_type["Degraded"]["reason"]) == (
        "False", "AsExpected")


def test_a_join_that_revokes_posts_no_unassigned_warning():
    snap, previous, plan = _join_that_revokes()
    out = control_events.Recorder(control_events.Reported())
    control_events.round_events(out, previous=previous, plan=plan, snap=snap)
    assert [e.reason for e in out.events] == ["MemberJoined", "RevokingForBalance"]
    assert out.bad_input == []


def test_a_connector_whose_tasks_are_handed_over_is_moving_not_degraded():
    a = views.ConnectorView(namespace="ns", name="A", uid="u", generation=1, group="g",
                            tasks_max=2, config={}, state="running", restart="", status={})

    def conditions(handing: frozenset[str]) -> list[tuple[str, bool, str]]:
        found = connector_status.connector_status(
            a, holders={"A": W("a"), "A-0": W("a")}, owned={"A-1": W("a")}, epochs={},
            group_exists=True, handing=handing)
        return [(c.type, c.status, c.reason) for c in found["conditions"]]

    # A-1 runs on a, which was told to stop it for b and has not acknowledged yet.
    assert conditions(frozenset({"A-1"})) == [
        ("Ready", False, "HandingOver"), ("Degraded", False, "AsExpected")]
    # Unassigned and nobody handing it over: the problem it was before.
    assert conditions(frozenset()) == [
        ("Ready", False, "WorkUnassigned"), ("Degraded", True, "WorkUnassigned")]


def test_work_nobody_hands_over_still_warns():
    snap = model.Snapshot(connectors={"A": 2}, members={})
    plan = assignor.plan(snap, model.PlanState(), now_ms=0)
    out = control_events.Recorder(control_events.Reported())
    control_events.round_events(out, previous=model.PlanState(), plan=plan, snap=snap)
    warned = [e for e in out.events if e.reason == "WorkUnassigned"]
    assert [(e.warning, e.message) for e in warned] == [
        (True, "2 tasks and 1 connector unassigned: no live member")]


def test_group_status_shows_revocations_held_back_by_the_backoff():
    # Three members hold 2 + 1 + 0 tasks of A: balance wants a revocation, but the
    # previous round revoked too, so this one backs off (40 ms) and says so.
    members = {
        W("a"): model.Member(W("a"), model.ConnectorsAndTasks.of(["A"], ["A-0", "A-1"]),
                             generation=1, incarnation="a"),
        W("b"): model.Member(W("b"), model.ConnectorsAndTasks.of(tasks=["A-2"]),
                             generation=1, incarnation="b"),
        W("c"): model.Member(W("c"), incarnation="c"),
    }
    snap = model.Snapshot(connectors={"A": 3}, members=members)
    previous = model.PlanState(
        generation=1,
        assignments={m: members[m].owned for m in (W("a"), W("b"))},
        assigned_at={W("a"): 1, W("b"): 1}, incarnations={W("a"): "a", W("b"): "b"},
        backoff=model.RevocationBackoff(revoked_last=True))
    plan = assignor.plan(snap, previous, now_ms=1_000)
    assert not plan.revoking
    assert plan.next_round_at_ms == 1_040
    facts = status.GroupFacts(snapshot=snap, plan=plan, now_ms=1_000, pods_matched=3)
    doc = status.group_status(facts, state={}, generation=1, previous={})
    assert doc["revocationBackoff"]["remainingSeconds"] == 1
    assert doc["revocationBackoff"]["consecutiveRevokingRounds"] == 1
    by_type = {c["type"]: c for c in doc["conditions"]}
    assert by_type["Rebalancing"]["reason"] == "RevocationsBackingOff"


def test_audit_rows_are_event_log_rows_with_a_change_column():
    snap, plan = _converged_plan()
    rows = list(audit.rows(previous=model.PlanState(), plan=plan, group="d/wg",
                           policy="kooper", run="r", now_ms=5))
    parsed = [events.Event.from_row(row) for row in rows]
    starts = [e for e in parsed if e.event is events.Kind.START]
    assert len(starts) == 6
    assert all(e.epoch == 1 and e.generation == plan.state.generation for e in starts)
    assert {r["change"] for r in rows} == {"assigned", "join", "round"}
    # Next round, one member departs: its resources are stopped as "lost".
    members = {m: v for m, v in snap.members.items() if m != "w-2"}
    later = assignor.plan(model.Snapshot(connectors={"A": 5}, members=members,
                                         settings=model.Settings(max_delay_ms=0)),
                          plan.state, now_ms=2000)
    rows = list(audit.rows(previous=plan.state, plan=later, group="d/wg", policy="kooper",
                           run="r", now_ms=6))
    lost = [r for r in rows if r["change"] == "lost"]
    assert {r["resource"] for r in lost} == set(plan.members[W("w-2")].assigned.sorted())
    assert any(r["change"] == "leave" and r["member"] == "w-2" for r in rows)


def test_a_member_that_departs_while_told_to_stop_work_has_that_work_audited_as_lost():
    # Hard chaos seed 4405 (kip415): the member's assignment was empty, the work it was
    # still stopping was counted lost and opened the group's delay, and no row said so.
    a, b = W("a"), W("b")
    owned = model.ConnectorsAndTasks.of(tasks=["A-0", "A-1"])
    previous = model.PlanState(
        generation=2, assignments={a: model.EMPTY, b: model.EMPTY},
        assigned_at={a: 2, b: 2}, incarnations={a: "a", b: "b"}, revoking={a: owned},
        epochs={"A-0": 1, "A-1": 1})
    members = {b: model.Member(b, model.EMPTY, 2, incarnation="b")}
    settings = model.Settings(policy=model.Policy.KIP415, max_delay_ms=20_000)
    snap = model.Snapshot(connectors={"A": 2}, members=members, settings=settings)
    plan = assignor.plan(snap, previous, now_ms=1_000)
    assert plan.state.lost == {a: owned}
    rows = list(audit.rows(previous=previous, plan=plan, group="d/wg", policy="kip415",
                           run="r", now_ms=1_000, snapshot=snap))
    lost = {r["resource"]: r["until_ms"] for r in rows if r["change"] == "lost"}
    assert lost == {"A-0": 21_000, "A-1": 21_000}


def test_every_document_names_the_incarnation_it_was_planned_for():
    snap, plan = _converged_plan()
    for member, member_plan in plan.members.items():
        message = state.assignment_message(
            group="wg", member=member, plan=member_plan, protocol=plan.protocol,
            policy="kooper", delay_ms=0, leader="op", epochs=plan.state.epochs, configs={},
            states={}, incarnation=plan.state.incarnations[member])
        decoded = codec.decode_assignment(codec.encode_assignment(message))
        assert decoded.incarnation == snap.members[member].incarnation == f"i{member[-1]}"


def test_placement_reports_only_connectors_whose_resources_changed_member():
    from kooper.control import placement

    def cat(connectors, tasks=()):
        return model.ConnectorsAndTasks.of(connectors, tasks)

    where = placement.Placement()
    assert where.update({W("a"): cat(["A"], ["A-0", "my-conn-1"]), W("b"): cat([], ["B-0"])}
                        ) == {"A", "my-conn", "B"}
    assert where.connectors == {"A": "a"}
    assert where.tasks == {"A-0": "a", "my-conn-1": "a", "B-0": "b"}
    same = where.by_member[W("a")]
    assert where.update({W("a"): same, W("b"): cat([], ["B-0"])}) == set()
    # A-0 moves from a to b (b is updated first: the removal from a must not drop it).
    assert where.update({W("b"): cat([], ["B-0", "A-0"]), W("a"): cat(["A"], ["my-conn-1"])}
                        ) == {"A"}
    assert where.tasks["A-0"] == "b"
    # b departs: its resources are nowhere.
    assert where.update({W("a"): cat(["A"], ["my-conn-1"])}) == {"A", "B"}
    assert where.tasks == {"my-conn-1": "a"}


def test_placement_tells_connector_db_1_from_task_1_of_connector_db():
    from kooper.control import placement

    where = placement.Placement()
    both = model.ConnectorsAndTasks.of(["db", "db-1", "a-b"], ["db-1", "a-b-2", "db-1-0"])
    assert where.update({W("a"): both}) == {"db", "db-1", "a-b"}
    assert where.connectors == {"db": "a", "db-1": "a", "a-b": "a"}
    # Only connector db-1's instance moves: db-1's status is refreshed, not db's.
    moved = model.ConnectorsAndTasks.of(["db", "a-b"], ["db-1", "a-b-2", "db-1-0"])
    assert where.update({W("a"): moved, W("b"): model.ConnectorsAndTasks.of(["db-1"], [])}
                        ) == {"db-1"}
    assert where.connectors["db-1"] == "b"
    assert where.tasks["db-1"] == "a"  # task 1 of db stays where it was


def test_state_encoding_reuses_the_last_epochs_only_when_nothing_they_depend_on_changed():
    _, plan = _converged_plan()
    lost = {W("gone"): model.ConnectorsAndTasks.of(tasks=["B-0"])}
    first = dataclasses.replace(plan.state, lost=lost, epochs={**plan.state.epochs, "B-0": 2})
    doc = state.encode(first)
    assert doc["epochs"] == {"B-0": 2}
    # Same epochs object, equal assignments: the same document, built without the scan.
    again = dataclasses.replace(first, generation=first.generation + 1)
    assert state.encode(again, previous=(first, doc)) == {**doc, "generation": again.generation}
    marked = {**doc, "epochs": {"reused": 1}}
    assert state.encode(again, previous=(first, marked))["epochs"] == {"reused": 1}
    # B-0 handed to a member: new epochs and assignments, so they are recomputed.
    member = next(iter(first.assignments))
    moved = dataclasses.replace(
        first, lost={}, epochs={**first.epochs, "B-0": 3},
        assignments={**first.assignments, member: first.assignments[member].union(
            model.ConnectorsAndTasks.of(tasks=["B-0"]))})
    assert state.encode(moved, previous=(first, doc))["epochs"] == {}


def test_only_spec_and_restart_changes_wake_a_group_not_our_own_status_echoes():
    import asyncio

    from kooper.shell import controller, settings

    class Statuses:
        def foreign(self, connector):
            return False  # the status changes below are our own patches coming back

    class Runner:
        pokes = 0
        fencing = False
        statuses = Statuses()

        def poke(self):
            self.pokes += 1

    class Views:
        def group(self, namespace, name):
            return object()

    shell = controller.Shell(settings.Config(identity="t"))
    runner = Runner()
    shell.runners[("ns", "wg")] = runner
    shell.index_views = Views()
    shell.context = object()

    def connector(generation=1, restart="", status=None):
        return views.parse_connector({
            "metadata": {"namespace": "ns", "name": "A", "uid": "u", "generation": generation,
                         "annotations": {"kooper.dev/restart": restart} if restart else {}},
            "spec": {"workerGroup": "wg"}, "status": status or {}})

    seen = [
        (connector(), 1),                                 # first sight
        (connector(status={"running": 3}), 1),            # our own status patch: no round
        (connector(generation=2, status={"running": 3}), 2),  # spec changed
        (connector(generation=2, restart="r1"), 3),       # a restart value
        (connector(generation=2, restart="r1", status={"running": 4}), 3),
    ]
    for view, pokes in seen:
        asyncio.run(shell.connector_seen(view, deleted=False))
        assert runner.pokes == pokes
    asyncio.run(shell.connector_seen(connector(generation=2), deleted=True))
    assert runner.pokes == 4
    shell.group_seen("ns", "wg", deleted=False, uid="g", generation=1)
    assert runner.pokes == 5
    shell.group_seen("ns", "wg", deleted=False, uid="g", generation=1)  # status echo
    assert runner.pokes == 5
    shell.group_seen("ns", "wg", deleted=False, uid="g", generation=2)
    assert runner.pokes == 6


def test_each_operator_process_has_an_identity_of_its_own(monkeypatch):
    """In a container the pid is always 1: a restarted leader container must not find
    its predecessor's Lease naming it."""
    from kooper.shell import settings

    monkeypatch.setattr(settings.os, "getpid", lambda: 1)
    monkeypatch.setattr(settings.socket, "gethostname", lambda: "kooper-abc")
    first, second = settings.default_identity(), settings.default_identity()
    assert first != second
    assert first.startswith("kooper-abc/1-")


def test_the_last_version_of_a_deleted_member_lease_is_kept_until_its_name_comes_back():
    """kopf's indexes drop a deleted Lease; its DELETED event carries the last version,
    whose report may say the worker left (``control.liveness.left``)."""
    from kooper.shell import controller, settings

    shell = controller.Shell(settings.Config(identity="t"))
    shell.index_views = index = controller.IndexViews({})
    last = _lease(report=codec.encode_report(messages.Report(
        member="w-0", incarnation="i1", protocols=frozenset({model.Protocol.COMPATIBLE}),
        generation=3, left=True)))
    shell.lease_seen(_lease(), deleted=False)
    assert list(index.released("default")) == []
    shell.lease_seen(last, deleted=True)
    assert list(index.released("default")) == [last]
    assert list(index.released("other")) == []
    assert liveness.left(index.released("default")) == {"w-0": "i1"}
    shell.lease_seen(_lease(), deleted=False)  # a new incarnation under the name
    assert list(index.released("default")) == []
    for n in range(controller.RELEASED_KEPT + 5):
        index.lease_deleted(_lease(member=f"w-{n}"))
    kept = list(index.released("default"))
    assert len(kept) == controller.RELEASED_KEPT
    assert kept[0].member == "w-5"  # the oldest went first
