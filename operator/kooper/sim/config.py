"""A simulated run's configuration (``Config``) and its latency and message-fault model.

Every latency is a uniform ``Span``, drawn from the run's one random stream
(``Sim.rng``), so a run is a pure function of its ``Config``, scenario and seed.
"""

from __future__ import annotations

import dataclasses
import random

from kooper.core import defaults, model


@dataclasses.dataclass(frozen=True, slots=True)
class Span:
    """A uniform latency ``[lo, hi]`` in milliseconds."""

    lo: int
    hi: int

    def draw(self, rng: random.Random) -> int:
        """One sample."""
        return self.lo if self.hi <= self.lo else rng.randint(self.lo, self.hi)


@dataclasses.dataclass(frozen=True, slots=True)
class Latencies:
    """The latency model (milliseconds)."""

    start: Span = Span(200, 800)
    stop: Span = Span(100, 400)
    report: Span = Span(20, 100)
    propagate: Span = Span(50, 300)
    debounce: Span = Span(100, 100)
    restart: Span = Span(8_000, 15_000)
    ready: Span = Span(500, 1_500)
    operator_restart: Span = Span(3_000, 8_000)
    pod_removal: Span = Span(500, 2_000)
    """A graceful stop: from the worker deleting its Lease to the kubelet removing the
    terminating pod (the process exits, the kubelet notices and deletes the pod)."""
    lease_ms: int = 15_000
    skew_ms: int = 5_000
    resync_ms: int = 10_000
    """A member that missed a document or whose report was lost retries after this."""
    stop_timeout_ms: int = 0
    fence_margin_ms: int = 0
    """SDK sessions' timing budget (``Session``): with both 0 they fence at the lease."""


@dataclasses.dataclass(frozen=True, slots=True)
class Faults:
    """Random message faults, active until ``until_ms``."""

    lose_doc: float = 0.0
    lose_report: float = 0.0
    slow_report: float = 0.0
    """Probability that a report takes ``slow_report_ms`` more."""
    slow_report_ms: int = 5_000
    until_ms: int = 0


@dataclasses.dataclass(frozen=True, slots=True)
class Config:
    """One simulated run."""

    pods: int = 6
    connectors: int = 3
    tasks: int = 4
    """Tasks per connector."""
    policy: model.Policy = model.Policy.KOOPER
    protocol: model.Protocol = model.Protocol.COMPATIBLE
    delay_ms: int = defaults.SCHEDULED_REBALANCE_MAX_DELAY_MS
    seed: int = 0
    latencies: Latencies = Latencies()
    faults: Faults = Faults()
    warmup_ms: int = 30_000
    horizon_ms: int = 24 * 3_600_000
    run: str = ""
    group: str = "sim"
    sessions: bool = False
    """Drive members through the real ``kooper.sdk.session.Session`` (slower)."""
