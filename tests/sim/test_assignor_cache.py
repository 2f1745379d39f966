"""``assignor.Cache`` only saves time: every simulated round plans the same without it."""

from __future__ import annotations

import pytest

from kooper.core import assignor, model
from kooper.sim import chaos, runner, scenarios


@pytest.fixture
def compared(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Make every cached ``plan`` call in the simulator also plan without the cache."""
    real = assignor.plan
    rounds = [0]

    def both(snapshot, previous, *, now_ms, configured=None, cache=None):
        cached = real(snapshot, previous, now_ms=now_ms, configured=configured, cache=cache)
        bare = real(snapshot, previous, now_ms=now_ms, configured=configured)
        assert cached == bare, (snapshot, previous, now_ms)
        rounds[0] += 1
        return cached

    monkeypatch.setattr(assignor, "plan", both)
    return rounds


def test_cached_rounds_equal_uncached_ones_in_every_scenario(compared: list[int]):
    for name in scenarios.NAMES:
        for protocol in model.Protocol:
            for policy in model.Policy:
                config = runner.Config(pods=7, connectors=4, tasks=5, protocol=protocol,
                                       policy=policy, delay_ms=20_000, seed=11)
                assert runner.simulate(config, scenarios.build(name, 7)).violations == []
    assert compared[0] > 500


def test_cached_rounds_equal_uncached_ones_under_chaos(compared: list[int]):
    outcomes = chaos.run_many(range(5_000, 5_150))
    assert [(o.seed, o.violations) for o in outcomes if o.violations] == []
    assert compared[0] > 1_000


def test_cached_rounds_equal_uncached_ones_in_a_bigger_roll(compared: list[int]):
    config = runner.Config(pods=40, connectors=30, tasks=20, seed=2)
    assert runner.simulate(config, scenarios.rolling_restart(40, only=6)).violations == []
    assert compared[0] > 10
