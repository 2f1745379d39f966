"""``sdk.watch.AssignmentWatch`` against a scripted API: how it paces itself when the
server keeps ending its watches."""

import threading
import time
from typing import Any

from kooper.sdk import apierrors, watch

GONE = {"type": "ERROR", "object": {"kind": "Status", "apiVersion": "v1", "status": "Failure",
                                    "code": 410, "reason": "Expired",
                                    "message": "too old resource version: 7 (9)"}}


class Stream:
    def __init__(self, events):
        self._events = events

    def __iter__(self):
        return iter(self._events)

    def close(self):
        pass


class AlwaysGone:
    """An API server whose every watch, even from the version its list just gave, ends
    at once with 410 Gone (a watch cache behind its lists, a misbehaving proxy)."""

    timeout_s = 1.0

    def __init__(self, lists: int) -> None:
        self.listed: list[float] = []
        self.enough = threading.Event()
        self._lists = lists

    def get(self, path, *, query=None):
        self.listed.append(time.monotonic())
        if len(self.listed) >= self._lists:
            self.enough.set()
        return {"metadata": {"resourceVersion": "7"}, "items": []}

    def watch(self, path, *, query, read_timeout_s):
        return Stream([GONE])


def follow_until_enough(api: Any) -> watch.AssignmentWatch:
    """Run a member's assignment watch against ``api`` until ``api.enough`` is set."""
    follower = watch.AssignmentWatch(api=api, namespace="ns", name="kooper-w-0",
                                     on_change=lambda: None, reread_interval_s=3600)
    follower.start()
    try:
        assert api.enough.wait(30)
    finally:
        follower.stop()
    return follower


def test_a_watch_that_expires_right_after_every_list_backs_off_between_relists():
    """A 410 on a watch resumed from an old version is relisted at once (the version was
    compacted: normal). A 410 on the watch that follows a fresh list says the next list
    will not help either: relisting at once made a tight loop of list and watch requests
    (thousands a second) against a server that answers so."""
    api = AlwaysGone(lists=5)
    follower = follow_until_enough(api)
    gaps = [b - a for a, b in zip(api.listed, api.listed[1:], strict=False)][:4]
    # The waits double from BACKOFF_MIN_S (lower bounds only: a loaded machine stretches
    # a wait, never shortens one).
    assert all(gap >= watch.BACKOFF_MIN_S * 2 ** n * 0.9 for n, gap in enumerate(gaps)), gaps
    assert follower.expired >= 4


class Throttled:
    """An API server whose priority and fairness refuses every watch: 429, Retry-After."""

    timeout_s = 1.0

    def __init__(self, retry_after_s: float, watches: int) -> None:
        self.retry_after_s = retry_after_s
        self.watched: list[float] = []
        self.enough = threading.Event()
        self._watches = watches

    def get(self, path, *, query=None):
        return {"metadata": {"resourceVersion": "7"}, "items": []}

    def watch(self, path, *, query, read_timeout_s):
        self.watched.append(time.monotonic())
        if len(self.watched) >= self._watches:
            self.enough.set()
        raise apierrors.TooManyRequests("WATCH configmaps: 429 Too many requests",
                                        status=429, retry_after_s=self.retry_after_s)


def test_a_throttled_watch_waits_what_the_server_asks_before_it_tries_again():
    """The watch's own backoff starts at 0.1 s: a 429 saying Retry-After 1 was answered
    by four more watches within that second."""
    api = Throttled(retry_after_s=0.5, watches=3)
    follower = follow_until_enough(api)
    gaps = [b - a for a, b in zip(api.watched, api.watched[1:], strict=False)]
    assert min(gaps) >= 0.5 * 0.9, gaps
    assert follower.failures >= 3  # kooper_worker_assignment_watch_failures_total
