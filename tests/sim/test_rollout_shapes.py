"""Rollouts on the simulator (``sim.rollout``): the controllers behave as Kubernetes'
do, and with the revisions visible the ``kooper`` policy keeps every resource near one
move per roll, the barrier intact (virtual time throughout)."""

from __future__ import annotations

import math
from collections import Counter

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from kooper.control import rollout as control_rollout
from kooper.core import events as ev
from kooper.sim import metrics, rollout, runner, scenarios

FAST = runner.Latencies(restart=runner.Span(1_000, 3_000))


def roll(spec: rollout.Spec, *, pods: int = 5, connectors: int = 2, tasks: int = 4,
         seed: int = 0, latencies: runner.Latencies = FAST) -> runner.Result:
    config = runner.Config(pods=pods, connectors=connectors, tasks=tasks, seed=seed,
                           latencies=latencies)
    return runner.simulate(config, scenarios.build("rolling-restart", pods, spec))


def test_statefulset_replaces_highest_ordinal_first_one_at_a_time():
    result = roll(rollout.StatefulSetRoll())
    order = [e.member for e in result.events if e.event is ev.Kind.LEAVE]
    assert order == ["sim-4", "sim-3", "sim-2", "sim-1", "sim-0"]
    # Each pod leaves only once its predecessor in the roll is back.
    away: set[str] = set()
    for event in result.events:
        if event.event is ev.Kind.LEAVE:
            assert not away, f"{event.member} left while {away} was away"
            away.add(event.member)
        elif event.event is ev.Kind.JOIN:
            away.discard(event.member)
    assert not result.violations


def test_statefulset_max_unavailable_two_replaces_two_at_a_time():
    result = roll(rollout.StatefulSetRoll(max_unavailable=2), pods=6)
    away: set[str] = set()
    most = 0
    for event in result.events:
        if event.event is ev.Kind.LEAVE:
            away.add(event.member)
        elif event.event is ev.Kind.JOIN:
            away.discard(event.member)
        most = max(most, len(away))
    assert most == 2
    assert sorted(e.member for e in result.events if e.event is ev.Kind.LEAVE) == [
        f"sim-{n}" for n in range(6)]


def test_partition_leaves_lower_ordinals_and_their_work_alone():
    result = roll(rollout.StatefulSetRoll(partition=3), pods=5)
    assert sorted(e.member for e in result.events if e.event is ev.Kind.LEAVE) == [
        "sim-3", "sim-4"]
    started = min(e.ts_ms for e in result.events if e.event is ev.Kind.LEAVE)
    stayed = {e.resource for e in result.events if e.event is ev.Kind.START
              and e.ts_ms < started and e.member in {"sim-0", "sim-1", "sim-2"}}
    assert stayed
    stopped = {e.resource for e in result.events
               if e.event is ev.Kind.STOP and e.ts_ms >= started}
    assert not stopped & stayed, "resources that did not have to move"


def test_deployment_surges_with_new_names_and_never_exceeds_replicas_plus_surge():
    result = roll(rollout.DeploymentRoll(max_surge=1, max_unavailable=0), pods=4)
    live: set[str] = set()
    most = 0
    for event in result.events:
        if event.event is ev.Kind.JOIN:
            live.add(event.member)
        elif event.event is ev.Kind.LEAVE:
            live.discard(event.member)
        most = max(most, len(live))
    assert most <= 5
    assert sorted(result.running) == [f"sim-r2-{n}" for n in range(4)]
    joined_new = [e.member for e in result.events if e.event is ev.Kind.JOIN
                  and e.member.startswith("sim-r2-")]
    assert len(joined_new) == 4, "returning identity never applies: every name is new"


def test_a_worker_whose_stops_outlast_the_grace_period_is_killed_and_its_work_moves():
    slow = runner.Latencies(restart=runner.Span(1_000, 3_000), stop=runner.Span(500, 500))
    result = roll(rollout.StatefulSetRoll(grace_ms=100), latencies=slow)
    leaves = [e for e in result.events if e.event is ev.Kind.LEAVE]
    assert len(leaves) == 5
    assert not result.violations
    resources = 2 * 5
    assert sum(len(r) for r in result.running.values()) == resources


