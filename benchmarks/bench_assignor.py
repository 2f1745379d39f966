"""Assignor at scale: 1,000 members x 100,000 tasks (1,000 connectors x 100 tasks).

Rounds timed: a member leaves (delay scheduled), the delay expires (lost work
placed), a member joins (revocations for balance), and the join's second round
(revoked work assigned). Prints ms per round and moves versus the minimum balance
needs. Without a cache (what one ``plan`` call costs on its own): cold = first call,
warm = median of repeats. With an ``assignor.Cache`` that saw the round before (what
the simulator pays each round): median over ``--repeat`` replays of the sequence.
``--fastest``: the fastest repeat instead of the median (on a shared machine others'
load only adds time, so the fastest is nearest what the code itself costs).

    .venv/bin/python benchmarks/bench_assignor.py [--members 1000 --connectors 1000 --tasks 100]
"""

from __future__ import annotations

import argparse
import cProfile
import dataclasses
import pstats
import statistics
import time

from kooper.core import assignor, model
from kooper.core.ids import WorkerId


def settle(snapshot: model.Snapshot, plan: model.Plan) -> model.Snapshot:
    members = {
        wid: dataclasses.replace(
            member, owned=plan.members[wid].assigned, generation=plan.members[wid].generation
        )
        for wid, member in snapshot.members.items()
    }
    return dataclasses.replace(snapshot, members=members)


SUMMARY = statistics.median
"""How repeats are summarised (``--fastest``: ``min``)."""


def timed(snapshot, state, now, configured, repeat):
    start = time.perf_counter()
    plan = assignor.plan(snapshot, state, now_ms=now, configured=configured)
    cold = (time.perf_counter() - start) * 1000
    warm = []
    for _ in range(repeat):
        start = time.perf_counter()
        assignor.plan(snapshot, state, now_ms=now, configured=configured)
        warm.append((time.perf_counter() - start) * 1000)
    return plan, cold, SUMMARY(warm) if warm else cold


def replay_cached(sequence, configured, repeat):
    """Per round after the first, the median ms with a cache that saw the round before.

    One unrecorded pass first: indexes a long-lived cache builds once (who holds which
    connector's tasks, who is assigned what) are then in place, as in a simulator run.
    """
    samples = [[] for _ in sequence[1:]]
    cache = assignor.Cache()
    for index in range(max(1, repeat) + 1):
        snapshot, state, now = sequence[0]
        assignor.plan(snapshot, state, now_ms=now, configured=configured, cache=cache)
        for step, (snapshot, state, now) in enumerate(sequence[1:]):
            start = time.perf_counter()
            assignor.plan(snapshot, state, now_ms=now, configured=configured, cache=cache)
            if index:
                samples[step].append((time.perf_counter() - start) * 1000)
    return [SUMMARY(sample) for sample in samples]


def moves(plan: model.Plan) -> int:
    return sum(len(p.revoked) for p in plan.members.values())


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--members", type=int, default=1000)
    parser.add_argument("--connectors", type=int, default=1000)
    parser.add_argument("--tasks", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--policy", choices=[p.value for p in model.Policy], default="kooper",
                        help="the group's policy (default kooper)")
    parser.add_argument("--profile", action="store_true", help="print where the time goes")
    parser.add_argument("--fastest", action="store_true",
                        help="the fastest repeat of each round, not the median")
    args = parser.parse_args()
    global SUMMARY
    SUMMARY = min if args.fastest else statistics.median
    names = [WorkerId(f"worker-{i}") for i in range(args.members)]
    connectors = {f"conn{i:04d}": args.tasks for i in range(args.connectors)}
    snapshot = model.Snapshot(
        connectors=connectors,
        members={w: model.Member(id=w, incarnation="1") for w in names},
        settings=model.Settings(policy=model.Policy(args.policy)),
    )
    configured = snapshot.configured()
    print(f"assignor: {args.members} members, {len(configured.tasks)} tasks, "
          f"{len(configured.connectors)} connectors (policy {args.policy}, protocol compatible)")
    plan = assignor.plan(snapshot, model.PlanState(), now_ms=0, configured=configured)
    snapshot = settle(snapshot, plan)
    state = plan.state
    rows = []

    # 1. a member leaves: its work is lost, a delay is scheduled.
    gone = names[len(names) // 2]
    left = dataclasses.replace(
        snapshot, members={w: m for w, m in snapshot.members.items() if w != gone}
    )
    lost = len(state.assignments[gone])
    sequence = [(snapshot, state, 0)]  # the settled group: what the cache saw last
    sequence.append((left, state, 1_000))
    plan, cold, warm = timed(left, state, 1_000, configured, args.repeat)
    rows.append(("member leaves (delay scheduled)", cold, warm, moves(plan), 0))
    state, snapshot = plan.state, settle(left, plan)

    # 2. the delay expires: lost work is placed on the least-loaded members.
    deadline = plan.next_round_at_ms or 0
    sequence.append((snapshot, state, deadline))
    plan, cold, warm = timed(snapshot, state, deadline, configured, args.repeat)
    placed = sum(len(r) for r in plan.newly_assigned.values())
    rows.append(("delay expires (lost work placed)", cold, warm, placed, lost))
    state, snapshot = plan.state, settle(snapshot, plan)

    # 3. a member joins: the others revoke just enough for balance.
    joined = dataclasses.replace(
        snapshot, members={**snapshot.members, gone: model.Member(id=gone, incarnation="2")}
    )
    sequence.append((joined, state, deadline + 1))
    plan, cold, warm = timed(joined, state, deadline + 1, configured, args.repeat)
    total = len(configured)
    minimum = total // len(joined.members)
    rows.append(("member joins (revocations)", cold, warm, moves(plan), minimum))
    state, snapshot = plan.state, settle(joined, plan)

    # 4. the join's second round: revoked work goes to the newcomer.
    sequence.append((snapshot, state, deadline + 2))
    plan, cold, warm = timed(snapshot, state, deadline + 2, configured, args.repeat)
    placed = sum(len(r) for r in plan.newly_assigned.values())
    rows.append(("join, 2nd round (assignment)", cold, warm, placed, minimum))
    state, snapshot = plan.state, settle(snapshot, plan)

    # 5. nothing changed: a no-op round.
    sequence.append((snapshot, state, deadline + 3))
    plan, cold, warm = timed(snapshot, state, deadline + 3, configured, args.repeat)
    rows.append(("no change (sticky no-op)", cold, warm, moves(plan), 0))

    cached = replay_cached(sequence, configured, args.repeat)
    print(f"{'round':<36}{'cold ms':>10}{'warm ms':>10}{'cached ms':>11}{'moved':>8}"
          f"{'minimum':>9}")
    for (name, cold, warm, moved, minimum), with_cache in zip(rows, cached, strict=True):
        print(f"{name:<36}{cold:>10.1f}{warm:>10.1f}{with_cache:>11.1f}{moved:>8}{minimum:>9}")
    if args.profile:
        profiler = cProfile.Profile()
        profiler.enable()
        assignor.plan(joined, state, now_ms=deadline + 4, configured=configured)
        profiler.disable()
        pstats.Stats(profiler).sort_stats("cumulative").print_stats(15)


if __name__ == "__main__":
    main()
