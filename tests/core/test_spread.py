"""Spread under the ``kooper`` policy (issue 11 item 4, KAFKA-17049).

A group is *spread* when each connector's ``n`` tasks sit on the ``k`` members
``n // k`` or ``n // k + 1`` each: over ``min(n, k)`` members, within one. Placement
alone cannot keep that (a connector created in the round a member joins finds every
other member full); balancing restores it with paced revocations, through the barrier.
"""

from __future__ import annotations

import itertools
from collections import Counter
from unittest import mock

import pytest
from hypothesis import example, given, note, settings
from hypothesis import strategies as st
from tests.core.test_assignor_properties import NAMES, Group, check_balanced, check_complete
from tests.core.test_kafka_cases import KOOPER, Cluster, tasks

from kooper.core import balance, model
from kooper.core.balance import target as balance_target
from kooper.core.ids import WorkerId


def per_connector(assigned: dict[WorkerId, model.ConnectorsAndTasks]) -> dict[str, Counter[str]]:
    """Per connector, how many of its tasks each member holds."""
    counts: dict[str, Counter[str]] = {}
    for member, part in assigned.items():
        for task in part.tasks:
            counts.setdefault(balance.task_group(task), Counter())[member] += 1
    return counts


def assert_spread(connectors: dict[str, int], assigned: dict[WorkerId, model.ConnectorsAndTasks]):
    members = len(assigned)
    counts = per_connector(assigned)
    for name, size in connectors.items():
        if not size or not members:
            continue
        held = [counts.get(name, Counter()).get(m, 0) for m in assigned]
        floor = size // members
        assert all(floor <= n <= floor + 1 for n in held), f"{name} not spread: {held}"
        assert sum(1 for n in held if n) == min(size, members), f"{name}: {held}"


# -- the repro ---------------------------------------------------------------------------------


def _new_user_group() -> Cluster:
    """W0 runs A (3 tasks) and B (2); W1..W3 each run a five-task connector of their own."""
    c = Cluster(KOOPER, connectors={"A": 3, "B": 2, "C": 5, "E": 5, "F": 5}, workers=())
    c.add_new_worker("W0", ["A", "B"], tasks("A", 0, 3) + tasks("B", 0, 2))
    c.add_new_worker("W1", ["C"], tasks("C", 0, 5))
    c.add_new_worker("W2", ["E"], tasks("E", 0, 5))
    c.add_new_worker("W3", ["F"], tasks("F", 0, 5))
    return c


def _run_until_quiet(c: Cluster, rounds: int = 12) -> int:
    """Rebalance (waiting out each round's delay) until a round changes nothing; moves made."""
    moved = 0
    for _ in range(rounds):
        c.sleep(c.delay if c.last else 0)
        c.rebalance()
        moved += sum(len(part) for part in c.round.revoked.values())
        if not any(c.round.newly_assigned.values()) and not moved_now(c) and c.delay == 0:
            return moved
    raise AssertionError("the group did not settle")


def moved_now(c: Cluster) -> bool:
    return any(c.round.revoked.values())


def test_a_connector_created_as_a_member_joins_is_not_piled_on_the_newcomer() -> None:
    # Issue 11 item 4: connector D (5 tasks) is created in the round W4 joins. Every
    # other member is full, so placement alone gives W4 all of D, for good.
    c = _new_user_group()
    _run_until_quiet(c)
    c.add_new_connector("D", 5)
    c.add_new_empty_workers("W4")
    _run_until_quiet(c)
    owned = {m: member.owned for m, member in c.members.items()}
    assert per_connector(owned)["D"].most_common(1)[0][1] == 1, owned[WorkerId("W4")]
    assert_spread(c.connectors, owned)
    c.assert_balanced_and_complete_allocation()


def test_restoring_spread_moves_each_task_at_most_once_and_keeps_the_barrier() -> None:
    # The same history: every move is a revocation first (Cluster checks that nothing
    # is assigned while another worker runs it), and no task moves twice.
    c = _new_user_group()
    c.add_new_connector("D", 5)
    c.add_new_empty_workers("W4")
    seen: Counter[str] = Counter()
    for _ in range(12):
        c.sleep(c.delay if c.last else 0)
        c.rebalance()
        for part in c.round.revoked.values():
            seen.update(part.sorted())
    assert seen, "nothing moved"
    assert max(seen.values()) == 1, seen
    # Minimum for this shape: C, E and F keep one task each on their member (4 moves
    # each), A and B one each on W0 (3 moves); the greedy may move a few more.
    assert 15 <= sum(seen.values()) <= 20, sum(seen.values())
    assert_spread(c.connectors, {m: member.owned for m, member in c.members.items()})


