"""Rules of ``plan`` that the KIP-415 tables do not exercise, one test per rule."""

from __future__ import annotations

import dataclasses

from kooper.core import assignor, ids, model

W = ids.WorkerId
TWO = {"A": 2, "B": 2}


def members(*names: str, **overrides: model.Member) -> dict[ids.WorkerId, model.Member]:
    made = {W(n): model.Member(W(n), incarnation=f"{n}-1") for n in names}
    made.update({W(k): v for k, v in overrides.items()})
    return made


def settle(snapshot: model.Snapshot, *, now_ms: int = 0) -> model.PlanState:
    """Run rounds, members acknowledging each, until the group converges."""
    state = model.PlanState()
    for _ in range(10):
        result = assignor.plan(snapshot, state, now_ms=now_ms)
        state = result.state
        acked = {
            member: dataclasses.replace(
                snapshot.members[member], owned=p.assigned, generation=p.generation
            )
            for member, p in result.members.items()
        }
        snapshot = model.Snapshot(snapshot.connectors, acked, snapshot.settings)
        if not result.revoking and not result.unassigned:
            return state
    raise AssertionError("did not converge")


def settled_group(policy: model.Policy, delay_ms: int = 60_000):
    settings = model.Settings(policy=policy, max_delay_ms=delay_ms)
    snapshot = model.Snapshot(TWO, members("w1", "w2"), settings)
    state = settle(snapshot)
    return settings, state


def reports(state: model.PlanState, **fenced: bool) -> dict[ids.WorkerId, model.Member]:
    """Every member reports its assignment at its generation; fenced ones own nothing."""
    return {
        member: model.Member(
            member,
            owned=model.EMPTY if fenced.get(member) else assigned,
            generation=state.assigned_at[member],
            incarnation=state.incarnations[member],
            fenced=bool(fenced.get(member)),
        )
        for member, assigned in state.assignments.items()
    }


def test_a_member_fenced_at_its_current_generation_gets_a_newer_document_with_its_work():
    settings, state = settled_group(model.Policy.KOOPER)
    own = state.assignments[W("w2")]
    result = assignor.plan(
        model.Snapshot(TWO, reports(state, w2=True), settings), state, now_ms=1_000
    )
    assert W("w2") in result.changed
    assert result.members[W("w2")].generation > state.assigned_at[W("w2")]
    assert result.members[W("w2")].assigned == own  # returning identity: at once
    assert W("w1") not in result.changed
    assert result.delay_ms == 0


def test_under_kip415_a_fenced_members_work_is_lost_and_waits_for_the_delay():
    settings, state = settled_group(model.Policy.KIP415)
    own = state.assignments[W("w2")]
    result = assignor.plan(
        model.Snapshot(TWO, reports(state, w2=True), settings), state, now_ms=1_000
    )
    assert result.delay_ms == 60_000
    assert result.members[W("w2")].assigned == model.EMPTY
    assert result.unassigned == own
    assert W("w2") in result.changed  # it is told where it stands, at a newer generation


def test_a_fence_already_answered_by_a_newer_document_is_not_answered_again():
    settings, state = settled_group(model.Policy.KOOPER)
    first = assignor.plan(
        model.Snapshot(TWO, reports(state, w2=True), settings), state, now_ms=1_000
    )
    # w2 has not applied the newer document yet: it still reports fenced at the old one.
    old = reports(state, w2=True)
    again = assignor.plan(model.Snapshot(TWO, old, settings), first.state, now_ms=2_000)
    assert again.changed == frozenset()
    assert again.members[W("w2")].assigned == first.members[W("w2")].assigned


def test_a_restart_gives_the_restarted_resources_new_epochs_on_their_own_members():
    settings, state = settled_group(model.Policy.KOOPER)
    holder = next(m for m, a in state.assignments.items() if "A-0" in a)
    restarts = frozenset({"A", "A-0", "A-1"})
    result = assignor.plan(
        model.Snapshot(TWO, reports(state), settings, restarts=restarts), state, now_ms=1_000
    )
    assert {m: p.assigned for m, p in result.members.items()} == state.assignments
    assert all(not p.revoked for p in result.members.values())
    for resource in restarts:
        assert result.state.epochs[resource] == state.epochs[resource] + 1
    for resource in ("B", "B-0", "B-1"):
        assert result.state.epochs[resource] == state.epochs[resource]
    assert holder in result.changed
    holders_of_a = {m for m, a in state.assignments.items() if a.intersection(
        model.ConnectorsAndTasks.of(["A"], ["A-0", "A-1"]))}
    assert result.changed == frozenset(holders_of_a)
    assert result.state.generation == state.generation + 1


