"""The assignor's shortcuts for big groups answer exactly what the plain computation does.

Each test runs one shortcut and a plain version of what it replaces (the code before the
shortcut, kept here as the reference) on random inputs, and asks for equal answers.
"""

from __future__ import annotations

import dataclasses
import heapq
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from tests.core.test_assignor_properties import NAMES, Group, operations, policies, run_history

from kooper.core import assignor, balance, ids, model
from kooper.core.assignor import groups as groups_stage
from kooper.core.assignor import holdings as holdings_stage
from kooper.core.assignor import spread, spreadindex

CONNECTORS = ["a", "b", "a-b", "c-1", "", "d"]
TASKS = [ids.task_id(c, n) for c in CONNECTORS for n in range(5)]


def pick_spread_tasks_plain(
    tasks: Iterable[str], count: int, taken: Counter[str] | None = None,
    epochs: Mapping[str, int] | None = None, *, moved_first: bool = True,
) -> list[str]:
    """``balance.pick_spread_tasks`` with every connector in the heap from the start."""
    if count <= 0:
        return []
    by_connector: dict[str, list[str]] = defaultdict(list)
    for task in tasks:
        by_connector[ids.task_connector(task)].append(task)
    names = sorted(by_connector, reverse=True)
    seen = taken if taken is not None else Counter[str]()

    def top(name: str) -> int:
        return -max(epochs.get(task, 0) for task in by_connector[name]) if epochs else 0

    def key(size: int, top: int, picked: int, rank: int) -> tuple[int, int, int, int]:
        return (size, top, picked, rank) if moved_first else (size, picked, top, rank)

    heap = [key(-len(by_connector[name]), top(name), seen[name], rank)
            for rank, name in enumerate(names)]
    heapq.heapify(heap)
    numbers_of: dict[int, list[tuple[int, int]]] = {}
    chosen: list[str] = []
    while len(chosen) < count and heap:
        size, _, _, rank = heapq.heappop(heap)
        name = names[rank]
        numbers = numbers_of.get(rank)
        if numbers is None:
            numbers = numbers_of[rank] = sorted(
                ((epochs.get(task, 0) if epochs else 0), ids.task_number(task))
                for task in by_connector[name])
        chosen.append(ids.task_id(name, numbers.pop()[1]))
        seen[name] += 1
        if numbers:
            heapq.heappush(heap, key(size + 1, -numbers[-1][0], seen[name], rank))
    return chosen


@settings(max_examples=400, deadline=None)
@given(
    tasks=st.lists(st.sampled_from(TASKS), unique=True),
    count=st.integers(-1, 12),
    taken=st.dictionaries(st.sampled_from(CONNECTORS), st.integers(0, 3)),
    epochs=st.none() | st.dictionaries(st.sampled_from(TASKS), st.integers(0, 4)),
    members=st.integers(1, 3),
    moved_first=st.booleans(),
)
def test_pick_spread_tasks_picks_what_the_plain_heap_picks(tasks, count, taken, epochs, members,
                                                          *, moved_first):
    # Several members in a row share ``taken``, as ``revocations.revoke`` does.
    shortcut, plain = Counter(taken), Counter(taken)
    for part in range(members):
        mine = tasks[part::members]
        assert balance.pick_spread_tasks(mine, count, shortcut, epochs,
                                         moved_first=moved_first) == (
            pick_spread_tasks_plain(mine, count, plain, epochs, moved_first=moved_first))
        assert shortcut == plain



@settings(max_examples=300, deadline=None)
@given(policy=policies, ops=operations)
@example(  # found by a random search: fails with the skip on whenever a delay is pending
    policy=model.Policy.KOOPER,
    ops=[("round", None), ("settle", None), ("round", None), ("round", None),
         ("tasks", ("A", 0)), ("round", None), ("round", None), ("bounce", "w3"),
         ("bounce", "w4"), ("time", 8320), ("time", 2817), ("settle", None), ("round", None),
         ("round", None), ("settle", None), ("round", None), ("round", None), ("round", None),
         ("time", 6170), ("settle", None), ("apply", "w2"), ("time", 8925), ("time", 3696),
         ("settle", None), ("join", "w5"), ("leave", "w2"), ("round", None), ("bounce", "w2"),
         ("tasks", ("C", 3)), ("join", "w1"), ("round", None), ("leave", "w1"),
         ("bounce", "w0"), ("round", None), ("join", "w1"), ("leave", "w0"), ("round", None)],
)
def test_skipping_the_spread_question_during_a_delay_changes_no_plan(policy, ops):
    """Also with a cache kept over the history: the shortcut and the indexes together."""
    real = assignor.plan
    cache = assignor.Cache()
    rounds = [0]

    def both(snapshot, previous, *, now_ms, configured=None, cache_=None):
        shortcut = real(snapshot, previous, now_ms=now_ms, configured=configured, cache=cache)
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(spread, "moot", lambda *_: False)
            plain = real(snapshot, previous, now_ms=now_ms, configured=configured)
        assert shortcut == plain, (snapshot, previous, now_ms)
        rounds[0] += 1
        return shortcut

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(assignor, "plan", both)
        group = Group(policy, model.Protocol.COMPATIBLE)
        group.join(NAMES[0])
        run_history(group, ops)
        group.converge()
    assert rounds[0] > 0


