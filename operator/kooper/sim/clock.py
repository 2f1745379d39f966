"""A virtual clock: a heap of ``(time, seq, event)``; no threads, no sleeps."""

from __future__ import annotations

import heapq
from typing import Any


class Clock:
    """Events scheduled at virtual milliseconds, popped in time order (FIFO on ties)."""

    def __init__(self) -> None:
        self.now_ms = 0
        self._heap: list[tuple[int, int, tuple[Any, ...]]] = []
        self._seq = 0

    def at(self, when_ms: int, *event: Any) -> None:
        """Schedule ``event`` at ``when_ms`` (never before now)."""
        self._seq += 1
        heapq.heappush(self._heap, (max(when_ms, self.now_ms), self._seq, event))

    def after(self, delay_ms: int, *event: Any) -> None:
        """Schedule ``event`` ``delay_ms`` from now."""
        self.at(self.now_ms + delay_ms, *event)

    def pop(self) -> tuple[Any, ...] | None:
        """The next event, advancing the clock to its time; ``None`` when nothing is left."""
        if not self._heap:
            return None
        when, _, event = heapq.heappop(self._heap)
        self.now_ms = when
        return event

    def __len__(self) -> int:
        return len(self._heap)
