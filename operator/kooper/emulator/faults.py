"""Fault injection: 409 storms and slow answers, switched on from any thread.

Watch disconnects live in `watching.WatchHub.drop`; everything else a test
may want to break is here. Faults apply to HTTP requests only: direct store
calls from tests never fail on purpose.
"""

import dataclasses
import threading

WRITE_VERBS = frozenset({"create", "update", "patch", "delete"})


@dataclasses.dataclass(slots=True)
class _Failure:
    remaining: int
    code: int
    verbs: frozenset[str]


class Faults:
    """The faults in force; thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._failures: dict[str, list[_Failure]] = {}
        self._delays: dict[str, float] = {}

    def fail_next(self, resource_key: str, count: int, *, code: int = 409,
                  verbs: frozenset[str] = WRITE_VERBS) -> None:
        """Answer the next `count` matching requests to a kind ("*" for any) with `code`."""
        with self._lock:
            self._failures.setdefault(resource_key, []).append(
                _Failure(remaining=count, code=code, verbs=verbs))

    def take_failure(self, resource_key: str, verb: str) -> int | None:
        """Consume one injected failure for this request, if any; returns its HTTP code."""
        with self._lock:
            for key in (resource_key, "*"):
                for failure in self._failures.get(key, []):
                    if failure.remaining > 0 and verb in failure.verbs:
                        failure.remaining -= 1
                        return failure.code
            return None

    def pending_failures(self, resource_key: str = "*") -> int:
        """How many injected failures are still to be served for a kind ("*": all kinds)."""
        with self._lock:
            return sum(f.remaining for key, fs in self._failures.items()
                       if resource_key in ("*", key) for f in fs)

    def set_delay(self, seconds: float, resource_key: str = "*") -> None:
        """Delay every answer for a kind ("*": every request) by `seconds`; 0 removes it."""
        with self._lock:
            if seconds > 0:
                self._delays[resource_key] = seconds
            else:
                self._delays.pop(resource_key, None)

    def delay_for(self, resource_key: str | None) -> float:
        """The delay to apply before answering a request for this kind."""
        with self._lock:
            specific = self._delays.get(resource_key, 0.0) if resource_key else 0.0
            return max(specific, self._delays.get("*", 0.0))

    def clear(self) -> None:
        """Remove every fault."""
        with self._lock:
            self._failures.clear()
            self._delays.clear()
