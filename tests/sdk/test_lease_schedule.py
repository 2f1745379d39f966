"""Renewals are spaced from when each was sent, so a slow API does not eat the fencing
budget (found by the real-process chaos run: at 1 s of API latency and a 5 s Lease the
workers fenced every few seconds and the group never settled)."""

from __future__ import annotations

from typing import Any

from kooper.sdk import identity, lease, settings


class SlowApi:
    """Every write takes ``latency`` seconds of the fake clock."""

    def __init__(self, clock: list[float], latency: float) -> None:
        self.clock = clock
        self.latency = latency
        self.sent: list[float] = []

    def merge_patch(self, path: str, patch: Any) -> dict[str, Any]:
        self.sent.append(self.clock[0])
        self.clock[0] += self.latency
        return {}


class Wake:
    """The keeper's wake event on the fake clock: a wait lets its timeout pass."""

    def __init__(self, clock: list[float], keeper: lease.LeaseKeeper, turns: int) -> None:
        self.clock = clock
        self.keeper = keeper
        self.turns = turns

    def wait(self, timeout: float | None = None) -> bool:
        self.clock[0] += timeout or 0.0
        self.turns -= 1
        if self.turns < 0:
            self.keeper._stop.set()
        return False

    def clear(self) -> None:
        pass


def test_a_slow_api_does_not_stretch_the_time_between_renewals() -> None:
    clock = [100.0]
    api = SlowApi(clock, latency=1.0)
    keeper = lease.LeaseKeeper(
        api=api,  # type: ignore[arg-type]
        identity=identity.Identity("w-0", "ns", uid="u"),
        incarnation="i",
        settings=settings.Settings(lease_duration_s=15, renew_interval_s=3.0),
        clock=lambda: clock[0],
        wall=lambda: clock[0],
    )
    keeper._wake = Wake(clock, keeper, turns=4)  # type: ignore[assignment]
    keeper._loop("u")
    gaps = [b - a for a, b in zip(api.sent, api.sent[1:], strict=False)]
    assert len(gaps) >= 3
    assert gaps == [3.0] * len(gaps)  # not 4.0: the answer's second is not added
