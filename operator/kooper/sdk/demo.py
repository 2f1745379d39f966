"""Demo connector types for ``kooper worker --demo``: a counter source and a sleep sink.

Neither touches the network. Their only cost is the start and stop latency they
are configured with, which is what a rebalancing drill measures: a resource is
paused from the end of its old owner's stop to the end of its new owner's start.

A connector picks its type with ``config["type"]`` (``counter`` by default, or
``sleep``); ``start.ms`` / ``stop.ms`` in its config override the worker's
defaults per connector.
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

    def running(self) -> frozenset[str]:
        """What runs now."""
        with self._lock:
            return frozenset(self._running)

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
                produced = int((self._clock() - state.started) * state.rate_per_s)
                self.counted[resource] = self.counted.get(resource, 0) + produced

