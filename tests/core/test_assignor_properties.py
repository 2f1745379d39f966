"""Hypothesis properties of ``plan`` over random histories of a group.

The harness keeps what each member *really* runs, separately from what it
reports, and lets members apply their latest assignment at random moments: so
reports lag behind ConfigMaps the way they do in a real cluster. The safety
property is checked on the truth: no resource ever runs on two members at once.
"""

from __future__ import annotations

import dataclasses
from collections import Counter

from hypothesis import example, given, note
from hypothesis import strategies as st

from kooper.core import assignor, balance, model
from kooper.core.ids import WorkerId

NAMES = [WorkerId(f"w{i}") for i in range(6)]
CONNECTORS = ["A", "B", "C", "D"]
DELAY = 10_000


@dataclasses.dataclass
class Worker:
    incarnation: int
    protocols: frozenset[model.Protocol]
    running: set[str] = dataclasses.field(default_factory=set)
    generation: int = -1
    doc: model.MemberPlan | None = None  # the latest ConfigMap content, not yet applied maybe


class Group:
    def __init__(self, policy: model.Policy, protocol: model.Protocol) -> None:
        self.settings = model.Settings(protocol=protocol, policy=policy, max_delay_ms=DELAY)
        self.connectors: dict[str, int] = {"A": 3, "B": 2}
        self.workers: dict[WorkerId, Worker] = {}
        self.state = model.PlanState()
        self.now = 0
        self.incarnations = 0
        self.permanent: set[WorkerId] = set()
        self.last_plan: model.Plan | None = None

    # -- the truth ---------------------------------------------------------------

    def check_no_overlap(self) -> None:
        seen: dict[str, WorkerId] = {}
        for wid, worker in self.workers.items():
            for resource in worker.running:
                assert resource not in seen, f"{resource} runs on {seen[resource]} and {wid}"
                seen[resource] = wid

    def apply(self, wid: WorkerId) -> None:
        """The member reads its ConfigMap: stop what it may not run, then start the rest."""
        worker = self.workers[wid]
        if worker.doc is None or worker.doc.generation <= worker.generation:
            return
        allowed = set(worker.doc.assigned.connectors | worker.doc.assigned.tasks)
        worker.running &= allowed
        self.check_no_overlap()
        worker.running |= allowed
        worker.generation = worker.doc.generation
        self.check_no_overlap()

    # -- membership and config ---------------------------------------------------------

    def join(self, wid: WorkerId, eager_only: bool = False) -> None:
        self.incarnations += 1
        protocols = (
            frozenset({model.Protocol.EAGER}) if eager_only else frozenset(model.Protocol)
        )
        self.workers[wid] = Worker(self.incarnations, protocols)
        self.permanent.discard(wid)

    def leave(self, wid: WorkerId, permanent: bool = False) -> None:
        del self.workers[wid]  # the process is gone: it runs nothing any more
        if permanent:
            self.permanent.add(wid)

    # -- rounds -----------------------------------------------------------------------

    def snapshot(self) -> model.Snapshot:
        return model.Snapshot(
            connectors=dict(self.connectors),
            members={
                wid: model.Member(
                    id=wid,
                    owned=model.ConnectorsAndTasks.of(
                        (r for r in w.running if "-" not in r), (r for r in w.running if "-" in r)
                    ),
                    generation=w.generation,
                    protocols=w.protocols,
                    incarnation=str(w.incarnation),
                )
                for wid, w in self.workers.items()
            },
            settings=self.settings,
            departed_permanently=frozenset(self.permanent),
        )

    def round(self) -> model.Plan:
        snapshot = self.snapshot()
        plan = assignor.plan(snapshot, self.state, now_ms=self.now)
        check_barrier(snapshot, self.state, plan)
        self.state = plan.state
        for wid, part in plan.members.items():
            if wid in plan.changed or self.workers[wid].doc is None:
                self.workers[wid].doc = part
        self.last_plan = plan
        return plan

    def settle(self) -> None:
        for wid in list(self.workers):
            self.apply(wid)

    def converge(self, max_rounds: int = 8) -> model.Plan:
        """No more changes: members apply every assignment, time passes the delay."""
        plan = self.round()
        for _ in range(max_rounds):
            self.settle()
            if plan.next_round_at_ms is not None:
                self.now = max(self.now, plan.next_round_at_ms)
            plan = self.round()
            if not plan.changed and not plan.revoking and plan.next_round_at_ms is None:
                return plan
        raise AssertionError(f"no convergence within {max_rounds} rounds: {plan}")


def check_barrier(snapshot: model.Snapshot, previous: model.PlanState, plan: model.Plan) -> None:
    """Nobody is assigned a resource another live member reports owning or may still run."""
    owner: dict[str, WorkerId] = {}
    for wid, part in plan.members.items():
        for resource in (*part.assigned.connectors, *part.assigned.tasks):
            assert resource not in owner, f"{resource} assigned to {owner[resource]} and {wid}"
            owner[resource] = wid
    for wid, member in snapshot.members.items():
        for resource in (*member.owned.connectors, *member.owned.tasks):
            holder = owner.get(resource)
            assert holder in (None, wid), f"{resource} assigned to {holder}, {wid} still runs it"


