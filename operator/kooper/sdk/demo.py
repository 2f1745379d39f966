"""Demo connector types for ``kooper worker --demo``: a counter source and a sleep sink.

Neither touches the network. Their only cost is the start and stop latency they
are configured with, which is what a rebalancing drill measures: a resource is
paused from the end of its old owner's stop to the end of its new owner's start.

A connector picks its type with ``config["type"]`` (``counter`` by default, or
``sleep``); ``start.ms`` / ``stop.ms`` in its config override the worker's
defaults per connector.

A paused connector (``on_paused``) stays assigned but its counters stop counting
until ``on_resumed``, as a paused Kafka Connect connector keeps its tasks and
processes nothing.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable, Mapping


@dataclasses.dataclass(slots=True)
class _Running:
    kind: str
    epoch: int
    started: float
    stop_ms: int
    rate_per_s: float
    paused_s: float = 0.0
    """Time spent paused, finished pauses only."""
    paused_since: float | None = None
    """When the current pause began (None: not paused)."""

    def produced(self, now: float) -> int:
        """Records counted by ``now``: running time, pauses excluded, times the rate."""
        paused = self.paused_s + (now - self.paused_since if self.paused_since is not None else 0)
        return int(max(0.0, now - self.started - paused) * self.rate_per_s)


class DemoConnectors:
    """The callbacks of the demo worker; thread-safe (callbacks of a batch run concurrently)."""

    TYPES = ("counter", "sleep")

    def __init__(
        self,
        *,
        start_ms: int = 0,
        stop_ms: int = 0,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.start_ms = start_ms
        self.stop_ms = stop_ms
        self._sleep = sleep
        self._clock = clock
        self._lock = threading.Lock()
        self._running: dict[str, _Running] = {}
        self.counted: dict[str, int] = {}
        """Records each counter source produced, by resource, as of its last stop."""
        self.lost: list[str] = []
        """Resources stopped as lost (their progress was not committed)."""

    def on_assigned(self, resource: str, config: Mapping[str, str], epoch: int) -> None:
        """Start ``resource``: wait the start latency, then it runs."""
        kind = config.get("type", "counter")
        if kind not in self.TYPES:
            raise ValueError(f"unknown demo connector type {kind!r} (known: {self.TYPES})")
        start_ms = int(config.get("start.ms", self.start_ms))
        stop_ms = int(config.get("stop.ms", self.stop_ms))
        rate = float(config.get("records.per.second", "100"))
        with self._lock:
            if resource in self._running:
                raise RuntimeError(f"{resource} is already running")
        self._sleep(start_ms / 1000)
        with self._lock:
            self._running[resource] = _Running(kind, epoch, self._clock(), stop_ms, rate)

    def on_revoked(self, resource: str) -> None:
        """Stop ``resource`` gracefully and commit what it counted."""
        self._stop(resource, commit=True)

    def on_lost(self, resource: str) -> None:
        """Stop ``resource`` without committing: another member may own it already."""
        self._stop(resource, commit=False)

    def on_paused(self, resource: str) -> None:
        """Hold ``resource`` paused: it keeps running but counts nothing."""
        with self._lock:
            state = self._running.get(resource)
            if state is not None and state.paused_since is None:
                state.paused_since = self._clock()

    def on_resumed(self, resource: str) -> None:
        """Let ``resource`` count again."""
        with self._lock:
            state = self._running.get(resource)
            if state is not None and state.paused_since is not None:
                state.paused_s += self._clock() - state.paused_since
                state.paused_since = None

    def running(self) -> frozenset[str]:
        """What runs now."""
        with self._lock:
            return frozenset(self._running)

    def paused(self) -> frozenset[str]:
        """What runs now but is held paused."""
        with self._lock:
            return frozenset(r for r, s in self._running.items() if s.paused_since is not None)

    def progress(self, resource: str) -> int:
        """Records a running counter source produced so far (0 if not running)."""
        with self._lock:
            state = self._running.get(resource)
            return 0 if state is None else state.produced(self._clock())

    def _stop(self, resource: str, *, commit: bool) -> None:
        with self._lock:
            state = self._running.get(resource)
        if state is None:
            return
        self._sleep(state.stop_ms / 1000)
        with self._lock:
            self._running.pop(resource, None)
            if not commit:
                self.lost.append(resource)
            elif state.kind == "counter" and "-" in resource:
                produced = state.produced(self._clock())
                self.counted[resource] = self.counted.get(resource, 0) + produced

