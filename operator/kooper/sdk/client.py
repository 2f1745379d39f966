"""The blocking transport: moves bytes between the API server and a ``Session``.

Five threads, one owner each:

* the **lease keeper** (``sdk.lease``) owns the Lease ``kooper-<pod>``: it
  creates it, renews it every ``renew_interval_s`` and writes the latest report
  in the same patch. It never blocks on user code;
* the **assignment watch** (``sdk.watch``) follows the ConfigMap ``kooper-<pod>``
  with a list + watch and wakes the main loop the moment it changes;
* the **assignment watch** also re-reads the ConfigMap every ``resync_interval_s``
  on a thread of its own, a safety net under the watch;
* the **main loop** owns the session: it feeds it assignments (from the watch and
  the re-read), renewals and time, and runs the actions it returns. It never waits
  on the network while it serves (a request to a partitioned API server blocks for
  its timeout, and the fence must not wait for it) nor on a callback;
* two **pools** run the user's callbacks, one for stops so that a fenced member's
  stops never queue behind hung starts. The main loop never waits on a callback:
  it hands each one to a pool and goes on turning (renewals, the fencing
  deadline, new assignments), settling callbacks as they end. A start is bounded
  by ``callback_timeout_s``: a slow or failing one is reported in
  ``Report.failed``; it keeps its thread (threads cannot be killed), and when it
  finally returns the worker stops what it started with ``on_lost``, because the
  member never owned it. A stop is bounded by the stop timeout of the timing
  budget: one still running past it **ends the process** (exit status
  ``STUCK_EXIT_CODE``, the pod restarts) instead of leaving the task running
  with nobody owning it; so does anything still running when the Lease may be
  about to expire (``Session``'s ``Exit``).

``run(stop)`` returns after ``stop`` is set and the member left: every resource
stopped, an empty report written, the Lease deleted.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import functools
import logging
import os
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from typing import Any, NoReturn

from kooper.core import errors, events
from kooper.protocol import codec, member, messages
from kooper.sdk import apierrors, kube, lease
from kooper.sdk import identity as sdk_identity
from kooper.sdk import metrics as sdk_metrics
from kooper.sdk import session as sdk_session
from kooper.sdk import settings as sdk_settings
from kooper.sdk import watch as sdk_watch

logger = logging.getLogger("kooper.worker")

OnAssigned = Callable[[str, Mapping[str, str], int], None]
"""``on_assigned(resource, config, epoch)``: start running ``resource``."""
OnStopped = Callable[[str], None]
"""``on_revoked(resource)`` / ``on_lost(resource)``: stop it (lost: do not commit progress).
Also the shape of ``on_paused(resource)`` / ``on_resumed(resource)``."""

Settings = sdk_settings.Settings
MEMBER_LABEL = lease.MEMBER_LABEL
BOTH_PROTOCOLS = sdk_settings.BOTH_PROTOCOLS
LeaseKeeper = lease.LeaseKeeper
micro_time = lease.micro_time

ACCEPTED_KEPT = 64
"""Generations whose acceptance time ``Worker.accepted_at`` keeps."""

STUCK_EXIT_CODE = 3
"""The worker process's exit status when it ends itself: a stop outlived its timeout, or
work was still running when the Lease may have been about to expire."""

_Callback = sdk_session.Start | sdk_session.Stop | sdk_session.Pause | sdk_session.Resume


class WorkerStuckError(errors.KooperError):
    """The process had to end (``Exit``) but the ``exit_process`` given to ``Worker``
    returned (a test double): ``run`` raises this instead of carrying on."""


@dataclasses.dataclass(slots=True)
class _Running:
    """A callback handed to a pool and not settled yet."""

    action: _Callback
    name: str
    future: concurrent.futures.Future[None]
    deadline: float
    timeout: float


def _nothing(resource: str) -> None:
    """The default ``on_paused`` / ``on_resumed``: a worker that cannot pause keeps going."""


class Worker:
    """A member of a worker group: the session, the Lease, the watch and the callbacks."""

    def __init__(
        self,
        *,
        api: kube.Api,
        identity: sdk_identity.Identity,
        on_assigned: OnAssigned,
        on_revoked: OnStopped,
        on_lost: OnStopped,
        on_paused: OnStopped = _nothing,
        on_resumed: OnStopped = _nothing,
        settings: sdk_settings.Settings | None = None,
        on_event: Callable[[events.Event], None] | None = None,
        run_id: str = "",
        incarnation: str | None = None,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
        exit_process: Callable[[int], object] = os._exit,
    ) -> None:
        """``exit_process`` ends the process (``os._exit``: no cleanup may wait on a hung
        callback thread); tests pass a recorder."""
        self.api = api
        self.identity = identity
        self.settings = settings or sdk_settings.Settings()
        self.incarnation = incarnation or uuid.uuid4().hex[:8]
        self.run_id = run_id
        self.metrics = sdk_metrics.WorkerMetrics()
        self._on_assigned = self.metrics.timed("on_assigned", on_assigned)
        self._on_revoked = self.metrics.timed("on_revoked", on_revoked)
        self._on_lost = self.metrics.timed("on_lost", on_lost)
        self._on_paused = self.metrics.counted("on_paused", on_paused)
        self._on_resumed = self.metrics.counted("on_resumed", on_resumed)
        self._on_event = on_event
        self._clock = clock
        self._wall = wall
        self._wake = threading.Event()
        self._exit_process = exit_process
        budget = self.settings.budget
        self.session = sdk_session.Session(
            member_name=identity.pod,
            incarnation=self.incarnation,
            protocols=self.settings.protocols,
            lease_duration_ms=round(budget.lease_duration_s * 1000),
            stop_timeout_ms=round(budget.stop_timeout_s * 1000),
            fence_margin_ms=round(budget.fence_margin_s * 1000),
        )
        self.keeper = lease.LeaseKeeper(
            api=api,
            identity=identity,
            incarnation=self.incarnation,
            settings=self.settings,
            clock=clock,
            wall=wall,
            on_renewed=self._wake.set,
        )
        self.watch = sdk_watch.AssignmentWatch(
            api=api,
            namespace=identity.namespace,
            name=identity.configmap_name,
            on_change=self._wake.set,
            timeout_s=self.settings.watch_timeout_s,
            reread_interval_s=self.settings.resync_interval_s,
            clock=clock,
        )
        self._pool = concurrent.futures.ThreadPoolExecutor(
            max_workers=self.settings.max_parallel_callbacks, thread_name_prefix="kooper-callback"
        )
        self._stop_pool = concurrent.futures.ThreadPoolExecutor(
            max_workers=self.settings.max_parallel_callbacks, thread_name_prefix="kooper-stop"
        )
        self._running: list[_Running] = []
        self._late_flips: dict[str, concurrent.futures.Future[None]] = {}
        """Pauses and resumes that outlived their timeout and may still run, by resource:
        the next callback of that resource begins once it returned."""
        self._dead = False
        self._ready = False
        """What ``ready`` answers: the main loop's view as of its last turn."""
        self._configmap_version = ""
        self._sequences = [0, 0]
        """The last sequence taken from the watch's two mailboxes (watch, re-read)."""
        self._seen_renewal: float | None = None
        self._epochs: dict[str, int] = {}
        self._owner = identity.uid
        self._last_loop = clock()
        self._late_lock = threading.Lock()
        self._late: list[tuple[sdk_session.Start, str | None]] = []
        self._crashes: list[tuple[str, str]] = []
        self._closed = False
        self.accepted_at: dict[int, float] = {}
        """Monotonic time each recent generation was accepted (latency measurements)."""

    # --- health -------------------------------------------------------------------

    @property
    def live(self) -> bool:
        """The main loop is turning (it never waits on a callback, so it is never wedged)."""
        budget = 2 * self.settings.callback_timeout_s + 5 * self.settings.tick_interval_s + 5
        return not self._dead and self._clock() - self._last_loop < budget

    @property
    def ready(self) -> bool:
        """Joined, holding a fresh Lease, not fenced (as of the main loop's last turn: the
        session is not thread-safe, and probes run on threads of their own)."""
        return self._ready

    def task_failed(self, resource: str, error: str | BaseException) -> None:
        """Report that ``resource`` died by itself (thread-safe: call it from task code).

        The worker stops counting it as running (no ``on_revoked``/``on_lost`` runs for
        it), reports it failed with ``error`` and a failure count, and starts it again
        only with a newer generation (the operator's restart).
        """
        if isinstance(error, BaseException):
            error = f"{type(error).__name__}: {error}"
        with self._late_lock:
            self._crashes.append((resource, error))
        self._wake.set()

    # --- the loop -----------------------------------------------------------------

    def run(self, stop: threading.Event) -> None:
        """Join, serve assignments until ``stop`` is set, then leave gracefully."""
        while True:
            try:
                self.join()
                break
            except apierrors.ApiError as exc:
                logger.warning("cannot create the Lease yet: %s", exc)
                if stop.wait(min(self.settings.renew_interval_s, 2.0)):
                    return
        self.keeper.start(self._owner)
        self.watch.start()
        # The loop sleeps on its wake-up event; this turns ``stop`` into one too.
        threading.Thread(
            target=self._wake_on, args=(stop,), name="kooper-stop", daemon=True
        ).start()
        try:
            while not stop.is_set():
                self._wake.clear()  # before step: a change during it wakes the next wait
                self.step()
                self._wake.wait(self._sleep_s())
        finally:
            if not self._dead:
                self.leave()

    def join(self) -> None:
        """Create the Lease (with an empty report) and join: the first half of ``run``.

        Raises ``ApiError`` when the Lease cannot be written. ``run`` then renews the
        Lease and turns ``step`` on a thread of its own; a test may call ``step`` itself.
        """
        owner_uid = self._owner = self._owner_uid()
        self.keeper.publish(codec.encode_report(self.session.report()))
        self.keeper.acquire(owner_uid)
        self.session.join(self._now_ms())
        self._seen_renewal = self.keeper.last_renewed
        logger.info("joined as %s", self.keeper.holder)

    def _wake_on(self, stop: threading.Event) -> None:
        stop.wait()
        self._wake.set()

    def step(self) -> None:
        """One turn, never blocking on a callback: renewals, time and finished or
        overdue callbacks into the session, read the assignment, start the actions."""
        self._last_loop = self._clock()
        self._feed_time()
        if member.accepts_assignments(self.session.state):
            for slot, mailbox in enumerate((self.watch.latest, self.watch.reread)):
                sequence, configmap = mailbox()
                if sequence != self._sequences[slot]:
                    self._sequences[slot] = sequence
                    if configmap is not None:
                        self._offer(configmap)
        self._run_actions()
        self.metrics.observe(self.session, self.keeper, self.watch)
        self._ready = self.session.state in member.LIVE_STATES and not self.session.fenced

    def leave(self) -> None:
        """Stop everything (on_revoked), report owning nothing, delete the Lease."""
        self._ready = False
        self.watch.stop()
        self._take_late_returns()
        self.session.terminate()
        while True:
            self._wake.clear()
            self._feed_time()
            self._run_actions()
            if self.session.state is member.MemberState.LEFT:
                break
            self._wake.wait(self._sleep_s())
        self.keeper.stop()
        with self._late_lock:
            self._closed = True
            late, self._late = self._late, []
        for action, error in late:
            self._stop_orphan(action, error)
        self._pool.shutdown(wait=False, cancel_futures=True)
        self._stop_pool.shutdown(wait=False, cancel_futures=True)
        logger.info("left: %s", self.session.state.value)

    # --- internals ----------------------------------------------------------------

    def _now_ms(self) -> int:
        return int(self._clock() * 1000)

    def _feed_time(self) -> None:
        """Renewals, the clock, late starts, crashes and settled callbacks into the session."""
        renewed = self.keeper.last_renewed
        if renewed is not None and renewed != self._seen_renewal:
            self._seen_renewal = renewed
            # Time first, up to when this renewal was sent: one sent after a gap (the
            # process was SIGSTOPped, the loop did not turn) must not undo the fencing or
            # the end the gap called for. After a SIGCONT the keeper may renew before this
            # loop turns (found by tests/chaos_real; docs/sdk.md, "Chaos with real
            # processes").
            self.session.tick(int(renewed * 1000))
            self.session.lease_renewed(int(renewed * 1000))
        self.session.tick(self._now_ms())
        self._take_late_returns()
        self._settle()

    def _sleep_s(self) -> float:
        """How long the loop may sleep: until the next tick, callback deadline or fence."""
        now = self._clock()
        wait = self.settings.tick_interval_s
        if self._running:  # settled in order: only the first one's deadline matters
            wait = min(wait, self._running[0].deadline - now)
        wake_ms = self.session.wake_at_ms()
        if wake_ms is not None:
            wait = min(wait, wake_ms / 1000 - now)
        return max(0.0, wait)

    def _die(self, reason: str) -> NoReturn:
        self._dead, self._ready = True, False
        logger.critical("ending the worker process (exit %d): %s", STUCK_EXIT_CODE, reason)
        for handler in (*logger.handlers, *logging.getLogger().handlers):
            handler.flush()
        self._exit_process(STUCK_EXIT_CODE)
        raise WorkerStuckError(reason)

    def _owner_uid(self) -> str:
        if self.identity.uid:
            return self.identity.uid
        try:
            pod = self.api.get(kube.pod_path(self.identity.namespace, self.identity.pod))
        except apierrors.ApiError as exc:
            raise sdk_identity.IdentityError(
                f"cannot read pod {self.identity.namespace}/{self.identity.pod} for its uid "
                f"(set POD_UID from the Downward API, fieldRef metadata.uid): {exc}"
            ) from exc
        return str(pod.get("metadata", {}).get("uid", ""))

    def _offer(self, configmap: Mapping[str, Any]) -> None:
        version = str(configmap.get("metadata", {}).get("resourceVersion", ""))
        if version and version == self._configmap_version:
            return
        self._configmap_version = version
        text = (configmap.get("data") or {}).get(messages.CONFIGMAP_KEY)
        if not isinstance(text, str):
            return
        try:
            assignment = codec.decode_assignment(text)
            if not self.session.planned_for_us(assignment):
                logger.info(
                    "ignoring generation %d: planned for incarnation %s, we are %s",
                    assignment.generation,
                    assignment.incarnation,
                    self.incarnation,
                )
                return
            accepted = self.session.receive_assignment(assignment)
        except errors.RemoteProtocolError as exc:
            logger.error("ignoring a malformed assignment: %s", exc)
            return
        if accepted:
            self.accepted_at[assignment.generation] = self._clock()
            if len(self.accepted_at) > ACCEPTED_KEPT:
                del self.accepted_at[min(self.accepted_at)]
            logger.info(
                "generation %d (%s): %d assigned, %d revoked",
                assignment.generation,
                assignment.protocol,
                len(assignment.assigned),
                len(assignment.revoked),
            )

    def _run_actions(self) -> None:
        while batch := self.session.next_actions():
            for action in batch:
                if isinstance(action, sdk_session.Exit):
                    self._die(action.reason)
                elif isinstance(action, _Callback):
                    self._submit(action)
                elif isinstance(action, sdk_session.WriteReport):
                    self._write_report(action)
                else:
                    self.keeper.stop()
                    error = None
                    try:
                        self.keeper.release()
                    except apierrors.ApiError as exc:
                        error = str(exc)
                        logger.warning("cannot delete the Lease: %s", exc)
                    self.session.done(action, error=error)

    def _write_report(self, action: sdk_session.WriteReport) -> None:
        try:
            text = codec.encode_report(action.report)
        except errors.LocalProtocolError as exc:
            # Never die on our own report: the Lease keeps the last one written (what it
            # says is still true enough for the operator's barrier: everything added
            # since was assigned to us). Retried after the next tick.
            logger.error("cannot write the report: %s", exc)
            self.session.done(action, error=str(exc))
            return
        self.keeper.publish(text)
        if self.session.state is member.MemberState.LEAVING:
            # Written now, not by the keeper: the Lease is about to go.
            self.keeper.renew(self._owner)
        self.session.done(action)

    def _callback_of(self, action: _Callback) -> tuple[str, Callable[..., None], tuple[Any, ...]]:
        if isinstance(action, sdk_session.Start):
            return "on_assigned", self._on_assigned, (
                action.resource, action.config, action.epoch
            )
        if isinstance(action, sdk_session.Pause):
            return "on_paused", self._on_paused, (action.resource,)
        if isinstance(action, sdk_session.Resume):
            return "on_resumed", self._on_resumed, (action.resource,)
        if action.lost:
            return "on_lost", self._on_lost, (action.resource,)
        return "on_revoked", self._on_revoked, (action.resource,)

    def _submit(self, action: _Callback) -> None:
        name, callback, arguments = self._callback_of(action)
        if isinstance(action, sdk_session.Stop):
            pool, timeout = self._stop_pool, self.settings.budget.stop_timeout_s
        else:
            pool, timeout = self._pool, self.settings.callback_timeout_s
        late = self._late_flips.get(action.resource)
        if late is not None and late.done():
            del self._late_flips[action.resource]
            late = None
        if late is None:
            future = pool.submit(callback, *arguments)
        else:
            future = self._after(late, pool, callback, arguments)
        future.add_done_callback(self._callback_ended)
        self._running.append(_Running(action, name, future, self._clock() + timeout, timeout))

    @staticmethod
    def _after(
        previous: concurrent.futures.Future[None],
        pool: concurrent.futures.ThreadPoolExecutor,
        callback: Callable[..., None],
        arguments: tuple[Any, ...],
    ) -> concurrent.futures.Future[None]:
        """``callback`` on ``pool`` once ``previous`` (a pause or resume of the same resource
        that outlived its timeout) returned: two callbacks of one resource never overlap.
        Its timeout runs meanwhile: a stop still waiting past it ends the process."""
        result: concurrent.futures.Future[None] = concurrent.futures.Future()

        def run() -> None:
            if not result.set_running_or_notify_cancel():
                return  # it timed out before it could begin: it never will
            try:
                callback(*arguments)
            except BaseException as exc:  # as the pool's own futures do
                result.set_exception(exc)
            else:
                result.set_result(None)

        def begin(_: concurrent.futures.Future[None]) -> None:
            try:
                pool.submit(run)
            except RuntimeError:  # the worker left and shut its pools down
                result.cancel()

        previous.add_done_callback(begin)
        return result

    def _callback_ended(self, future: concurrent.futures.Future[None]) -> None:
        self._wake.set()  # on the callback's thread: the main loop settles it

    def _settle(self) -> None:
        """Hand finished and overdue callbacks to the session, in the order they were
        handed out (the event log keeps a batch's order): up to the first still running."""
        now = self._clock()
        while self._running:
            entry = self._running[0]
            if entry.future.done():
                timed_out = False
            elif now >= entry.deadline:
                timed_out = True
            else:
                return
            del self._running[0]
            self._finish(entry, timed_out=timed_out)

    def _finish(self, entry: _Running, *, timed_out: bool) -> None:
        action, name = entry.action, entry.name
        error = None
        still_running = False
        if timed_out:
            error = f"{name} timed out after {entry.timeout:g}s"
            # Queued behind other callbacks and not begun: it never will. A start that
            # begun goes on in its thread, and we must hear when it ends (a start that
            # ends well leaves the resource running with nobody owning it). A stop that
            # did not finish, begun or not, leaves the resource running: the session
            # ends the process.
            cancelled = entry.future.cancel()
            still_running = isinstance(action, sdk_session.Stop) or (
                isinstance(action, sdk_session.Start) and not cancelled
            )
            if isinstance(action, sdk_session.Pause | sdk_session.Resume) and not cancelled:
                # Counted as done (not retried), but its thread goes on: whatever comes
                # next for this resource waits for it (``_submit``).
                self._late_flips[action.resource] = entry.future
        elif (exc := entry.future.exception()) is not None:
            error = f"{name} raised {type(exc).__name__}: {exc}"
        if error is not None:
            logger.error("%s(%s): %s", name, action.resource, error)
        if not (still_running and isinstance(action, sdk_session.Stop)):
            self._emit(action, error)
        self.session.done(action, error=error, still_running=still_running)
        if still_running and isinstance(action, sdk_session.Start):
            entry.future.add_done_callback(functools.partial(self._late_return, action))

    def _late_return(
        self, action: sdk_session.Start, future: concurrent.futures.Future[None]
    ) -> None:
        # Runs on the callback's own thread when a timed-out start finally ends.
        error = None
        exc = future.exception()
        if exc is not None:
            error = f"on_assigned raised {type(exc).__name__}: {exc}"
        with self._late_lock:
            if not self._closed:
                self._late.append((action, error))
                self._wake.set()
                return
        self._stop_orphan(action, error)

    def _take_late_returns(self) -> None:
        with self._late_lock:
            late, self._late = self._late, []
            crashes, self._crashes = self._crashes, []
        for resource, reason in crashes:
            if self.session.task_failed(resource, reason):
                logger.error("%s failed: %s", resource, reason)
        for action, error in late:
            if error is None:
                logger.error(
                    "on_assigned(%s) returned after its timeout: the member never owned it, "
                    "stopping it (on_lost)",
                    action.resource,
                )
            else:
                logger.error("on_assigned(%s) failed after its timeout: %s", action.resource, error)
            if not self.session.late_start_returned(action, error=error):
                self._stop_orphan(action, error)

    def _stop_orphan(self, action: sdk_session.Start, error: str | None) -> None:
        # The worker has left: no session will schedule the stop, so do it here.
        if error is not None:
            return
        logger.error(
            "on_assigned(%s) returned after the worker left: stopping it (on_lost)",
            action.resource,
        )
        try:
            self._on_lost(action.resource)
        except Exception:  # user code: log it, there is nobody left to report to
            logger.exception("on_lost(%s) failed", action.resource)

    def _emit(self, action: _Callback, error: str | None) -> None:
        if isinstance(action, sdk_session.Start):
            if error is not None:
                return
            self._epochs[action.resource] = action.epoch
            kind, epoch = events.Kind.START, action.epoch
        elif isinstance(action, sdk_session.Stop) and not action.cleanup:
            # A failed stop still counts as stopped (abandoned): the log says so too.
            kind, epoch = events.Kind.STOP, self._epochs.pop(action.resource, -1)
        elif isinstance(action, sdk_session.Pause | sdk_session.Resume):
            # Like a failed stop, a failed flip counts as done (the session does not
            # retry it), so the log follows the session and pauses and resumes pair up.
            paused = isinstance(action, sdk_session.Pause)
            kind = events.Kind.PAUSE if paused else events.Kind.RESUME
            epoch = self._epochs.get(action.resource, -1)
        else:
            return  # stops of what never counted as started are not rows
        if self._on_event is None:
            return
        assignment = self.session.assignment
        if isinstance(action, sdk_session.Start | sdk_session.Stop):
            protocol = str(action.protocol)
        else:  # flips carry no protocol: they belong to the accepted assignment
            protocol = str(assignment.protocol) if assignment else ""
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
                protocol=protocol,
                policy=assignment.policy if assignment else "",
            )
        )
