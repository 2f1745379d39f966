"""Random fault schedules on small groups, and the checks every run must pass.

A chaos run draws a group (2-5 pods, a few connectors), a policy, a protocol, a
delay and a schedule of faults (kills, bounces, scale changes, operator restarts
mid-round, partitions from the API, protocol flips) plus message faults (lost
or slow reports, lost ConfigMap updates) until the last fault. Everything comes
from one seed, so ``run_one(seed)`` reproduces a failure exactly.

Checks: no resource ever ran on two members at once; once the faults stop and
the delay passes, every configured resource runs exactly once, each member runs
exactly its assignment, and the group is balanced.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Sequence

from kooper.core import model
from kooper.sim import metrics, runner, scenarios

A = scenarios.Action
_ACTIONS = (
    A.RESTART, A.KILL, A.KILL, A.SCALE_UP, A.SCALE_DOWN, A.OPERATOR_RESTART, A.PROTOCOL,
    A.PARTITION, A.PARTITION,
)


@dataclasses.dataclass(frozen=True, slots=True)
class Outcome:
    """One chaos run: its seed, what went wrong, and how long convergence took."""

    seed: int
    violations: tuple[str, ...]
    converge_ms: int
    events: int


def draw(seed: int, *, pods: int | None = None,
         sessions: bool = False) -> tuple[runner.Config, scenarios.Scenario]:
    """The group, settings and fault schedule of chaos run ``seed``."""
    rng = random.Random(seed)
    size = pods if pods is not None else rng.randint(2, 5)
    delay = rng.choice((0, 3_000, 20_000))
    steps = []
    for _ in range(rng.randint(1, 8)):
        action = rng.choice(_ACTIONS)
        steps.append(scenarios.Step(
            action,
            pod=rng.randrange(size + 1),
            delay_ms=rng.choice((0, 50, 500, 2_000, 10_000)),
            down_ms=rng.choice((1_000, 5_000, 12_000, 30_000)),
            count=rng.randint(1, 2),
            protocols=(
                rng.choice(("eager", "compatible", "compatible")) if action in (A.RESTART,
                                                                                  A.PROTOCOL)
                else ""
            ),
            mid_round=rng.random() < 0.5,
        ))
    scenario = scenarios.Scenario("chaos", tuple(steps), eager_only=rng.random() < 0.1)
    horizon = 30_000 + sum(s.delay_ms for s in steps) + 60_000
    config = runner.Config(
        pods=size,
        connectors=rng.randint(1, 3),
        tasks=rng.randint(0, 4),
        policy=rng.choice(list(model.Policy)),
        protocol=rng.choice((model.Protocol.COMPATIBLE,) * 3 + (model.Protocol.EAGER,)),
        delay_ms=delay,
        seed=seed,
        faults=runner.Faults(
            lose_doc=rng.choice((0.0, 0.1, 0.3)),
            lose_report=rng.choice((0.0, 0.1, 0.3)),
            slow_report=rng.choice((0.0, 0.2)),
            until_ms=horizon,
        ),
        run=f"chaos-{seed}",
        sessions=sessions,
    )
    return config, scenario


def check(result: runner.Result) -> list[str]:
    """Problems with a finished run's final state (beyond the online overlap check)."""
    problems = list(result.violations)
    plan = result.plan
    running = result.running
    seen: dict[str, str] = {}
    for member, resources in sorted(running.items()):
        for resource in resources:
            if resource in seen:
                problems.append(f"end: {resource} runs on {seen[resource]} and {member}")
            seen[resource] = member
    wanted = set(result.configured.connectors) | set(result.configured.tasks)
    if running and set(seen) != wanted:
        missing = sorted(wanted - set(seen))[:5]
        extra = sorted(set(seen) - wanted)[:5]
        problems.append(f"end: not running {missing}, running unconfigured {extra}")
    if plan is None or not running:
        return problems
    for member, resources in running.items():
        part = plan.members.get(member)  # type: ignore[call-overload]
        assigned = set() if part is None else set(part.assigned.connectors) | set(
            part.assigned.tasks)
        if resources != assigned:
            problems.append(f"end: {member} runs {sorted(resources)} but is assigned "
                            f"{sorted(assigned)}")
    parts = [plan.members[m] for m in plan.members if m in running]
    if parts:
        if plan.protocol is model.Protocol.COMPATIBLE and (
            result.settings.policy is model.Policy.KOOPER
        ):
            loads = [[len(p.assigned.connectors) for p in parts],
                     [len(p.assigned.tasks) for p in parts]]
        else:
            loads = [[len(p.assigned) for p in parts]]
        for load in loads:
            if max(load) - min(load) > 1:
                problems.append(f"end: unbalanced {load}")
    return problems


def run_one(seed: int, *, pods: int | None = None, sessions: bool = False) -> Outcome:
    """Run chaos seed ``seed`` and check it (``sessions``: members are real SDK sessions)."""
    config, scenario = draw(seed, pods=pods, sessions=sessions)
    result = runner.simulate(config, scenario)
    problems = check(result)
    summary = metrics.run_metrics(result.events)
    if summary.overlaps:
        problems.append(f"event log shows {summary.overlaps} overlaps")
    return Outcome(seed, tuple(problems), summary.converge_ms or 0, len(result.events))


def run_many(seeds: Sequence[int], *, pods: int | None = None,
             sessions: bool = False) -> list[Outcome]:
    """Run every seed in order."""
    return [run_one(seed, pods=pods, sessions=sessions) for seed in seeds]