def test_ten_pod_deployment_roll_moves_every_resource_exactly_once():
    for seed in range(5):
        result = roll(rollout.DeploymentRoll(), pods=10, connectors=3, tasks=10, seed=seed,
                      latencies=runner.Latencies())
        m = metrics.run_metrics(result.events)
        assert m.moves == m.resources == 33, seed


def test_ten_pod_statefulset_roll_stays_within_one_plus_two_over_n_moves_per_resource():
    for seed in range(5):
        result = roll(rollout.StatefulSetRoll(), pods=10, connectors=3, tasks=10, seed=seed,
                      latencies=runner.Latencies())
        m = metrics.run_metrics(result.events)
        assert m.moves <= m.resources * (1 + 2 / 10), seed


def test_drill_cli_runs_a_statefulset_and_a_deployment_roll(capsys):
    import json

    from kooper import cli
    for workload in ("statefulset", "deployment"):
        code = cli.main(["drill", "rolling-restart", "--sim", "--pods", "4", "--tasks", "2",
                         "--workload", workload, "-o", "json"])
        assert code == 0
        out = json.loads(capsys.readouterr().out)
        assert out["violations"] == []
        assert out["metrics"]["moves"] >= 9  # 3 connectors x (1 + 2 tasks), each moved
    assert cli.main(["drill", "kill-one", "--sim", "--workload", "deployment"]) != 0


# -- properties ---------------------------------------------------------------------------

def balanced(running: dict[str, set[str]]) -> bool:
    tasks = [sum(1 for r in held if "-" in r) for held in running.values()]
    instances = [sum(1 for r in held if "-" not in r) for held in running.values()]
    return max(tasks) - min(tasks) <= 1 and max(instances) - min(instances) <= 1


def share(count: int, pods: int) -> int:
    return math.ceil(count / pods)


SHAPE = st.tuples(st.integers(2, 7), st.integers(1, 3), st.integers(0, 5),
                  st.integers(0, 10_000), st.sampled_from([FAST, runner.Latencies(
                      restart=runner.Span(300, 900), pod_removal=runner.Span(100, 300))]))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(shape=SHAPE)
def test_statefulset_roll_moves_each_resource_once_plus_the_shapes_forced_moves(shape):
    pods, connectors, tasks, seed, latencies = shape
    result = roll(rollout.StatefulSetRoll(), pods=pods, connectors=connectors, tasks=tasks,
                  seed=seed, latencies=latencies)
    m = metrics.run_metrics(result.events)
    resources = connectors * (1 + tasks)
    forced = 2 * (share(connectors, pods) + share(connectors * tasks, pods))
    assert resources <= m.moves <= resources + forced
    assert not result.violations
    assert m.overlaps == 0
    assert sum(len(r) for r in result.running.values()) == resources
    assert balanced(result.running)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(shape=SHAPE, surge=st.integers(1, 2))
def test_surging_deployment_roll_moves_each_resource_once_plus_at_most_one_share(shape, surge):
    pods, connectors, tasks, seed, latencies = shape
    result = roll(rollout.DeploymentRoll(max_surge=surge, max_unavailable=0), pods=pods,
                  connectors=connectors, tasks=tasks, seed=seed, latencies=latencies)
    m = metrics.run_metrics(result.events)
    resources = connectors * (1 + tasks)
    assert resources <= m.moves <= resources + share(connectors, pods) + share(
        connectors * tasks, pods)
    assert not result.violations
    assert m.overlaps == 0
    assert balanced(result.running)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(shape=SHAPE, spec=st.one_of(
    st.builds(rollout.StatefulSetRoll, max_unavailable=st.integers(1, 3),
              partition=st.integers(0, 3), grace_ms=st.sampled_from([50, 30_000])),
    st.builds(rollout.DeploymentRoll, max_surge=st.integers(0, 3),
              max_unavailable=st.integers(1, 3), grace_ms=st.sampled_from([50, 30_000]))))
