"""The caches only save time: every simulated round decides the same without them.

Two layers carry caches between rounds, each keyed by the objects it was computed from:

* ``assignor.Cache``, the assignor's indexes (who holds which connector's tasks, who is
  assigned what): every cached ``plan`` must equal one planned without it;
* ``control.Caches``, the step's (the members built from unchanged Leases, each member's
  unknown and false claims, the configured resources, the Connectors' wants, and the
  assignor's): every step must decide what a step given empty ones decides.

Each test runs the simulator with the call doubled (``doubled``) and counts the
comparisons, so a test that compared nothing fails.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from kooper.control import inputs
from kooper.control import step as control
from kooper.core import assignor, model
from kooper.sim import chaos, runner, scenarios


def doubled(monkeypatch: pytest.MonkeyPatch, module: Any, name: str,
            compare: Callable[..., None]) -> list[int]:
    """Replace ``module.name`` by a function that calls it, lets ``compare`` (given the
    real function, its result and the call's arguments) check it and counts the calls."""
    real = getattr(module, name)
    calls = [0]

    def both(*args: Any, **kwargs: Any) -> Any:
        result = real(*args, **kwargs)
        compare(real, result, *args, **kwargs)
        calls[0] += 1
        return result

    monkeypatch.setattr(module, name, both)
    return calls


def _plans_alike(real, cached, snapshot, previous, *, now_ms, configured=None, cache=None):
    bare = real(snapshot, previous, now_ms=now_ms, configured=configured)
    assert cached == bare, (snapshot, previous, now_ms)


def _steps_alike(real, carried, given, memory, *, now_ms, caches=None, **rest):
    fresh = real(given, memory, now_ms=now_ms, caches=inputs.Caches(), **rest)
    for field in ("plan", "writes", "status", "events", "deletes", "memory"):
        assert getattr(carried, field) == getattr(fresh, field), (field, now_ms)


@pytest.fixture
def planned(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Every ``assignor.plan`` call also planned without the cache, and compared."""
    return doubled(monkeypatch, assignor, "plan", _plans_alike)


@pytest.fixture
def stepped(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Every ``control.step`` also taken with fresh ``Caches``, and compared."""
    return doubled(monkeypatch, control, "step", _steps_alike)


def test_cached_rounds_equal_uncached_ones_in_every_scenario(planned: list[int]):
    for name in scenarios.NAMES:
        for protocol in model.Protocol:
            for policy in model.Policy:
                config = runner.Config(pods=7, connectors=4, tasks=5, protocol=protocol,
                                       policy=policy, delay_ms=20_000, seed=11)
                assert runner.simulate(config, scenarios.build(name, 7)).violations == []
    assert planned[0] > 500


def test_cached_rounds_equal_uncached_ones_under_chaos(planned: list[int]):
    outcomes = chaos.run_many(range(5_000, 5_150))
    assert [(o.seed, o.violations) for o in outcomes if o.violations] == []
    assert planned[0] > 1_000


def test_cached_rounds_equal_uncached_ones_in_a_bigger_roll(planned: list[int]):
    config = runner.Config(pods=40, connectors=30, tasks=20, seed=2)
    assert runner.simulate(config, scenarios.rolling_restart(40, only=6)).violations == []
    assert planned[0] > 10


def test_carried_caches_decide_as_fresh_ones_in_a_roll_with_lost_messages(stepped: list[int]):
    faults = runner.Faults(lose_doc=0.1, lose_report=0.1, slow_report=0.1, until_ms=120_000)
    for name in ("rolling-restart", "kill-many", "scale-up", "operator-restart"):
        config = runner.Config(pods=7, connectors=4, tasks=5, seed=3, faults=faults)
        assert runner.simulate(config, scenarios.build(name, 7)).violations == []
    assert stepped[0] > 100


def test_carried_caches_decide_as_fresh_ones_under_hard_chaos(stepped: list[int]):
    # Families 4: forged reports (false and unknown claims), leader terms, API restarts.
    for seed in range(40):
        assert not chaos.run_hard(seed, families=4).violations, seed
    assert stepped[0] > 1_000
