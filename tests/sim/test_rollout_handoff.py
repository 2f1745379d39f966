"""Rolling restarts in the simulator: a graceful restart (SIGTERM, the worker leaves,
the kubelet removes the terminating pod) is a planned departure whose work is handed
over at once; a killed pod's work waits for it (returning identity) under ``kooper``."""

from __future__ import annotations

import pytest

from kooper.core import model
from kooper.sim import chaos, metrics, runner, scenarios

P = model.Protocol
Q = model.Policy
RESTART_MS = runner.Latencies().restart.lo


def roll(action: scenarios.Action, *, seed: int, protocol: P = P.COMPATIBLE,
         delay_ms: int = runner.Config().delay_ms) -> tuple[runner.Result, metrics.RunMetrics]:
    config = runner.Config(pods=10, connectors=3, tasks=10, protocol=protocol, seed=seed,
                           delay_ms=delay_ms)
    result = runner.simulate(config, scenarios.rolling_restart(10, action=action))
    return result, metrics.run_metrics(result.events)


@pytest.mark.parametrize("seed", range(4))
def test_a_graceful_rolling_restart_never_waits_for_a_pod_and_never_runs_anything_twice(
        seed: int):
    result, kooper = roll(scenarios.Action.RESTART, seed=seed)
    assert chaos.check(result) == []  # ends running everything once, balanced
    assert kooper.overlaps == 0
    assert kooper.max_pause_ms < RESTART_MS  # no resource waited for its pod to return
    # Every resource moves off its pod once; a pod that comes back empty takes some back.
    assert kooper.resources <= kooper.moves <= 2 * kooper.resources
    _, eager = roll(scenarios.Action.RESTART, seed=seed, protocol=P.EAGER)
    _, no_delay = roll(scenarios.Action.RESTART, seed=seed, delay_ms=0)
    assert kooper.total_pause_ms <= no_delay.total_pause_ms  # the default is as good as 0
    assert kooper.total_pause_ms * 5 < eager.total_pause_ms


def test_a_killed_pod_is_unplanned_its_work_waits_for_it_until_the_group_learned_better():
    result, killed = roll(scenarios.Action.KILL, seed=0)
    assert chaos.check(result) == []
    assert killed.overlaps == 0
    # The first kills wait for their pod (returning identity: nothing learned yet) ...
    assert killed.max_pause_ms >= RESTART_MS
    # ... then returns are known to take longer than two handoffs (``control.adaptive``):
    # later kills move their work at once, and balancing gives some back on return.
    assert 0 < killed.moves <= 2 * killed.resources
    assert killed.total_pause_ms < 10 * killed.resources * RESTART_MS // 2


def test_a_half_graceful_roll_never_pauses_the_pods_it_did_not_restart():
    config = runner.Config(pods=6, connectors=2, tasks=6, seed=7)
    half = metrics.run_metrics(runner.simulate(
        config, scenarios.rolling_restart(6, only=3)).events)
    assert half.undisturbed_resources > 0
    assert half.undisturbed_pause_ms == 0