def test_no_resource_ever_runs_on_two_members_whatever_the_rollout(shape, spec):
    pods, connectors, tasks, seed, latencies = shape
    result = roll(spec, pods=pods, connectors=connectors, tasks=tasks, seed=seed,
                  latencies=latencies)
    m = metrics.run_metrics(result.events)
    assert not result.violations
    assert m.overlaps == 0
    everything = Counter(r for held in result.running.values() for r in held)
    assert all(n == 1 for n in everything.values())
    assert len(everything) == connectors * (1 + tasks)


# An eighth of the profile's examples: 25 by default, 375 under ``--hypothesis-profile
# thorough`` (tests/conftest.py).
@settings(max_examples=settings().max_examples // 8, deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(shape=SHAPE, partition=st.integers(1, 6), max_unavailable=st.integers(1, 3))
# Found by this property (docs/benchmarks.md, rollout section): the balancing after the
# roll kept the member that had received the first rolled pod's work at ``hi`` and made
# an untouched member at ``hi`` give up its own task.
@example(shape=(5, 3, 4, 0, FAST), partition=3, max_unavailable=1)
def test_a_partial_roll_never_stops_work_on_the_pods_it_leaves_alone(shape, partition,
                                                                      max_unavailable):
    """A StatefulSet roll with a partition: the pods below it (never restarted) keep
    their work, during the roll and after it.

    For every pod the roll leaves alone:

    * nothing it ran when the roll began (the first pod left) is ever stopped;
    * no round hands it work while a member on the update revision is live (the pods
      that leave before any rolled pod is back have nobody else to hand their work to):
      never a departure's handoff once an updated member can take it, nor work
      the balancing moves;
    * at the end it holds exactly what it ran when the roll began: what it was handed
      during the roll leaves it again, so the balancing moves work that already moved.

    And the group ends balanced (connectors and tasks each within one).
    """
    pods, connectors, tasks, seed, latencies = shape
    partition = min(partition, pods - 1)
    config = runner.Config(pods=pods, connectors=connectors, tasks=tasks, seed=seed,
                           latencies=latencies)
    spec = rollout.StatefulSetRoll(partition=partition, max_unavailable=max_unavailable)
    sim = runner.Sim(config, scenarios.build("rolling-restart", pods, spec))
    sim.steps = []
    result = sim.run()
    alone = {f"sim-{n}" for n in range(partition)}
    assigned: dict[str, frozenset[str]] = {}
    for inputs, _, now_ms, decided in sim.steps:
        if decided.plan is None:
            continue
        updated = {pod.name for pod in inputs.pods
                   if control_rollout.revision(pod) == rollout.NEW and not pod.deleting}
        for member, plan in decided.plan.members.items():
            now = plan.assigned.connectors | plan.assigned.tasks
            given = now - assigned.get(member, frozenset())
            assigned[member] = now
            if member in alone and given and updated & decided.plan.members.keys():
                raise AssertionError(f"{member} handed {sorted(given)} at {now_ms} ms "
                                     f"while {sorted(updated)} were updated")
    events = result.events
    started = min(e.ts_ms for e in events if e.event is ev.Kind.LEAVE)
    before: dict[str, set[str]] = {}  # what each pod ran when the roll began
    for e in events:
        if e.ts_ms < started and e.event is ev.Kind.START:
            before.setdefault(e.member, set()).add(e.resource)
        elif e.ts_ms < started and e.event is ev.Kind.STOP:
            before.get(e.member, set()).discard(e.resource)
    stayed = {r for member in alone for r in before.get(member, set())}
    stopped = {e.resource for e in events if e.event is ev.Kind.STOP and e.ts_ms >= started}
    assert not stopped & stayed
    for member in alone:
        assert result.running[member] == before.get(member, set()), member
    assert balanced(result.running)
