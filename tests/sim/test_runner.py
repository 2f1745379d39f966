"""The simulator: determinism, the rolling-restart comparisons, and chaos safety."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

from kooper.core import ids, model
from kooper.sim import chaos, metrics, runner, scenarios

P = model.Protocol
Q = model.Policy


def drill(scenario: scenarios.Scenario, protocol: P, policy: Q, **kw: int) -> runner.Result:
    """A 6-pod, 2 x 6-task group; ``kw`` overrides the config (seed 7 by default)."""
    config = runner.Config(pods=6, connectors=2, tasks=6, protocol=protocol, policy=policy,
                           seed=kw.pop("seed", 7), **kw)
    return runner.simulate(config, scenario)


def test_a_seed_determines_the_whole_event_log():
    scenario = scenarios.build("kill-many", 6)
    first = drill(scenario, P.COMPATIBLE, Q.KIP415, delay_ms=5_000).events
    again = drill(scenario, P.COMPATIBLE, Q.KIP415, delay_ms=5_000).events
    other = drill(scenario, P.COMPATIBLE, Q.KIP415, delay_ms=5_000, seed=8).events
    assert first == again
    assert first != other


def test_rolling_restart_under_kooper_never_pauses_undisturbed_pods_and_beats_eager():
    roll = scenarios.rolling_restart(6, only=3, action=scenarios.Action.KILL)
    eager = metrics.run_metrics(drill(roll, P.EAGER, Q.KOOPER).events)
    kooper = metrics.run_metrics(drill(roll, P.COMPATIBLE, Q.KOOPER).events)
    assert kooper.undisturbed_resources > 0
    assert kooper.undisturbed_pause_ms == 0
    assert eager.undisturbed_pause_ms > 0
    assert kooper.total_pause_ms < eager.total_pause_ms
    assert kooper.overlaps == eager.overlaps == 0
    # The first killed pods get their own work back (returning identity); once two
    # returns are known to take longer than two handoffs, a kill moves at once
    # (``control.adaptive``) and balancing gives some back when the pod returns.
    assert kooper.moves <= kooper.resources


def test_every_scenario_ends_with_everything_running_once_and_balanced():
    for name in scenarios.NAMES:
        for protocol, policy in ((P.COMPATIBLE, Q.KOOPER), (P.COMPATIBLE, Q.KIP415),
                                 (P.EAGER, Q.KOOPER)):
            result = drill(scenarios.build(name, 6), protocol, policy, delay_ms=20_000)
            assert chaos.check(result) == [], (name, protocol, policy)


def test_kip415_waits_the_delay_for_a_killed_pod_and_kooper_hands_a_scale_down_over_at_once():
    kill = metrics.run_metrics(drill(scenarios.build("kill-one", 6), P.COMPATIBLE, Q.KIP415,
                                     delay_ms=60_000).events)
    assert kill.max_pause_ms >= 60_000 - 1_000
    down = metrics.run_metrics(drill(scenarios.build("scale-down", 6), P.COMPATIBLE, Q.KOOPER,
                                     delay_ms=60_000).events)
    assert 0 < down.max_pause_ms < 5_000


def test_every_scenario_also_converges_with_members_driven_by_the_real_sdk_session():
    for name in scenarios.NAMES:
        for protocol, policy in ((P.COMPATIBLE, Q.KOOPER), (P.COMPATIBLE, Q.KIP415),
                                 (P.EAGER, Q.KOOPER)):
            result = drill(scenarios.build(name, 6), protocol, policy, delay_ms=20_000,
                           sessions=True)
            assert chaos.check(result) == [], (name, protocol, policy)


def test_chaos_with_sdk_sessions_breaks_no_rule():
    outcomes = chaos.run_many(range(1_000, 1_200), sessions=True)
    assert [(o.seed, o.violations) for o in outcomes if o.violations] == []


def test_a_few_hundred_chaos_runs_break_no_rule():
    outcomes = chaos.run_many(range(300))
    assert [(o.seed, o.violations) for o in outcomes if o.violations] == []
    assert max(o.converge_ms for o in outcomes) > 0


def test_the_drill_command_writes_an_event_log_and_prints_metrics(tmp_path: Path):
    out = tmp_path / "events.jsonl"
    done = subprocess.run(
        [sys.executable, "-m", "kooper.cli", "drill", "kill-one", "--sim", "--pods", "3",
         "--out", str(out), "--seed", "3"],
        capture_output=True, text=True, check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "100%" in done.stderr
    assert "total pause" in done.stdout
    kinds = {json.loads(line)["event"] for line in out.read_text().splitlines()}
    assert kinds == {"join", "leave", "round", "start", "stop"}


def test_a_modelled_member_fenced_and_back_before_it_is_declared_departed_runs_its_work():
    # Lease 15 s, skew 5 s: a 17 s partition fences the member, which is back before
    # the operator declares it departed at 20 s.
    cut = scenarios.Scenario("cut", (scenarios.Step(scenarios.Action.PARTITION, pod=1,
                                                     down_ms=17_000),))
    assert chaos.check(drill(cut, P.COMPATIBLE, Q.KOOPER, delay_ms=0)) == []


def test_an_sdk_session_fenced_and_back_before_it_is_declared_departed_runs_its_work():
    cut = scenarios.Scenario("cut", (scenarios.Step(scenarios.Action.PARTITION, pod=1,
                                                     down_ms=17_000),))
    assert chaos.check(drill(cut, P.COMPATIBLE, Q.KOOPER, delay_ms=0, sessions=True)) == []


def test_sdk_sessions_get_the_planned_incarnation_and_ignore_a_document_for_another():
    config = runner.Config(pods=2, connectors=1, tasks=2, sessions=True, seed=3)
    sim = runner.Sim(config, scenarios.Scenario("formed", ()))
    assert sim.run().violations == []
    name = ids.WorkerId("sim-0")
    pod = sim.pods[name]
    assert pod.session is not None
    assert pod.session.assignment is not None
    planned = sim.written[name]
    assert planned.incarnation == pod.incarnation
    newer = dataclasses.replace(planned, generation=planned.generation + 10)
    sim._doc(name, pod.token, dataclasses.replace(newer, incarnation="a-previous-life"))
    assert pod.session.assignment.generation == planned.generation
    sim._doc(name, pod.token, newer)
    assert pod.session.assignment.generation == newer.generation
    assert pod.session.assignment.incarnation == pod.incarnation