def check_balanced(group: Group, plan: model.Plan) -> None:
    parts = plan.members.values()
    if not parts:
        return
    # Both policies balance connectors and tasks each on their own, as Kafka's current
    # assignor does (kip415 places lost work as one pool, and rebalances it after).
    connectors = [len(p.assigned.connectors) for p in parts]
    tasks = [len(p.assigned.tasks) for p in parts]
    assert max(connectors) - min(connectors) <= 1, connectors
    assert max(tasks) - min(tasks) <= 1, tasks


def check_complete(group: Group, plan: model.Plan) -> None:
    if group.workers:
        assert not plan.unassigned, plan.unassigned.sorted()


# -- strategies --------------------------------------------------------------------------

operations = st.lists(
    st.one_of(
        st.tuples(st.just("join"), st.sampled_from(NAMES)),
        st.tuples(st.just("leave"), st.sampled_from(NAMES)),
        st.tuples(st.just("scale_down"), st.sampled_from(NAMES)),
        st.tuples(st.just("bounce"), st.sampled_from(NAMES)),
        st.tuples(st.just("apply"), st.sampled_from(NAMES)),
        st.tuples(st.just("apply"), st.sampled_from(NAMES)),
        st.tuples(st.just("settle"), st.none()),
        st.tuples(st.just("round"), st.none()),
        st.tuples(st.just("round"), st.none()),
        st.tuples(st.just("round"), st.none()),
        st.tuples(st.just("time"), st.integers(min_value=1, max_value=DELAY)),
        st.tuples(st.just("tasks"), st.tuples(st.sampled_from(CONNECTORS), st.integers(0, 6))),
        st.tuples(st.just("remove"), st.sampled_from(CONNECTORS)),
        st.tuples(st.just("leader"), st.none()),
    ),
    max_size=40,
)
policies = st.sampled_from(list(model.Policy))


def run_history(group: Group, ops: list[tuple[str, object]], *, eager_joins: bool = False) -> None:
    for op, arg in ops:
        note(f"{op} {arg}")
        if op == "join" and arg not in group.workers:
            group.join(arg, eager_only=eager_joins and arg == NAMES[-1])  # type: ignore[arg-type]
        elif op in ("leave", "scale_down") and arg in group.workers:
            group.leave(arg, permanent=op == "scale_down")  # type: ignore[arg-type]
        elif op == "bounce" and arg in group.workers:
            group.leave(arg)  # type: ignore[arg-type]
            group.join(arg)  # type: ignore[arg-type]
        elif op == "apply" and arg in group.workers:
            group.apply(arg)  # type: ignore[arg-type]
        elif op == "settle":
            group.settle()
        elif op == "round":
            group.round()
        elif op == "time":
            group.now += int(arg)  # type: ignore[call-overload]
        elif op == "tasks":
            name, count = arg  # type: ignore[misc]
            group.connectors[name] = count
        elif op == "remove":
            group.connectors.pop(arg, None)  # type: ignore[call-overload]
        elif (
            op == "leader"
            and group.settings.policy is model.Policy.KIP415
            and all(w.doc is None or w.generation >= w.doc.generation
                    for w in group.workers.values())
        ):
            # A KIP-415 leader change (the kooper policy persists its state instead).
            group.state = assignor.forget(group.state)


@given(policy=policies, ops=operations)
def test_no_resource_ever_runs_on_two_members_and_the_group_converges_balanced(policy, ops):
    group = Group(policy, model.Protocol.COMPATIBLE)
    group.join(NAMES[0])
    run_history(group, ops)
    plan = group.converge()
    check_balanced(group, plan)
    check_complete(group, plan)


@given(policy=policies, ops=operations)
def test_eager_protocol_is_safe_and_converges(policy, ops):
    group = Group(policy, model.Protocol.EAGER)
    group.join(NAMES[0])
    run_history(group, ops)
    plan = group.converge()
    check_complete(group, plan)
    assert plan.protocol is model.Protocol.EAGER


@given(policy=policies, ops=operations)
def test_an_eager_only_member_downgrades_the_group_without_double_ownership(policy, ops):
    group = Group(policy, model.Protocol.COMPATIBLE)
    group.join(NAMES[0])
    run_history(group, ops, eager_joins=True)
    plan = group.converge()
    check_complete(group, plan)
    eager_present = any(not w.protocols >= {model.Protocol.COMPATIBLE}
                        for w in group.workers.values())
    assert plan.protocol is (model.Protocol.EAGER if eager_present else model.Protocol.COMPATIBLE)


@given(policy=policies, ops=operations)
def test_a_converged_group_is_sticky(policy, ops):
    group = Group(policy, model.Protocol.COMPATIBLE)
    group.join(NAMES[0])
    run_history(group, ops)
    group.converge()
    group.settle()
    before = {wid: part.assigned for wid, part in group.round().members.items()}
    group.settle()
    again = group.round()
    assert not again.changed
    assert not again.newly_assigned
    assert {wid: part.assigned for wid, part in again.members.items()} == before


