"""``sdk.watch.AssignmentWatch`` against a scripted API: how it paces itself when the
server keeps ending its watches."""

import threading
import time

from kooper.sdk import watch

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


def test_a_watch_that_expires_right_after_every_list_backs_off_between_relists():
    """A 410 on a watch resumed from an old version is relisted at once (the version was
    compacted: normal). A 410 on the watch that follows a fresh list says the next list
    will not help either: relisting at once made a tight loop of list and watch requests
    (thousands a second) against a server that answers so."""
    api = AlwaysGone(lists=5)
    follower = watch.AssignmentWatch(api=api, namespace="ns", name="kooper-w-0",
                                     on_change=lambda: None, reread_interval_s=3600)
    follower.start()
    try:
        assert api.enough.wait(30)
    finally:
        follower.stop()
    gaps = [b - a for a, b in zip(api.listed, api.listed[1:], strict=False)][:4]
    assert min(gaps) >= watch.BACKOFF_MIN_S * 0.9, gaps
    assert gaps[-1] > gaps[0], gaps  # and the wait grows
    assert follower.expired >= 4
