"""Follow the member ConfigMap ``kooper-<pod>`` with a Kubernetes list + watch.

The reflector pattern, for one object, on a thread of its own:

1. *list*: ``GET .../configmaps?fieldSelector=metadata.name=kooper-<pod>`` gives
   the object (or none) and the collection's ``resourceVersion``;
2. *watch* from that version (``watch=1``, ``allowWatchBookmarks``,
   ``timeoutSeconds``): every ADDED/MODIFIED/DELETED is handed over at once, and
   bookmarks move the version forward without an object;
3. when the server ends the stream (its timeout), watch again from the last
   version seen: nothing is missed and nothing is listed again;
4. on ``410 Gone`` (the version was compacted), *relist* at once; on a broken
   connection or any other error, wait (exponential backoff, capped) and relist:
   after a failure we cannot know what we missed, and one object is cheap to read.
   A 410 on the watch right after a list, before any event, backs off too (a watch
   cache behind its lists, a misbehaving proxy: relisting at once would spin).

Only the latest object matters (each assignment replaces the previous one and the
session ignores older generations), so the hand-over is a one-slot mailbox plus a
wake-up call; the worker's main loop takes it from there.

A second thread re-reads the object every ``reread_interval_s`` (a plain GET, into a
slot of its own) in case the watch went silent without failing (a half-open
connection). It is a thread, not a step of the worker's main loop, because a request
to an unreachable server blocks for its whole timeout: the main loop must never wait
on the network, or a partitioned member would fence late (found by the kind drill of
a partitioned node, e2e/test_node_failure.py).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from kooper.sdk import apierrors, kube

logger = logging.getLogger("kooper.worker")

BACKOFF_MIN_S = 0.1
BACKOFF_MAX_S = 5.0
GONE = 410


class AssignmentWatch:
    """The latest version of one ConfigMap, kept fresh by a watch on its own thread."""

    def __init__(
        self,
        *,
        api: kube.Api,
        namespace: str,
        name: str,
        on_change: Callable[[], None],
        timeout_s: float = 300.0,
        reread_interval_s: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.api = api
        self.namespace = namespace
        self.name = name
        self.timeout_s = timeout_s
        self.reread_interval_s = reread_interval_s
        self._on_change = on_change
        self._clock = clock
        self._lock = threading.Lock()
        self._latest: dict[str, Any] | None = None
        self._sequence = 0
        self._reread: dict[str, Any] | None = None
        self._reread_sequence = 0
        self._stream: kube.WatchStream | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._reread_thread: threading.Thread | None = None
        self.lists = 0
        """Lists made so far (the first one, then one per relist)."""
        self.watches = 0
        """Watch requests opened so far."""
        self.expired = 0
        """Watches the server ended with 410 Gone (each followed by a relist)."""
        self.last_error = ""
        self.failures = 0
        """Watches (or lists) that failed, each followed by a backoff and a relist
        (``kooper_worker_assignment_watch_failures_total``)."""
        self.rereads = 0
        """Re-reads that answered (found or not found)."""

    # --- the consumer's side -------------------------------------------------------

    def latest(self) -> tuple[int, dict[str, Any] | None]:
        """``(sequence, object)``: the object last seen (None: absent) and a counter that
        grows with each delivery (0: nothing delivered yet)."""
        with self._lock:
            return self._sequence, self._latest

    def reread(self) -> tuple[int, dict[str, Any] | None]:
        """``(sequence, object)`` as ``latest``, from the periodic re-read (0: none yet)."""
        with self._lock:
            return self._reread_sequence, self._reread

    def start(self) -> None:
        """List, then watch, until ``stop``; re-read every ``reread_interval_s`` meanwhile."""
        self._thread = threading.Thread(target=self._loop, name="kooper-watch", daemon=True)
        self._thread.start()
        self._reread_thread = threading.Thread(
            target=self._reread_loop, name="kooper-reread", daemon=True
        )
        self._reread_thread.start()

    def reread_once(self) -> bool:
        """One GET of the object into the re-read slot (a 404 delivers "absent");
        ``False`` when the server could not answer."""
        path = kube.configmap_path(self.namespace, self.name)
        try:
            obj: dict[str, Any] | None = self.api.get(path)
        except apierrors.NotFound:
            obj = None
        except apierrors.ApiError as exc:
            logger.warning("cannot re-read the assignment: %s", exc)
            return False
        with self._lock:
            self._reread = obj
            self._reread_sequence += 1
            self.rereads += 1
        self._on_change()
        return True

    def stop(self) -> None:
        """End the watch and its thread (a blocked read is interrupted)."""
        self._stop.set()
        with self._lock:
            stream = self._stream
        if stream is not None:
            stream.close()
        for thread in (self._thread, self._reread_thread):
            if thread is not None:
                thread.join(timeout=self.api.timeout_s + 1)

    # --- the threads ---------------------------------------------------------------

    def _reread_loop(self) -> None:
        while not self._stop.wait(self.reread_interval_s):
            self.reread_once()

    def _loop(self) -> None:
        backoff = BACKOFF_MIN_S
        version: str | None = None
        while not self._stop.is_set():
            try:
                listed = version is None
                if version is None:
                    version = self._list()
                opened = self._clock()
                version, events = self._follow(version)
                expired_at_once = version is None and listed and events <= 1
                if expired_at_once or (
                        version is not None and events == 0 and self._clock() - opened < 1.0):
                    # The server ended an empty stream at once, or expired (410) the version
                    # its list had just given before anything else: the next list would be
                    # answered the same. Do not spin on it.
                    self._stop.wait(backoff)
                    backoff = min(backoff * 2, BACKOFF_MAX_S)
                else:
                    backoff = BACKOFF_MIN_S
            except Exception as exc:
                # ApiError is the expected failure; anything else is a bug, but a dead
                # watch thread would silently slow every assignment down to the resync.
                if self._stop.is_set():
                    return
                self.last_error = str(exc)
                self.failures += 1
                # A 429's Retry-After (capped by ``wire``) is the least the server asks for.
                asked = exc.retry_after_s if isinstance(exc, apierrors.ApiError) else None
                wait = max(backoff, asked or 0.0)
                if isinstance(exc, apierrors.ApiError):
                    logger.warning("assignment watch failed (retry in %.1fs): %s", wait, exc)
                else:
                    logger.exception("assignment watch crashed (retry in %.1fs)", wait)
                version = None
                self._stop.wait(wait)
                backoff = min(backoff * 2, BACKOFF_MAX_S)

    def _selector(self) -> dict[str, str]:
        return {"fieldSelector": f"metadata.name={self.name}"}

    def _list(self) -> str:
        answer = self.api.get(kube.configmap_path(self.namespace), query=self._selector())
        self.lists += 1
        items = [item for item in answer.get("items") or [] if isinstance(item, dict)]
        self._deliver(items[0] if items else None)
        return str((answer.get("metadata") or {}).get("resourceVersion", ""))

    def _follow(self, version: str) -> tuple[str | None, int]:
        """Watch from ``version``: the version to resume from (None: relist) and the count
        of events seen."""
        query = {
            **self._selector(),
            "allowWatchBookmarks": "true",
            "timeoutSeconds": str(max(1, int(self.timeout_s))),
        }
        if version:
            query["resourceVersion"] = version
        stream = self.api.watch(
            kube.configmap_path(self.namespace),
            query=query,
            read_timeout_s=self.timeout_s + self.api.timeout_s,
        )
        self.watches += 1
        with self._lock:
            self._stream = stream
        if self._stop.is_set():
            stream.close()
        seen = 0
        try:
            for event in stream:
                seen += 1
                kind = event.get("type")
                obj = event.get("object")
                if not isinstance(obj, dict):
                    continue
                if kind == "ERROR":
                    self._raise_unless_gone(obj)
                    return None, seen
                if kind in ("ADDED", "MODIFIED"):
                    self._deliver(obj)
                elif kind == "DELETED":
                    self._deliver(None)
                version = _version_of(obj) or version
        finally:
            with self._lock:
                self._stream = None
        return version, seen

    def _raise_unless_gone(self, status: Mapping[str, Any]) -> None:
        code = status.get("code")
        message = str(status.get("message", ""))
        if code == GONE:
            # Our version was compacted away: a fresh list tells us where we are.
            logger.info("assignment watch expired (%s): relisting", message)
            self.expired += 1
            return
        raise apierrors.error_for(int(code or 0), f"watch error {code}: {message}",
                                  reason=str(status.get("reason", "")))

    def _deliver(self, obj: dict[str, Any] | None) -> None:
        with self._lock:
            self._latest = obj
            self._sequence += 1
        self._on_change()


def _version_of(obj: Mapping[str, Any]) -> str:
    metadata = obj.get("metadata")
    return str(metadata.get("resourceVersion", "")) if isinstance(metadata, Mapping) else ""