def a_round() -> holdings_stage.Round:
    snapshot = model.Snapshot(connectors=dict.fromkeys(CONNECTORS, 5), members={})
    return holdings_stage.Round(snapshot, model.PlanState(), 0, model.EMPTY,
                           assignor.Cache(persistent=False))


@settings(max_examples=300, deadline=None)
@given(
    holdings=st.lists(st.frozensets(st.sampled_from(TASKS)), max_size=5),
    groups=st.sets(st.sampled_from(CONNECTORS)),
    thawed=st.sets(st.integers(0, 4)),
)
def test_counting_groups_once_a_round_counts_what_count_groups_counts(holdings, groups, thawed):
    # Some sets as frozen (remembered for the round), some as edited drafts' plain sets.
    sets = {ids.WorkerId(f"m{i}"): set(tasks) if i in thawed else tasks
            for i, tasks in enumerate(holdings)}
    round_ = a_round()
    for _ in range(2):  # the second time from what the round remembered
        assert groups_stage.count_groups(round_, sets, groups) == balance.count_groups(sets, groups)
        for tasks in sets.values():
            names = [ids.task_connector(task) for task in tasks]
            doubled = Counter(names) if len(set(names)) < len(names) else None
            assert groups_stage.doubled(round_, tasks) == doubled


def test_a_plan_hands_the_next_round_what_it_read_of_each_task_set():
    names = list(map(ids.WorkerId, "xy"))
    snapshot = model.Snapshot(connectors={"a": 4, "b": 2},
                              members={m: model.Member(id=m, incarnation="1") for m in names})
    first = assignor.plan(snapshot, model.PlanState(), now_ms=0)
    settled = dataclasses.replace(snapshot, members={
        m: dataclasses.replace(snapshot.members[m], owned=first.members[m].assigned,
                               generation=first.members[m].generation) for m in names})
    second = assignor.plan(settled, first.state, now_ms=1)
    assert second.state.shapes.keys() == set(names), "the settled round read every set"
    for member, (tasks, doubled) in second.state.shapes.items():
        assert tasks is second.members[member].assigned.tasks
        connectors = [ids.task_connector(task) for task in tasks]
        assert doubled == (Counter(connectors) if len(set(connectors)) < len(connectors)
                           else None)
    assert second.state == dataclasses.replace(second.state, shapes={}), "never compared"
    again = assignor.plan(settled, second.state, now_ms=2)
    assert again == assignor.plan(settled, dataclasses.replace(second.state, shapes={}),
                                  now_ms=2), "plans the same without it"


@settings(max_examples=300, deadline=None)
@given(whole=st.frozensets(st.sampled_from(TASKS)), data=st.data())
def test_a_part_of_a_set_known_undoubled_is_undoubled_without_reading_it(whole, data):
    part = data.draw(st.frozensets(st.sampled_from(sorted(whole))) if whole else st.just(whole))
    round_ = a_round()
    groups_stage.doubled(round_, whole)  # known, as from the previous round's shapes
    names = [ids.task_connector(task) for task in part]
    expected = Counter(names) if len(set(names)) < len(names) else None
    assert groups_stage.doubled_within(round_, set(part), whole) == expected


SPREAD_MEMBERS = [ids.WorkerId(f"w{i}") for i in range(4)]
task_sets = st.dictionaries(st.sampled_from(SPREAD_MEMBERS), st.frozensets(st.sampled_from(TASKS)))


def all_spread_plain(sets: Mapping[ids.WorkerId, frozenset[str]], sizes: Mapping[str, int],
                     members: int) -> bool:
    """Every connector spread, counted from scratch."""
    counts = balance.count_groups(sets, sizes)
    return all(balance.spread_ok(counts.get(g, Counter()), n, members) for g, n in sizes.items())


SIZES = [dict.fromkeys(CONNECTORS, 5), {"a": 5, "b": 3, "d": 1}]


@settings(max_examples=400, deadline=None)
@given(history=st.lists(st.tuples(task_sets, task_sets, st.integers(1, 5),
                                  st.sampled_from(SIZES)), min_size=1, max_size=6))
def test_the_spread_index_answers_what_counting_from_scratch_answers(history):
    """``spreadindex.Groups.all_spread`` remembers the connectors found spread until ``sync``
    changes their counts, and the sizes and member count of the last call that found
    every connector spread; rounds that sync, and ask with and without ``changed``
    sets, answer as a count from scratch does."""
    index = spreadindex.Groups()
    for sets, changed, members, sizes in history:
        index.sync(sets)
        for _ in range(2):  # the second ask may take the remembered answer
            assert index.all_spread({}, sizes, members) == all_spread_plain(sets, sizes, members)
            assert index.all_spread(changed, sizes, members) == all_spread_plain(
                {**sets, **changed}, sizes, members)
