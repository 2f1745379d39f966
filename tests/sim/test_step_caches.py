"""``control.Caches`` only saves time: every simulated step decides the same with fresh caches.

The caches carried between steps (the members built from unchanged Leases, each member's
unknown and false claims, the configured resources, the Connectors' wants, the
assignor's indexes) are keyed by the objects they were computed from; a step given
empty ones must decide exactly what the carried ones decided.
"""

from __future__ import annotations

import pytest

from kooper.control import inputs
from kooper.control import step as control
from kooper.sim import chaos, runner, scenarios


@pytest.fixture
def compared(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Make every step the simulator takes also run with fresh caches, and compare."""
    real = control.step
    steps = [0]

    def both(given, memory, *, now_ms, caches=None, **rest):
        carried = real(given, memory, now_ms=now_ms, caches=caches, **rest)
        fresh = real(given, memory, now_ms=now_ms, caches=inputs.Caches(), **rest)
        for field in ("plan", "writes", "status", "events", "deletes", "memory"):
            assert getattr(carried, field) == getattr(fresh, field), (field, now_ms)
        steps[0] += 1
        return carried

    monkeypatch.setattr(control, "step", both)
    return steps


def test_carried_caches_decide_as_fresh_ones_in_a_roll_with_lost_messages(compared: list[int]):
    faults = runner.Faults(lose_doc=0.1, lose_report=0.1, slow_report=0.1, until_ms=120_000)
    for name in ("rolling-restart", "kill-many", "scale-up", "operator-restart"):
        config = runner.Config(pods=7, connectors=4, tasks=5, seed=3, faults=faults)
        assert runner.simulate(config, scenarios.build(name, 7)).violations == []
    assert compared[0] > 100


def test_carried_caches_decide_as_fresh_ones_under_hard_chaos(compared: list[int]):
    # Families 4: forged reports (false and unknown claims), leader terms, API restarts.
    for seed in range(40):
        assert not chaos.run_hard(seed, families=4).violations, seed
    assert compared[0] > 1_000