@given(
    policy=policies,
    members=st.integers(min_value=1, max_value=5),
    tasks=st.dictionaries(st.sampled_from(CONNECTORS), st.integers(0, 9), min_size=1),
)
def test_a_join_moves_no_more_than_balance_requires(policy, members, tasks):
    group = Group(policy, model.Protocol.COMPATIBLE)
    group.connectors = dict(tasks)
    for wid in NAMES[:members]:
        group.join(wid)
    before = group.converge()
    group.settle()
    joiner = NAMES[members]
    group.join(joiner)
    moved = 0
    plan = group.round()
    for _ in range(4):
        moved += sum(len(part.revoked) for part in plan.members.values())
        group.settle()
        plan = group.round()
    final = plan.members[joiner].assigned
    if policy is model.Policy.KIP415:
        # The group was balanced: only the newcomer's share needs to move, nothing else.
        assert moved == len(final)
        return
    # kooper also keeps every connector spread, which a join can make cost a few more
    # moves: exactly as many as the fewest-moves balanced and spread shape needs.
    holdings = {wid: part.assigned.tasks for wid, part in before.members.items()}
    holdings[joiner] = frozenset()
    counts = balance.count_groups(holdings, tasks)
    shape = balance.spread_target(counts, tasks, sorted(holdings),
                                  {m: len(t) for m, t in holdings.items()})
    needed = sum(
        max(0, n - shape[g].get(m, 0)) for g, counter in counts.items() for m, n in counter.items()
    )
    assert moved == len(final.connectors) + needed


@given(
    members=st.integers(min_value=2, max_value=6),
    existing=st.integers(min_value=0, max_value=12),
    new_tasks=st.integers(min_value=1, max_value=6),
)
def test_a_new_connectors_tasks_are_spread_before_anyone_gets_a_second(
    members, existing, new_tasks
):
    group = Group(model.Policy.KOOPER, model.Protocol.COMPATIBLE)
    group.connectors = {"A": existing}
    for wid in NAMES[:members]:
        group.join(wid)
    group.converge()
    group.settle()
    group.connectors["B"] = new_tasks
    plan = group.converge()
    per_member = Counter(
        wid for wid, part in plan.members.items() for task in part.assigned.tasks
        if task.startswith("B-")
    )
    counts = [per_member.get(wid, 0) for wid in plan.members]
    assert max(counts) - min(counts) <= 1, counts


@given(policy=policies, ops=operations)
@example(policy=model.Policy.KIP415, ops=[("join", "w2"), ("round", None), ("leave", "w0")])
@example(policy=model.Policy.KOOPER,
         ops=[("round", None), ("leave", "w0"), ("round", None), ("leave", "w1"), ("time", 1)])
def test_lost_work_is_assigned_once_each_deadline_passes(policy, ops):
    group = Group(policy, model.Protocol.COMPATIBLE)
    group.join(NAMES[0])
    group.join(NAMES[1])
    run_history(group, ops)
    # kooper gives each unplanned departure its own grace: one deadline per departure
    # (kip415 has one for the group). Each passes in turn, and then none is left.
    for _ in range(len(NAMES) + 1):
        plan = group.round()
        if plan.next_round_at_ms is None:
            break
        assert plan.next_round_at_ms > group.now, "a deadline already due would wake forever"
        group.now = plan.next_round_at_ms
        group.settle()
    plan = group.round()
    assert plan.next_round_at_ms is None
    # At the deadline lost work is placed, unless members are still handing work over.
    # (kip415 places it as one pool, as the KIP's tables do; the next round may then
    # revoke for per-kind balance: what it revokes is in transit, not lost.)
    if group.workers and not plan.revoking:
        group.settle()
        after = group.round()
        moving = model.EMPTY
        for part in after.members.values():
            moving = moving.union(part.revoked)
        assert after.unassigned.difference(moving) == model.EMPTY, after.unassigned


def test_revocation_counts_keep_the_heaviest_at_hi():
    loads = {WorkerId("a"): 5, WorkerId("b"): 5, WorkerId("c"): 5, WorkerId("d"): 0}
    assert balance.revocation_counts(loads, 15) == {"a": 1, "b": 1, "c": 1}


def test_free_tasks_go_to_members_without_that_connector_first():
    """KAFKA-17049: the least-loaded member must not collect a connector's tasks."""
    holdings = {WorkerId("w0"): {"A-0"}, WorkerId("w1"): {"B-0"}, WorkerId("w2"): {"B-1"}}
    given_ = balance.allocate(
        ["A-1", "A-2"],
        {member: len(tasks) for member, tasks in holdings.items()},
        total=5,
        group_of=balance.task_group,
        group_counts=balance.count_groups(holdings, ["A"]),
    )
    assert given_ == {"w1": ["A-1"], "w2": ["A-2"]}