# -- random histories -------------------------------------------------------------------------

CONNECTORS = ["A", "B", "C", "D"]

histories = st.lists(
    st.one_of(
        st.tuples(st.just("join"), st.sampled_from(NAMES)),
        st.tuples(st.just("leave"), st.sampled_from(NAMES)),
        st.tuples(st.just("scale_down"), st.sampled_from(NAMES)),
        st.tuples(st.just("create"), st.tuples(st.sampled_from(CONNECTORS), st.integers(1, 9))),
        st.tuples(st.just("resize"), st.tuples(st.sampled_from(CONNECTORS), st.integers(0, 9))),
        st.tuples(st.just("delete"), st.sampled_from(CONNECTORS)),
        st.tuples(st.just("apply"), st.sampled_from(NAMES)),
        st.tuples(st.just("round"), st.none()),
        st.tuples(st.just("round"), st.none()),
        st.tuples(st.just("time"), st.integers(1, 20_000)),
    ),
    max_size=30,
)


def _play(group: Group, ops: list[tuple[str, object]]) -> None:
    for op, arg in ops:
        note(f"{op} {arg}")
        if op == "join" and arg not in group.workers:
            group.join(arg)  # type: ignore[arg-type]
        elif op in ("leave", "scale_down") and arg in group.workers:
            group.leave(arg, permanent=op == "scale_down")  # type: ignore[arg-type]
        elif op in ("create", "resize"):
            name, count = arg  # type: ignore[misc]
            if op == "create" or name in group.connectors:
                group.connectors[name] = count
        elif op == "delete":
            group.connectors.pop(arg, None)  # type: ignore[call-overload]
        elif op == "apply" and arg in group.workers:
            group.apply(arg)  # type: ignore[arg-type]
        elif op == "round":
            group.round()
        elif op == "time":
            group.now += int(arg)  # type: ignore[call-overload]


@settings(max_examples=300, deadline=None)
@given(ops=histories)
@example(ops=[("join", NAMES[1]), ("round", None), ("create", ("C", 7)), ("join", NAMES[2])])
def test_every_history_quiesces_balanced_and_spread_and_then_plans_no_moves(ops) -> None:
    group = Group(model.Policy.KOOPER, model.Protocol.COMPATIBLE)
    group.join(NAMES[0])
    _play(group, ops)
    plan = group.converge(max_rounds=16)
    check_balanced(group, plan)
    check_complete(group, plan)
    assigned = {wid: part.assigned for wid, part in plan.members.items()}
    assert_spread(group.connectors, assigned)
    # Stickiness: a quiescent balanced and spread group plans no moves.
    group.settle()
    again = group.round()
    assert not again.changed
    assert not again.revoking
    assert {wid: part.assigned for wid, part in again.members.items()} == assigned


# The exact search, and with every group counted as big ``balance.paths.from_holdings``.
@pytest.mark.parametrize("budget", [balance_target._FLOW_BUDGET, 0], ids=["exact", "from-holdings"])
@settings(max_examples=200, deadline=None)
@given(
    counts=st.dictionaries(st.sampled_from(["A", "B", "C", "D", "E"]), st.integers(0, 12),
                           min_size=1),
    members=st.integers(1, 7),
    held=st.lists(st.integers(0, 6), max_size=60),
)
def test_the_spread_target_is_balanced_and_spread_from_any_holdings(budget, counts, members,
                                                                     held):
    names = [WorkerId(f"w{i}") for i in range(members)]
    current: dict[str, Counter[WorkerId]] = {}
    for index, owner in enumerate(held):
        group = sorted(counts)[index % len(counts)]
        current.setdefault(group, Counter())[names[owner % members]] += 1
    loads = Counter[WorkerId]()
    for counter in current.values():
        loads.update(counter)
    with mock.patch.object(balance_target, "_FLOW_BUDGET", budget):
        target = balance.spread_target(current, counts, names, loads)
    totals = Counter[WorkerId]()
    for group, size in counts.items():
        row = target.get(group, {})
        assert sum(row.values()) == size
        assert balance.spread_ok(row, size, members)
        totals.update(row)
    per_member = [totals.get(m, 0) for m in names]
    assert max(per_member) - min(per_member) <= 1, per_member


