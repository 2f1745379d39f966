"""Rehearsing a departure warms the assignor's cache without changing any plan."""

from __future__ import annotations

import dataclasses

from kooper.core import assignor, model
from kooper.shell import warmup


def settled_group(members: int = 4) -> tuple[model.Snapshot, model.PlanState, assignor.Cache]:
    """A group that was assigned everything and whose members all applied it."""
    snap = model.Snapshot(
        connectors={"a": 5, "b": 5, "c": 3},
        members={f"w-{n}": model.Member(id=f"w-{n}", incarnation="i") for n in range(members)},
        settings=model.Settings(max_delay_ms=0),
    )
    cache = assignor.Cache()
    first = assignor.plan(snap, model.PlanState(), now_ms=0, cache=cache)
    snap = dataclasses.replace(snap, members={
        name: dataclasses.replace(report, owned=first.members[name].assigned,
                                  generation=first.members[name].generation)
        for name, report in snap.members.items()})
    acked = assignor.plan(snap, first.state, now_ms=1, cache=cache)
    return snap, acked.state, cache


def test_the_rehearsal_takes_out_the_most_loaded_member_and_needs_two():
    state = model.PlanState(assignments={
        "w-0": model.ConnectorsAndTasks(frozenset(), frozenset({"a-0"})),
        "w-1": model.ConnectorsAndTasks(frozenset({"a"}), frozenset({"a-1", "a-2"})),
        "w-2": model.EMPTY,
    })
    assert warmup.victim(state) == "w-1"
    alone = model.PlanState(assignments={"w-1": state.assignments["w-1"], "w-2": model.EMPTY})
    assert warmup.victim(alone) is None
    snap, _, cache = settled_group()
    assert not warmup.warm(cache, snap, alone, now_ms=2, configured=snap.configured())


def test_a_warmed_cache_has_indexed_every_members_tasks_by_connector():
    snap, state, cache = settled_group()
    assert not any(cache.groups.sets.values())  # No work was ever handed out to a group.
    assert warmup.warm(cache, snap, state, now_ms=2, configured=snap.configured())
    indexed = {task for tasks in cache.groups.sets.values() for task in tasks}
    gone = warmup.victim(state)
    assert gone is not None
    # Everything the others hold: a real departure then only updates what moved.
    assert indexed == snap.configured().tasks - state.assignments[gone].tasks


def test_a_departure_after_the_rehearsal_plans_what_a_fresh_cache_plans():
    snap, state, cache = settled_group(members=5)
    configured = snap.configured()
    assert warmup.warm(cache, snap, state, now_ms=2, configured=configured)
    for gone in ("w-0", warmup.victim(state)):  # Another member, and the rehearsed one.
        left = dataclasses.replace(snap, members={
            name: report for name, report in snap.members.items() if name != gone})
        warmed = assignor.plan(left, state, now_ms=3, configured=configured, cache=cache)
        fresh = assignor.plan(left, state, now_ms=3, configured=configured,
                              cache=assignor.Cache())
        assert warmed.members == fresh.members
        assert warmed.state == fresh.state
        assert gone not in warmed.members
        assert warmed.changed  # Its work moved at once.
