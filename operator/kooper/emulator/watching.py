"""Watch streams: the store's change feed, filtered and queued per connection.

A `Watch` subscribes to the store and replays what the client asked for
while holding the store lock, so no change falls between the replay and the
live feed:

* no `resourceVersion` (or "0"): a synthetic ADDED for every existing object,
  then changes (what the API server does);
* `resourceVersion=N`: every change newer than N from the bounded history,
  then changes; an ERROR event with a 410 Gone Status if N was compacted;
* `sendInitialEvents=true`: the synthetic ADDEDs, then a BOOKMARK annotated
  `k8s.io/initial-events-end`.

Label/field selectors turn a MODIFIED into ADDED or DELETED when the object
starts or stops matching, as in Kubernetes. Changes may come from any thread
(HTTP requests in the server loop, direct writes from tests), so they reach
the connection's asyncio queue through `call_soon_threadsafe`, which keeps
their order.
"""

import asyncio
import threading
import time
from collections.abc import AsyncIterator
from typing import Any

from kooper.emulator import resources, selectors, store

_CLOSE: dict[str, Any] = {}  # sentinel: the stream ends when it meets this


class Watch:
    """One open watch connection of one kind."""

    def __init__(
        self,
        objects: store.Store,
        spec: resources.ResourceSpec,
        *,
        loop: asyncio.AbstractEventLoop,
        namespace: str | None = None,
        labels: tuple[selectors.Requirement, ...] = (),
        fields: tuple[selectors.Requirement, ...] = (),
    ) -> None:
        self.spec = spec
        self._store = objects
        self._loop = loop
        self._namespace = namespace if spec.namespaced else None
        self._labels = labels
        self._fields = fields
        self._queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self._closed = False
        self.silent = False
        """A half-open connection: the stream stays open and delivers nothing more."""

    def _matches(self, obj: store.Obj | None) -> bool:
        if obj is None:
            return False
        if self._namespace is not None and obj["metadata"].get("namespace") != self._namespace:
            return False
        return selectors.matches(obj, self._labels, self._fields)

    def _translate(self, kind: str, obj: store.Obj, old: store.Obj | None) -> str | None:
        now, before = self._matches(obj), self._matches(old)
        if kind == "MODIFIED":
            if now and before:
                return "MODIFIED"
            return "ADDED" if now else "DELETED" if before else None
        if kind == "DELETED":
            return "DELETED" if now or before else None
        return kind if now else None

    def _on_change(self, rv: int, spec: resources.ResourceSpec, kind: str, obj: store.Obj,
                   old: store.Obj | None) -> None:
        if spec.key != self.spec.key:
            return
        event_type = self._translate(kind, obj, old)
        if event_type is not None:
            self._loop.call_soon_threadsafe(self._put, {"type": event_type, "object": obj})

    def _put(self, event: dict[str, Any]) -> None:
        if not self._closed and not self.silent:
            self._queue.put_nowait(event)

    def start(self, since: str | None, *, send_initial_events: bool = False) -> None:
        """Subscribe and queue the replay; must run in the watch's event loop."""
        with self._store.lock:
            self._store.subscribe(self._on_change)
            if not since or since == "0" or send_initial_events:
                items, rv = self._store.list(self.spec, self._namespace, self._labels,
                                             self._fields)
                for obj in items:
                    self._queue.put_nowait({"type": "ADDED", "object": obj})
                if send_initial_events:
                    self._queue.put_nowait({"type": "BOOKMARK", "object": {
                        "kind": self.spec.kind, "apiVersion": self.spec.api_version,
                        "metadata": {"resourceVersion": str(rv), "annotations": {
                            "k8s.io/initial-events-end": "true"}}}})
                return
            try:
                since_rv = int(since)
            except ValueError:
                since_rv = -1
            history = self._store.history_since(self.spec, since_rv) if since_rv >= 0 else None
            if history is None:
                self._queue.put_nowait({"type": "ERROR", "object": {
                    "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                    "message": f"too old resource version: {since} "
                               f"({self._store.resource_version})",
                    "reason": "Expired", "code": 410}})
                self._queue.put_nowait(_CLOSE)
                return
            for _, _, kind, obj, old in history:
                event_type = self._translate(kind, obj, old)
                if event_type is not None:
                    self._queue.put_nowait({"type": event_type, "object": obj})

    def close(self) -> None:
        """End the stream (thread-safe); the client sees a clean end of the response."""
        self._store.unsubscribe(self._on_change)
        self._loop.call_soon_threadsafe(self._queue.put_nowait, _CLOSE)

    async def events(self, timeout: float | None) -> AsyncIterator[dict[str, Any]]:
        """Yield events until closed or `timeout` seconds pass."""
        deadline = None if timeout is None else time.monotonic() + timeout
        try:
            while True:
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    return
                try:
                    event = await asyncio.wait_for(self._queue.get(), remaining)
                except TimeoutError:
                    return
                if event is _CLOSE:
                    return
                yield event
        finally:
            self._closed = True
            self._store.unsubscribe(self._on_change)


class WatchHub:
    """The open watches, so that tests can drop them all at once."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._watches: set[Watch] = set()

    def add(self, watch: Watch) -> None:
        """Track an open watch."""
        with self._lock:
            self._watches.add(watch)

    def discard(self, watch: Watch) -> None:
        """Forget a watch whose stream ended."""
        with self._lock:
            self._watches.discard(watch)

    def count(self, spec: resources.ResourceSpec | None = None) -> int:
        """How many watches are open (of one kind, or of all kinds)."""
        with self._lock:
            return sum(1 for w in self._watches if spec is None or w.spec.key == spec.key)

    def silence(self, spec: resources.ResourceSpec | None = None) -> int:
        """Make the open watches (of one kind, or all) go silent without ending: what a
        half-open connection does; watches opened later deliver. Returns how many."""
        with self._lock:
            victims = [w for w in self._watches if spec is None or w.spec.key == spec.key]
            for watch in victims:
                watch.silent = True
        return len(victims)

    def drop(self, spec: resources.ResourceSpec | None = None) -> int:
        """Close the open watches (of one kind, or all); returns how many were closed."""
        with self._lock:
            victims = [w for w in self._watches if spec is None or w.spec.key == spec.key]
            for watch in victims:
                self._watches.discard(watch)
        for watch in victims:
            watch.close()
        return len(victims)
