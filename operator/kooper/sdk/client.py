"""The blocking transport: moves bytes between the API server and a ``Session``.

Two threads, one owner each:

* the **lease keeper** owns the Lease ``kooper-<pod>``: it creates it (owned by
  the Pod, ``holderIdentity`` ``<pod>/<incarnation>``), renews it every
  ``renew_interval_s`` and writes the latest encoded report in the same merge
  patch, at once when the session publishes a new one. It never blocks on user
  code, so a slow callback cannot make the member miss its renewals;
* the **main loop** owns the session: it polls the ConfigMap ``kooper-<pod>``,
  feeds assignments, renewals and time to the session, and runs the actions it
  returns. Start and stop callbacks of one batch run concurrently on a thread
  pool, each bounded by ``callback_timeout_s``: a slow or failing callback is
  reported in ``Report.failed``, never silently swallowed.

``run(stop)`` returns after ``stop`` is set and the member left: every resource
stopped, an empty report written, the Lease deleted.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import datetime
import logging
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from kooper.core import errors, events, model
from kooper.protocol import codec, member, messages
from kooper.sdk import identity as sdk_identity
from kooper.sdk import kube
from kooper.sdk import session as sdk_session

logger = logging.getLogger("kooper.worker")

OnAssigned = Callable[[str, Mapping[str, str], int], None]
"""``on_assigned(resource, config, epoch)``: start running ``resource``."""
OnStopped = Callable[[str], None]
"""``on_revoked(resource)`` / ``on_lost(resource)``: stop it (lost: do not commit progress)."""

MEMBER_LABEL = "kooper.dev/member"
BOTH_PROTOCOLS = frozenset({model.Protocol.EAGER, model.Protocol.COMPATIBLE})


@dataclasses.dataclass(frozen=True, slots=True)
class Settings:
    """Timing and protocol settings of one worker."""

    lease_duration_s: int = 30
    """``leaseDurationSeconds``: unrenewed this long, the member fences itself."""
    renew_interval_s: float = 10.0
    """How often the Lease is renewed (and the report rewritten)."""
    poll_interval_s: float = 0.5
    """How often the ConfigMap is read for a new assignment."""
    callback_timeout_s: float = 30.0
    """Longest a single start or stop callback may take before it is reported failed."""
    protocols: frozenset[model.Protocol] = BOTH_PROTOCOLS
    """The protocols this worker advertises (``{EAGER}`` models an old worker)."""
    max_parallel_callbacks: int = 16
    """Callbacks of one batch that run at the same time."""


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
        settings: Settings,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self.api = api
        self.identity = identity
        self.holder = f"{identity.pod}/{incarnation}"
        self.settings = settings
        self._clock = clock
        self._wall = wall
        self._lock = threading.Lock()
        self._report = ""
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.last_renewed: float | None = None
        """Monotonic time the last successful write was *sent* (conservative for fencing)."""
        self.last_error = ""

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
        except kube.ApiError as exc:
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
        try:
            self.api.delete(kube.lease_path(self.identity.namespace, self.identity.lease_name))
        except kube.ApiError as exc:
            if exc.status != 404:
                raise

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
            except kube.ApiError as exc:
                if exc.status != 404:
                    raise
                self.acquire(owner_uid)
        except kube.ApiError as exc:
            self.last_error = str(exc)
            logger.warning("lease renewal failed: %s", exc)
            return False
        self.last_error = ""
        self.last_renewed = sent
        return True

    def _loop(self, owner_uid: str) -> None:
        next_renewal = self._clock() + self.settings.renew_interval_s
        while not self._stop.is_set():
            self._wake.wait(timeout=max(0.0, next_renewal - self._clock()))
            if self._stop.is_set():
                return
            self._wake.clear()
            ok = self.renew(owner_uid)
            # After a failure, retry sooner than a full period: the lease is running out.
            interval = self.settings.renew_interval_s if ok else min(
                self.settings.renew_interval_s, 1.0
            )
            next_renewal = self._clock() + interval


class Worker:
    """A member of a worker group: the session, the Lease and the user's callbacks."""

    def __init__(
        self,
        *,
        api: kube.Api,
        identity: sdk_identity.Identity,
        on_assigned: OnAssigned,
        on_revoked: OnStopped,
        on_lost: OnStopped,
        settings: Settings | None = None,
        on_event: Callable[[events.Event], None] | None = None,
        run_id: str = "",
        incarnation: str | None = None,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self.api = api
        self.identity = identity
        self.settings = settings or Settings()
        self.incarnation = incarnation or uuid.uuid4().hex[:8]
        self.run_id = run_id
        self._on_assigned = on_assigned
        self._on_revoked = on_revoked
        self._on_lost = on_lost
        self._on_event = on_event
        self._clock = clock
        self._wall = wall
        self.session = sdk_session.Session(
            member_name=identity.pod,
            incarnation=self.incarnation,
            protocols=self.settings.protocols,
            lease_duration_ms=self.settings.lease_duration_s * 1000,
        )
        self.keeper = LeaseKeeper(
            api=api,
            identity=identity,
            incarnation=self.incarnation,
            settings=self.settings,
            clock=clock,
            wall=wall,
        )
        self._pool = concurrent.futures.ThreadPoolExecutor(
            max_workers=self.settings.max_parallel_callbacks, thread_name_prefix="kooper-callback"
        )
        self._configmap_version = ""
        self._seen_renewal: float | None = None
        self._epochs: dict[str, int] = {}
        self._owner = identity.uid
        self._last_loop = clock()

    # --- health -------------------------------------------------------------------

    @property
    def live(self) -> bool:
        """The main loop is turning (not wedged in a callback past every timeout)."""
        budget = 2 * self.settings.callback_timeout_s + 5 * self.settings.poll_interval_s + 5
        return self._clock() - self._last_loop < budget

    @property
    def ready(self) -> bool:
        """Joined, holding a fresh Lease, not fenced."""
        return self.session.state in member.LIVE_STATES and not self.session.report().fenced

    # --- the loop -----------------------------------------------------------------

    def run(self, stop: threading.Event) -> None:
        """Join, serve assignments until ``stop`` is set, then leave gracefully."""
        owner_uid = self._owner = self._owner_uid()
        self.keeper.publish(codec.encode_report(self.session.report()))
        while True:
            try:
                self.keeper.acquire(owner_uid)
                break
            except kube.ApiError as exc:
                logger.warning("cannot create the Lease yet: %s", exc)
                if stop.wait(min(self.settings.renew_interval_s, 2.0)):
                    return
        self.session.join(self._now_ms())
        self._seen_renewal = self.keeper.last_renewed
        logger.info("joined as %s", self.keeper.holder)
        self.keeper.start(owner_uid)
        try:
            while not stop.is_set():
                self.step()
                stop.wait(self.settings.poll_interval_s)
        finally:
            self.leave()

    def step(self) -> None:
        """One turn: renewals and time into the session, read the assignment, run actions."""
        self._last_loop = self._clock()
        renewed = self.keeper.last_renewed
        if renewed is not None and renewed != self._seen_renewal:
            self._seen_renewal = renewed
            self.session.lease_renewed(int(renewed * 1000))
        self.session.tick(self._now_ms())
        if member.accepts_assignments(self.session.state):
            self._poll_assignment()
        self._run_actions()

    def leave(self) -> None:
        """Stop everything (on_revoked), report owning nothing, delete the Lease."""
        self.session.terminate()
        self._run_actions()
        self.keeper.stop()
        self._pool.shutdown(wait=False, cancel_futures=True)
        logger.info("left: %s", self.session.state.value)

    # --- internals ----------------------------------------------------------------

    def _now_ms(self) -> int:
        return int(self._clock() * 1000)

    def _owner_uid(self) -> str:
        if self.identity.uid:
            return self.identity.uid
        try:
            pod = self.api.get(kube.pod_path(self.identity.namespace, self.identity.pod))
        except kube.ApiError as exc:
            raise sdk_identity.IdentityError(
                f"cannot read pod {self.identity.namespace}/{self.identity.pod} for its uid "
                f"(set POD_UID from the Downward API, fieldRef metadata.uid): {exc}"
            ) from exc
        return str(pod.get("metadata", {}).get("uid", ""))

    def _poll_assignment(self) -> None:
        path = kube.configmap_path(self.identity.namespace, self.identity.configmap_name)
        try:
            configmap = self.api.get(path)
        except kube.ApiError as exc:
            if exc.status != 404:
                logger.warning("cannot read the assignment: %s", exc)
            return
        version = str(configmap.get("metadata", {}).get("resourceVersion", ""))
        if version and version == self._configmap_version:
            return
        self._configmap_version = version
        text = (configmap.get("data") or {}).get(messages.CONFIGMAP_KEY)
        if not isinstance(text, str):
            return
        try:
            assignment = codec.decode_assignment(text)
            accepted = self.session.receive_assignment(assignment)
        except errors.RemoteProtocolError as exc:
            logger.error("ignoring a malformed assignment: %s", exc)
            return
        if accepted:
            logger.info(
                "generation %d (%s): %d assigned, %d revoked",
                assignment.generation,
                assignment.protocol,
                len(assignment.assigned),
                len(assignment.revoked),
            )

    def _run_actions(self) -> None:
        while batch := self.session.next_actions():
            callbacks = [a for a in batch if isinstance(a, sdk_session.Start | sdk_session.Stop)]
            if callbacks:
                self._run_callbacks(callbacks)
            for action in batch:
                if isinstance(action, sdk_session.WriteReport):
                    self.keeper.publish(codec.encode_report(action.report))
                    if self.session.state is member.MemberState.LEAVING:
                        # Written now, not by the keeper: the Lease is about to go.
                        self.keeper.renew(self._owner)
                    self.session.done(action)
                elif isinstance(action, sdk_session.ReleaseLease):
                    self.keeper.stop()
                    error = None
                    try:
                        self.keeper.release()
                    except kube.ApiError as exc:
                        error = str(exc)
                        logger.warning("cannot delete the Lease: %s", exc)
                    self.session.done(action, error=error)

    def _run_callbacks(self, batch: list[sdk_session.Start | sdk_session.Stop]) -> None:
        futures: list[tuple[sdk_session.Start | sdk_session.Stop, str, Any]] = []
        for action in batch:
            if isinstance(action, sdk_session.Start):
                name = "on_assigned"
                future = self._pool.submit(
                    self._on_assigned, action.resource, action.config, action.epoch
                )
            else:
                name = "on_lost" if action.lost else "on_revoked"
                callback = self._on_lost if action.lost else self._on_revoked
                future = self._pool.submit(callback, action.resource)
            futures.append((action, name, future))
        deadline = self._clock() + self.settings.callback_timeout_s
        for action, name, future in futures:
            error = None
            try:
                future.result(timeout=max(0.0, deadline - self._clock()))
            except concurrent.futures.TimeoutError:
                error = f"{name} timed out after {self.settings.callback_timeout_s:g}s"
            except Exception as exc:  # user code: report whatever it raised
                error = f"{name} raised {type(exc).__name__}: {exc}"
            if error is not None:
                logger.error("%s(%s): %s", name, action.resource, error)
            self._emit(action, error)
            self.session.done(action, error=error)

    def _emit(self, action: sdk_session.Start | sdk_session.Stop, error: str | None) -> None:
        if isinstance(action, sdk_session.Start):
            if error is not None:
                return
            self._epochs[action.resource] = action.epoch
            kind, epoch = events.Kind.START, action.epoch
        else:
            # A failed stop still counts as stopped (abandoned): the log says so too.
            kind, epoch = events.Kind.STOP, self._epochs.pop(action.resource, -1)
        if self._on_event is None:
            return
        assignment = self.session.assignment
        self._on_event(
            events.Event(
                ts_ms=int(self._wall() * 1000),
                run=self.run_id,
                group=assignment.group if assignment else "",
                member=self.identity.pod,
                resource=action.resource,
                event=kind,
                generation=action.generation,
                epoch=epoch,
                protocol=str(action.protocol),
                policy=assignment.policy if assignment else "",
            )
        )