def test_without_restarts_a_settled_round_changes_nothing():
    settings, state = settled_group(model.Policy.KOOPER)
    result = assignor.plan(model.Snapshot(TWO, reports(state), settings), state, now_ms=1_000)
    assert result.changed == frozenset()
    assert result.state.epochs == state.epochs
    assert result.state.generation == state.generation


def test_a_delay_starting_rewrites_only_the_members_whose_work_changed():
    settings = model.Settings(policy=model.Policy.KIP415, max_delay_ms=60_000)
    snapshot = model.Snapshot(TWO, members("w1", "w2", "w3"), settings)
    state = settle(snapshot)
    left = {m: r for m, r in reports(state).items() if m != W("w3")}
    result = assignor.plan(model.Snapshot(TWO, left, settings), state, now_ms=1_000)
    assert result.delay_ms == 60_000
    assert result.changed == frozenset()  # w3's work waits; w1 and w2 keep theirs
    assert result.next_round_at_ms == 61_000


def test_kip415_work_a_returning_member_still_reports_waits_for_the_delay_after_it_lets_go():
    # Hard chaos seed 16071: w2, cut off, was declared departed and its work lost;
    # its Lease came back still carrying a report from before (owning that work). The
    # round revoked it from w2 and, once w2 let go, handed it out as free work before
    # the delay ran out. It stays lost, for the candidates at the deadline.
    settings, state = settled_group(model.Policy.KIP415)
    w1, w2 = W("w1"), W("w2")
    held = state.assignments[w2]
    now = reports(state)
    gone = assignor.plan(model.Snapshot(TWO, {w1: now[w1]}, settings), state, now_ms=1_000)
    assert gone.state.lost == {w2: held}
    stale = now[w2]  # its report from before it was cut off: owning its old work
    back = assignor.plan(model.Snapshot(TWO, now, settings), gone.state, now_ms=2_000)
    assert back.members[w2].revoked == held
    assert back.state.lost == {w2: held}
    let_go = dataclasses.replace(stale, owned=model.EMPTY,
                                 generation=back.members[w2].generation)
    members_now = {w1: now[w1], w2: let_go}
    waiting = assignor.plan(model.Snapshot(TWO, members_now, settings), back.state,
                            now_ms=3_000)
    assert held.tasks.isdisjoint(waiting.members[w1].assigned.tasks)
    assert waiting.state.lost == {w2: held}
    due = assignor.plan(model.Snapshot(TWO, members_now, settings), waiting.state,
                        now_ms=61_000)
    placed = due.members[w1].assigned.union(due.members[w2].assigned)
    assert held.tasks <= placed.tasks


def test_kip415_lost_work_its_returned_member_still_holds_is_not_granted_at_the_deadline():
    # Hard chaos seeds 28203 and 38952: the deadline came while the returned member was
    # still stopping its old work; granting it to a candidate then started it next to
    # the old copy.
    settings, state = settled_group(model.Policy.KIP415)
    w1, w2, w3 = W("w1"), W("w2"), W("w3")
    held = state.assignments[w2]
    now = reports(state)
    gone = assignor.plan(model.Snapshot(TWO, {w1: now[w1]}, settings), state, now_ms=1_000)
    fresh = model.Member(w3, incarnation="w3-1")
    joined = assignor.plan(model.Snapshot(TWO, {w1: now[w1], w3: fresh}, settings),
                           gone.state, now_ms=1_500)
    everyone = {**now, w3: fresh}
    back = assignor.plan(model.Snapshot(TWO, everyone, settings), joined.state, now_ms=2_000)
    assert back.members[w2].revoked == held
    due = assignor.plan(model.Snapshot(TWO, everyone, settings), back.state, now_ms=61_000)
    for other in (w1, w3):
        assert held.tasks.isdisjoint(due.members[other].assigned.tasks)
        assert held.connectors.isdisjoint(due.members[other].assigned.connectors)
