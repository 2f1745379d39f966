"""The member Lease ``kooper-<pod>``: created, renewed with the report, released.

The keeper runs on a thread of its own and never waits on user code, so a slow
callback cannot make the member miss its renewals. It writes the latest encoded
report in the same merge patch as each renewal, and at once when the session
publishes a new one.
"""

from __future__ import annotations

import contextlib
import datetime
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from kooper.protocol import messages
from kooper.sdk import apierrors, kube
from kooper.sdk import identity as sdk_identity
from kooper.sdk import settings as sdk_settings

logger = logging.getLogger("kooper.worker")

MEMBER_LABEL = "kooper.dev/member"
"""The Lease label that names the member (the operator selects Leases by it)."""


def micro_time(epoch_s: float) -> str:
    """A Kubernetes ``MicroTime`` (``2024-01-01T00:00:00.000000Z``)."""
    moment = datetime.datetime.fromtimestamp(epoch_s, tz=datetime.UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaseKeeper:
    """Creates, renews (with the report) and releases the member Lease, on its own thread."""

    def __init__(
        self,
        *,
        api: kube.Api,
        identity: sdk_identity.Identity,
        incarnation: str,
        settings: sdk_settings.Settings,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
        on_renewed: Callable[[], None] = lambda: None,
    ) -> None:
        self.api = api
        self.identity = identity
        self.holder = f"{identity.pod}/{incarnation}"
        self.settings = settings
        self._clock = clock
        self._wall = wall
        self._on_renewed = on_renewed
        self._lock = threading.Lock()
        self._report = ""
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.last_renewed: float | None = None
        """Monotonic time the last successful write was *sent* (conservative for fencing)."""
        self.last_error = ""
        self.renewals = self.renewal_failures = 0  # worker metrics

    def publish(self, report_text: str) -> None:
        """Make ``report_text`` the report to write, and write it soon."""
        with self._lock:
            self._report = report_text
        self._wake.set()

    def acquire(self, owner_uid: str) -> None:
        """Create the Lease, or take it over from a previous incarnation of this pod."""
        now = self._wall()
        with self._lock:
            report = self._report
        body = {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {
                "name": self.identity.lease_name,
                "labels": {MEMBER_LABEL: self.identity.pod},
                "annotations": {messages.REPORT_ANNOTATION: report},
                "ownerReferences": [
                    {"apiVersion": "v1", "kind": "Pod", "name": self.identity.pod, "uid": owner_uid}
                ],
            },
            "spec": {
                "holderIdentity": self.holder,
                "leaseDurationSeconds": self.settings.lease_duration_s,
                "acquireTime": micro_time(now),
                "renewTime": micro_time(now),
            },
        }
        sent = self._clock()
        try:
            self.api.create(kube.lease_path(self.identity.namespace), body)
        except apierrors.ApiError as exc:
            if exc.status != 409:
                raise
            # A previous incarnation of this pod (a container restart) left its Lease.
            patch = {"metadata": body["metadata"], "spec": body["spec"]}
            self.api.merge_patch(
                kube.lease_path(self.identity.namespace, self.identity.lease_name), patch
            )
        self.last_renewed = sent

    def start(self, owner_uid: str) -> None:
        """Renew in the background until ``stop``."""
        self._thread = threading.Thread(
            target=self._loop, args=(owner_uid,), name="kooper-lease", daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        """Stop renewing (the Lease stays until ``release``)."""
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=self.api.timeout_s + 1)

    def release(self) -> None:
        """Delete the Lease (gone already is fine)."""
        with contextlib.suppress(apierrors.NotFound):
            self.api.delete(kube.lease_path(self.identity.namespace, self.identity.lease_name))

    def renew(self, owner_uid: str) -> bool:
        """One renewal with the current report; recreates a Lease someone deleted."""
        with self._lock:
            report = self._report
        sent = self._clock()
        patch: dict[str, Any] = {
            "metadata": {"annotations": {messages.REPORT_ANNOTATION: report}},
            "spec": {
                "holderIdentity": self.holder,
                "leaseDurationSeconds": self.settings.lease_duration_s,
                "renewTime": micro_time(self._wall()),
            },
        }
        try:
            try:
                self.api.merge_patch(
                    kube.lease_path(self.identity.namespace, self.identity.lease_name), patch
                )
            except apierrors.NotFound:
                self.acquire(owner_uid)
        except apierrors.ApiError as exc:
            self.last_error = str(exc)
            self.renewal_failures += 1
            logger.warning("lease renewal failed: %s", exc)
            return False
        self.last_error = ""
        self.last_renewed = sent
        self.renewals += 1
        self._on_renewed()
        return True

    def _loop(self, owner_uid: str) -> None:
        next_renewal = self._clock() + self.settings.renew_interval_s
        while not self._stop.is_set():
            self._wake.wait(timeout=max(0.0, next_renewal - self._clock()))
            if self._stop.is_set():
                return
            self._wake.clear()
            sent = self._clock()
            ok = self.renew(owner_uid)
            # After a failure, retry sooner than a full period: the lease is running out.
            interval = self.settings.renew_interval_s if ok else min(
                self.settings.renew_interval_s, 1.0
            )
            # From when this renewal was *sent*, as the fencing budget counts: timed from
            # its answer, a slow API (latency L) would space renewals interval + L apart
            # while the worker fences interval + 2L after the last one it sent.
            next_renewal = sent + interval