def _fewest_moves_by_search(
    current: dict[str, Counter[WorkerId]], counts: dict[str, int], names: list[WorkerId]
) -> int:
    """The fewest tasks any balanced and spread shape revokes, by trying every shape."""
    k = len(names)
    rows = []
    for group, size in sorted(counts.items()):
        floor, extra = divmod(size, k)
        rows.append([(group, floor, chosen) for chosen in itertools.combinations(names, extra)])
    best: int | None = None
    for shape in itertools.product(*rows):
        totals = Counter[WorkerId]()
        for _group, floor, chosen in shape:
            for m in names:
                totals[m] += floor + (m in chosen)
        loads = [totals[m] for m in names]
        if max(loads) - min(loads) > 1:
            continue
        moves = sum(
            max(0, current.get(group, Counter()).get(m, 0) - floor - (m in chosen))
            for group, floor, chosen in shape
            for m in names
        )
        best = moves if best is None else min(best, moves)
    assert best is not None
    return best


@settings(max_examples=150, deadline=None)
@given(
    counts=st.dictionaries(st.sampled_from(["A", "B", "C"]), st.integers(0, 7), min_size=1),
    members=st.integers(1, 4),
    held=st.lists(st.integers(0, 6), max_size=20),
)
def test_the_spread_target_revokes_the_fewest_tasks_possible(counts, members, held):
    names = [WorkerId(f"w{i}") for i in range(members)]
    current: dict[str, Counter[WorkerId]] = {}
    placed = Counter[str]()
    for index, owner in enumerate(held):
        group = sorted(counts)[index % len(counts)]
        if placed[group] < counts[group]:
            placed[group] += 1
            current.setdefault(group, Counter())[names[owner % members]] += 1
    loads = Counter[WorkerId]()
    for counter in current.values():
        loads.update(counter)
    target = balance.spread_target(current, counts, names, loads)
    moves = sum(
        max(0, n - target.get(group, {}).get(m, 0))
        for group, counter in current.items()
        for m, n in counter.items()
    )
    assert moves == _fewest_moves_by_search(current, counts, names)



# -- a join's revocations ----------------------------------------------------------------------


def test_members_giving_up_one_task_each_pick_different_connectors_outside_a_partial_roll():
    """Ten members each run one task of ten connectors, and ``c9``'s tasks were handed out
    most often. Nine give up one task each for a joiner, which can hold one task of each
    connector: without a partial roll (``moved_first`` false) their picks go to nine
    different connectors; during one, each gives back what moved most, ``c9``'s."""
    from kooper.core import ids

    held = {m: [ids.task_id(f"c{n}", m) for n in range(10)] for m in range(9)}
    epochs = {ids.task_id("c9", m): 9 for m in range(10)}
    for moved_first, expected in ((False, 9), (True, 1)):
        taken = Counter[str]()
        picks = [task for m in range(9) for task in balance.pick_spread_tasks(
            held[m], 1, taken, epochs, moved_first=moved_first)]
        assert len({balance.task_group(task) for task in picks}) == expected, picks
        assert ids.task_id("c9", 0) in picks  # the first member gives up what moved most


def test_the_work_a_roll_moved_goes_back_first_only_while_a_partition_holds_pods_back():
    from kooper.core.assignor import rules

    def snapshot(updated: set[str]) -> model.Snapshot:
        group = {WorkerId(f"w{n}"): model.Member(WorkerId(f"w{n}")) for n in range(3)}
        return model.Snapshot({"a": 3}, group, model.Settings(),
                              updated=frozenset(WorkerId(m) for m in updated))

    assert rules.moved_first(snapshot({"w2"}))  # w0 and w1 below the partition
    assert not rules.moved_first(snapshot({"w0", "w1", "w2"}))  # the roll is over
    assert not rules.moved_first(snapshot(set()))  # no revisions: no roll to undo


@settings(max_examples=500, deadline=None)
@given(held=st.dictionaries(st.sampled_from(NAMES), st.integers(1, 6), max_size=8),
       size=st.integers(0, 30), members=st.integers(0, 10))
def test_spread_judged_from_a_histogram_agrees_with_the_counts(held, size, members):
    """``balance.spread_of`` (what the spread index keeps: how many members hold each
    count) answers what ``balance.spread_ok`` answers from the counts themselves."""
    histogram = Counter(held.values())
    assert balance.spread_of(histogram, size, members) == balance.spread_ok(held, size, members)
    histogram[99] = 0  # a count nobody holds any more is no holder
    assert balance.spread_of(histogram, size, members) == balance.spread_ok(held, size, members)
