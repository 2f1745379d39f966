"""The worker's side of the protocol, sans I/O (h11's shape).

A ``Session`` holds no socket, no clock and no thread. The transport feeds it
what happened (an assignment was read, the Lease was renewed, time passed, a
callback finished) and asks it what to do next::

    session.join(now_ms)
    session.receive_assignment(assignment)       # decoded by protocol.codec
    while actions := session.next_actions():
        for action in actions:                   # a batch may run concurrently
            error = execute(action)              # Start/Stop -> user callbacks
            session.done(action, error=error)
    session.tick(now_ms)                         # self-fencing check

Rules it enforces (docs/protocol.md has the why):

* Only an assignment with a generation newer than every one accepted before is
  applied: two generations are never applied out of order. A document planned
  for another incarnation of this pod (``Assignment.incarnation`` set and not
  ours) is ignored: it was meant for a previous life of the process, and its
  resources may be about to go elsewhere. The member waits for its own.
* Every stop an assignment implies finishes before any start: one batch of
  ``Stop`` actions, then one batch of ``Start`` actions, then ``WriteReport``.
* The assigned set is a full replacement: anything owned and not assigned stops
  (the eager protocol relies on it). A resource whose epoch or config changed is
  stopped and started again: a *restart in place* (``kooper.dev/restart`` bumps
  the epoch of a kept resource). Its stop is graceful (``on_revoked``) even in an
  eager document, because the resource stays with this member.
* A start that timed out is not owned, and its resource is never started again
  while that callback still runs (``done(..., still_running=True)``). When it
  returns late (``late_start_returned``) and did start the resource, the session
  stops it as lost (``Stop(cleanup=True)``): it must not keep running unowned.
* Pause: resources of a connector whose ``Assignment.states`` entry is
  ``paused`` stay assigned; once started, the session tells them to pause
  (``Pause``) and, when the state flips back, to resume (``Resume``).
* Stopped: nothing of a connector whose state is ``stopped`` runs, neither its
  instance nor its tasks, even where the document still assigns them; what runs
  stops gracefully (``on_revoked``: it goes nowhere else).
* Failures: a start, stop or flip that fails and a task that dies by itself
  (``task_failed``) are reported with a reason cut to ``MAX_ERROR_CHARS`` and
  a count of how often each resource failed in this incarnation; a failed or
  crashed resource is started again only by a newer generation.
* The short-circuit: a member that speaks ``compatible`` and receives an
  ``eager`` assignment that stops something treats those resources as *lost*
  (``Stop(lost=True)``: ``on_lost``, no committing), never as revoked.
* Self-fencing, by the timing budget (``protocol.timing``): when the Lease went
  unrenewed for ``lease - stop timeout - margin`` (counted from when the last
  successful renewal was *sent*), every resource stops as lost, at once, even
  while another batch of callbacks still runs; nothing restarts until the Lease
  is back and an assignment with a newer generation arrives.
* Nothing runs unowned: a stop whose callback outlived its timeout
  (``done(..., still_running=True)``), or anything that may still run at
  ``lease - margin`` after the last renewal (a stop or start in flight, a start
  left running), makes the session answer ``Exit``: the transport ends the
  process (the pod restarts) rather than let the operator hand the work to
  someone else while it runs here.
* Membership epochs (``Assignment.member_epoch``, when the operator issues
  them): the member acts only on documents of its current epoch. A newer epoch
  starts a new membership: what ran under the old one stops as lost before
  anything starts. A member that fenced itself retires its epoch: a document of
  that epoch (written while it was cut off, maybe already handed to someone else)
  is ignored, and it waits for a newer epoch, which the operator issues when it
  rejoins. Each fence counts (``Report.rejoins``), and the operator names the count
  an epoch was issued for (``Assignment.rejoins``): a document issued before the
  member's last fence is ignored even when the member never saw its epoch (it was
  cut off right after joining; the document was written meanwhile, and its epoch
  retired when the operator declared it departed). Documents without an epoch
  follow the generation rule alone.
* ``terminate`` (SIGTERM): stop everything (gracefully, ``on_revoked``), report
  owning nothing, then ``ReleaseLease``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from kooper.core import errors, model
from kooper.protocol import member, messages
from kooper.sdk import actions

_S = member.MemberState
_I = member.MemberInput


# The actions live in ``sdk.actions``; these names keep ``session.Start`` etc. working.
Start = actions.Start
Stop = actions.Stop
Pause = actions.Pause
Resume = actions.Resume
WriteReport = actions.WriteReport
ReleaseLease = actions.ReleaseLease
Exit = actions.Exit
Action = actions.Action

PAUSED = "paused"
"""The ``Assignment.states`` value that holds a connector's resources paused."""

STOPPED = "stopped"
"""The ``Assignment.states`` value that stops a connector: its instance and its tasks."""


def truncated(reason: str) -> str:
    """``reason`` cut to ``messages.MAX_ERROR_CHARS`` (a report is not a log)."""
    limit = messages.MAX_ERROR_CHARS
    return reason if len(reason) <= limit else reason[: limit - 3] + "..."


@dataclasses.dataclass(frozen=True, slots=True)
class _Wanted:
    epoch: int
    config: Mapping[str, str]
    connector: bool
    paused: bool = False


class Session:
    """One member incarnation's protocol state. Not thread-safe: drive it from one thread.

    Actions are matched by identity: pass ``done`` the very object ``next_actions``
    returned.
    """

    def __init__(
        self,
        *,
        member_name: str,
        incarnation: str,
        protocols: frozenset[model.Protocol],
        lease_duration_ms: int,
        stop_timeout_ms: int = 0,
        fence_margin_ms: int = 0,
    ) -> None:
        """``stop_timeout_ms`` and ``fence_margin_ms`` are the timing budget's ``S`` and
        ``M``: the member fences itself ``lease - S - M`` after its last renewal and
        ends at ``lease - M`` if something may still run. With both 0 it fences at
        ``lease`` and never asks to end (timing-only fencing, for simulators that do
        not model stop timeouts)."""
        if not protocols:
            raise errors.LocalProtocolError("a member must speak at least one protocol")
        if stop_timeout_ms < 0 or fence_margin_ms < 0 or (
            stop_timeout_ms + fence_margin_ms >= lease_duration_ms
        ):
            raise errors.LocalProtocolError(
                f"stop timeout {stop_timeout_ms} ms + margin {fence_margin_ms} ms leave no "
                f"time to fence within a {lease_duration_ms} ms lease"
            )
        self.member_name = member_name
        self.incarnation = incarnation
        self.protocols = protocols
        self.lease_duration_ms = lease_duration_ms
        self.fence_after_ms = lease_duration_ms - stop_timeout_ms - fence_margin_ms
        """Unrenewed this long (since the last renewal was sent), the member fences itself."""
        self.deadline_ms = lease_duration_ms - fence_margin_ms if stop_timeout_ms else None
        """Unrenewed this long, anything that may still run ends the process (None: never)."""
        self.exit_reason: str | None = None
        """Why the process must end (``Exit``), once it must."""
        self.state = _S.UNJOINED
        self.assignment: messages.Assignment | None = None
        """The last accepted assignment (group, protocol, policy for the event log)."""
        self._owned: dict[str, _Wanted] = {}
        self._target: dict[str, _Wanted] = {}
        self._accepted_generation = -1
        self._applied_generation = -1
        self._stop_as_lost: set[str] = set()
        self._failed: dict[str, str] = {}
        self._failure_counts: dict[str, int] = {}
        """How often each resource failed in this incarnation (kept after it recovers)."""
        self._crashed: set[str] = set()
        """Resources that died by themselves while a callback for them was running."""
        self._failed_starts: set[str] = set()
        self._in_flight: dict[int, Action] = {}
        self._zombies: dict[str, Start] = {}
        """Starts that timed out and whose callback still runs, by resource."""
        self._cleanup: set[str] = set()
        """Resources a late start did start: to stop as lost."""
        self._paused: set[str] = set()
        """Owned resources the callbacks were told to pause."""
        self._needs_assignment = True
        self._member_epoch = 0
        self._leader_epoch = 0
        """The highest leader epoch of any document addressed to this incarnation."""
        """The membership epoch of the documents this member acts on (0: none seen)."""
        self._epoch_retired = False
        """Fenced since it adopted ``_member_epoch``: only a newer epoch counts now."""
        self._epoch_restart: set[str] = set()
        """Owned under an older membership: to stop (as lost) before the new one runs."""
        self._fenced = False
        self.fencings = 0  # times the member fenced itself (worker metrics)
        self._report_dirty = False
        self._report_backoff = False
        self._last_renewed_ms = 0

    # --- inputs -------------------------------------------------------------------

    def join(self, now_ms: int) -> None:
        """The Lease was created: announce ourselves (an empty report) and await work."""
        self._step(_I.JOIN)
        self._last_renewed_ms = now_ms
        self._report_dirty = True

    def receive_assignment(self, assignment: messages.Assignment) -> bool:
        """Accept ``assignment`` if it is newer than any before; ``False`` if ignored.

        Raises ``RemoteProtocolError`` if it is addressed to another member.
        """
        if assignment.member != self.member_name:
            raise errors.RemoteProtocolError(
                f"assignment for {assignment.member!r} delivered to {self.member_name!r}"
            )
        if not self.planned_for_us(assignment):
            return False
        if 0 < assignment.leader_epoch < self._leader_epoch:
            # Written by a leader older than one we heard from: a stalled leader's late
            # write (docs/protocol.md, "Fencing the leader"). Never applied. (0: an
            # operator without leader election, alone by construction: nothing to fence,
            # and a group switched from election to none must not be refused.)
            return False
        self._leader_epoch = max(self._leader_epoch, assignment.leader_epoch)
        if not member.accepts_assignments(self.state):
            return False
        epoch = assignment.member_epoch
        if epoch and (
            epoch < self._member_epoch or (epoch == self._member_epoch and self._epoch_retired)
            or assignment.rejoins != self.fencings
        ):
            # A document of a membership that is over: an older epoch, the one this
            # member fenced itself in, or one issued before its last fence (maybe while
            # it was cut off, before it saw any document, and retired since).
            return False
        if assignment.generation <= self._accepted_generation:
            return False
        if epoch > self._member_epoch:
            if self._member_epoch:
                # A new membership: what runs belongs to the old one, which the operator
                # retired (it may run elsewhere already), and so does whatever a start
                # still running began. Stop it all as lost first.
                retired = {*self._owned, *self._starting()}
                self._epoch_restart.update(retired)
                self._stop_as_lost.update(retired)
            self._member_epoch = epoch
            self._epoch_retired = False
        self._accepted_generation = assignment.generation
        self.assignment = assignment
        self._needs_assignment = False
        self._failed_starts.clear()
        target: dict[str, _Wanted] = {}
        connectors = assignment.assigned.connectors
        states = assignment.states
        for resource in (*assignment.assigned.connectors, *assignment.assigned.tasks):
            is_connector = resource in connectors
            connector = resource if is_connector else model.task_connector(resource)
            if states and states.get(connector) == STOPPED:
                continue  # assigned, but nothing of a stopped connector runs
            target[resource] = _Wanted(
                epoch=assignment.epochs.get(resource, 0),
                config=assignment.configs.get(connector, {}),
                connector=is_connector,
                paused=assignment.states.get(connector) == PAUSED,
            )
        self._target = target
        if not self._report_dirty:
            # Failures already reported, of resources this member no longer has, are history.
            self._failed = {
                resource: reason
                for resource, reason in self._failed.items()
                if resource in target or resource in self._owned
            }
        stopping = self._to_stop()
        # Resources still in the target only restart here (new epoch or config): a
        # graceful stop, even under the short-circuit, since they go nowhere else.
        # So do resources of a stopped connector that the document still assigns.
        taken = [
            resource
            for resource in stopping
            if resource not in target and resource not in assignment.assigned
        ]
        short_circuit = (
            assignment.protocol is model.Protocol.EAGER
            and model.Protocol.COMPATIBLE in self.protocols
            and bool(taken)
        )
        if short_circuit:
            self._stop_as_lost.update(taken)
        self._step(_I.REVOKE if stopping else _I.ASSIGN)
        self._report_dirty = True
        return True

    def late_start_returned(self, action: Start, *, error: str | None = None) -> bool:
        """A start that timed out (``done(..., still_running=True)``) has returned.

        ``error`` is what it raised (``None``: it did start the resource). A started
        resource is stopped as lost in the next batch: nobody owns it. Returns
        ``False`` when the session will not schedule that stop because the member is
        leaving or gone: the transport must stop the resource itself.
        """
        if self._zombies.get(action.resource) is not action:
            raise errors.LocalProtocolError(f"{action!r} was not left running")
        previous = self._failed.get(action.resource, "start timed out")
        self._report_dirty = True
        if error is not None:
            del self._zombies[action.resource]
            self._failed[action.resource] = truncated(f"{previous}; it then failed: {error}")
            return True
        if self.state in (_S.LEAVING, _S.LEFT):
            del self._zombies[action.resource]
            return False
        self._cleanup.add(action.resource)
        self._failed[action.resource] = truncated(
            f"{previous}; it returned late: stopping it as lost"
        )
        return True

    def task_failed(self, resource: str, error: str) -> bool:
        """Task code says ``resource`` died by itself (it runs no more): report it failed.

        It is not owned any more, no stop callback runs for it, and it starts again
        only with a newer generation. ``False`` if the member does not own it (already
        stopped, or never started): nothing changes then.
        """
        if resource not in self._owned:
            return False
        self._record(resource, error)
        self._report_dirty = True
        if any(getattr(a, "resource", None) == resource for a in self._in_flight.values()):
            # A stop or flip of it is running: that callback settles ownership, and a
            # stop that goes well does not clear the crash.
            self._crashed.add(resource)
            return True
        del self._owned[resource]
        self._paused.discard(resource)
        self._stop_as_lost.discard(resource)
        self._failed_starts.add(resource)
        return True

    def planned_for_us(self, assignment: messages.Assignment) -> bool:
        """Whether ``assignment`` was planned for this incarnation (or for any)."""
        return not assignment.incarnation or assignment.incarnation == self.incarnation

    def lease_renewed(self, now_ms: int) -> None:
        """The Lease was renewed at ``now_ms``; a fenced member rejoins."""
        if self.state in (_S.UNJOINED, _S.LEAVING, _S.LEFT):
            return
        self._last_renewed_ms = max(self._last_renewed_ms, now_ms)
        self._report_backoff = False
        self._step(_I.LEASE_RENEWED)
        if self.state is _S.JOINING and self._fenced:
            self._report_dirty = True

    def tick(self, now_ms: int) -> None:
        """Time passed: fence ourselves, or give up on the process, by the timing budget."""
        self._report_backoff = False
        unrenewed = now_ms - self._last_renewed_ms
        if (
            self.deadline_ms is not None
            and unrenewed >= self.deadline_ms
            and self.exit_reason is None
            and self._may_still_run()
        ):
            running = sorted(self._may_still_run(), key=model.resource_sort_key)
            self.exit_reason = (
                f"the Lease went unrenewed for {unrenewed} ms and {len(running)} resources "
                f"may still run ({', '.join(running[:5])}): ending the process before the "
                "operator may give them to another member"
            )
        if self.state not in member.LIVE_STATES:
            return
        if unrenewed >= self.fence_after_ms:
            self._step(_I.LEASE_LOST)
            self._fenced = True
            self._epoch_retired = True
            self.fencings += 1
            self._needs_assignment = True
            self._target = {}
            # A start still running may return after the Lease is back: what it began
            # stops as lost too, like everything owned at the fence.
            self._stop_as_lost.update(self._owned, self._starting())
            self._report_dirty = True

    def terminate(self) -> None:
        """SIGTERM: stop everything gracefully, report owning nothing, release the Lease."""
        if self.state in (_S.LEAVING, _S.LEFT):
            return
        self._step(_I.LEAVE)
        self._target = {}
        self._report_dirty = True

    # --- outputs ------------------------------------------------------------------

    def wake_at_ms(self) -> int | None:
        """When ``tick`` next has something to decide (fence, or end): wake up then."""
        if self.state in member.LIVE_STATES:
            return self._last_renewed_ms + self.fence_after_ms
        if self.deadline_ms is not None and self._may_still_run():
            return self._last_renewed_ms + self.deadline_ms
        return None

    def next_actions(self) -> list[Action]:
        """The next batch to run; empty while a batch is in flight or nothing is left.

        Two exceptions: ``[Exit]`` whenever the process must end, and a fenced member's
        stops, which do not wait for a batch still in flight.
        """
        if self.exit_reason is not None:
            return [Exit(self.exit_reason)]
        if self._in_flight and self.state is _S.FENCED:
            return self._fence_now()
        if self._in_flight or self.state in (_S.LEFT, _S.UNJOINED):
            return []
        batch: list[Action] = []
        stopping = self._to_stop()
        protocol = self._protocol()
        if stopping:
            batch.extend(
                Stop(
                    resource=resource,
                    lost=self.state is _S.FENCED or resource in self._stop_as_lost,
                    generation=self._accepted_generation,
                    protocol=protocol,
                )
                for resource in sorted(stopping, key=model.resource_sort_key)
            )
        elif self.state is _S.REVOKING:
            self._step(_I.STOPPED)
        batch.extend(
            Stop(
                resource=resource,
                lost=True,
                generation=self._accepted_generation,
                protocol=protocol,
                cleanup=True,
            )
            for resource in sorted(self._cleanup, key=model.resource_sort_key)
        )
        if not batch and self.state in member.LIVE_STATES:
            batch.extend(self._starts())
        if not batch and self.state in member.LIVE_STATES:
            batch.extend(self._flips())
        if not batch:
            self._maybe_applied()
            if self._report_dirty and not self._report_backoff:
                batch.append(WriteReport(self.report()))
            elif self.state is _S.LEAVING:
                batch.append(ReleaseLease())
        self._in_flight.update((id(action), action) for action in batch)
        return batch

    def done(
        self, action: Action, *, error: str | None = None, still_running: bool = False
    ) -> None:
        """``action`` finished; ``error`` says why it failed (the report carries it).

        ``still_running``: a ``Start`` timed out and its callback thread goes on (a
        thread cannot be killed). Pass what it finally did to ``late_start_returned``.
        """
        if still_running and not (isinstance(action, Start | Stop) and error is not None):
            raise errors.LocalProtocolError("only a failed start or stop can be left running")
        if self._in_flight.pop(id(action), None) is None:
            raise errors.LocalProtocolError(f"{action!r} was not in flight")
        if isinstance(action, Stop) and still_running:
            # Counting it as stopped would leave it running with nobody owning it.
            self._record(action.resource, error)
            self._report_dirty = True
            self.exit_reason = (
                f"stopping {action.resource} did not finish ({error}): ending the process "
                "so that it cannot keep running unowned"
            )
        elif isinstance(action, Stop) and action.cleanup:
            self._cleanup.discard(action.resource)
            self._zombies.pop(action.resource, None)
            if error is not None:
                self._failed[action.resource] = truncated(
                    f"{self._failed.get(action.resource, 'start timed out')}; "
                    f"stopping it failed too: {error}"
                )
            self._report_dirty = True
        elif isinstance(action, Stop):
            # A stop that failed or timed out is abandoned, as Connect does: the resource
            # counts as stopped, and its epoch fences whatever the callback left running.
            self._owned.pop(action.resource, None)
            self._paused.discard(action.resource)
            self._stop_as_lost.discard(action.resource)
            if error is not None or action.resource not in self._crashed:
                self._record(action.resource, error)
            self._crashed.discard(action.resource)
            self._epoch_restart.discard(action.resource)
            self._report_dirty = True
        elif isinstance(action, Start):
            if error is None:
                # What it runs is what this start was given: a newer document that
                # changed the epoch or config meanwhile restarts it (``_to_stop``).
                self._owned[action.resource] = _Wanted(
                    action.epoch, action.config, connector=action.connector
                )
            else:
                self._stop_as_lost.discard(action.resource)  # it never ran: nothing to stop
                self._epoch_restart.discard(action.resource)
                self._failed_starts.add(action.resource)
                if still_running:
                    self._zombies[action.resource] = action
            self._record(action.resource, error)
            self._report_dirty = True
        elif isinstance(action, Pause | Resume):
            # Like a failed stop, a failed flip is not retried: it is reported.
            if isinstance(action, Pause):
                self._paused.add(action.resource)
            else:
                self._paused.discard(action.resource)
            if error is not None:
                self._record(action.resource, error)
                self._report_dirty = True
        elif isinstance(action, WriteReport):
            if error is None or self.state is _S.LEAVING:
                self._report_dirty = self._report_dirty and action.report != self.report()
            else:
                self._report_backoff = True
        else:
            self._step(_I.RELEASED)

    def report(self) -> messages.Report:
        """What this member would report now.

        Every failing resource is counted in ``failure_counts``; the reasons of the
        first ``MAX_FAILURE_REASONS`` (in resource order) are in ``failed``.
        """
        connectors = [name for name, wanted in self._owned.items() if wanted.connector]
        tasks = [name for name, wanted in self._owned.items() if not wanted.connector]
        failed = self._failed
        if len(failed) > messages.MAX_FAILURE_REASONS:
            first = sorted(failed, key=model.resource_sort_key)[: messages.MAX_FAILURE_REASONS]
            failed = {resource: self._failed[resource] for resource in first}
        return messages.Report(
            member=self.member_name,
            incarnation=self.incarnation,
            protocols=self.protocols,
            generation=self._applied_generation,
            owned=model.ConnectorsAndTasks.of(connectors, tasks),
            failed=dict(failed),
            fenced=self._fenced,
            member_epoch=self._member_epoch,
            rejoins=self.fencings,
            failure_counts={
                resource: self._failure_counts.get(resource, 1) for resource in self._failed
            },
            # Leaving with nothing to stop and no start still running late (a zombie):
            # the report that proves this incarnation runs nothing any more.
            left=(self.state is _S.LEAVING and not self._owned and not self._cleanup
                  and not self._zombies),
        )

    @property
    def owned(self) -> frozenset[str]:
        """The resources running now."""
        return frozenset(self._owned)

    @property
    def fenced(self) -> bool:
        """Fenced itself and not yet applied an assignment since (``Report.fenced``)."""
        return self._fenced

    @property
    def applied_generation(self) -> int:
        """The generation of the last assignment fully applied (-1: none yet)."""
        return self._applied_generation

    @property
    def paused(self) -> frozenset[str]:
        """The owned resources held paused now."""
        return frozenset(self._paused)

    @property
    def connector_instances(self) -> frozenset[str]:
        """The resources this member knows as connector instances (the rest are tasks)."""
        known = {r for wanted in (self._owned, self._target)
                 for r, w in wanted.items() if w.connector}
        if self.assignment is not None:
            known |= self.assignment.assigned.connectors | self.assignment.revoked.connectors
        return frozenset(known)

    @property
    def left_running(self) -> frozenset[str]:
        """Resources whose start timed out and whose callback has not returned yet."""
        return frozenset(self._zombies)

    @property
    def idle(self) -> bool:
        """Nothing in flight and nothing left to do until the next input."""
        return (
            not self._in_flight
            and not self._to_stop()
            and not self._cleanup
            and not self._pending_starts()
            and not self._flips()
        )

    # --- internals ----------------------------------------------------------------

    def _may_still_run(self) -> set[str]:
        """Resources that may run now: owned, or with a start or stop still running."""
        running = set(self._owned) | set(self._zombies) | self._cleanup
        running.update(
            action.resource
            for action in self._in_flight.values()
            if isinstance(action, Start | Stop | Pause | Resume)
        )
        return running

    def _starting(self) -> set[str]:
        """Resources whose start is in flight."""
        return {a.resource for a in self._in_flight.values() if isinstance(a, Start)}

    def _fence_now(self) -> list[Action]:
        # Fenced while callbacks run: stop everything owned that no callback is busy
        # with now (a busy one gets its stop when its callback ends).
        busy = {
            action.resource
            for action in self._in_flight.values()
            if isinstance(action, Start | Stop | Pause | Resume)
        }
        protocol = self._protocol()
        batch: list[Action] = [
            Stop(
                resource=resource,
                lost=True,
                generation=self._accepted_generation,
                protocol=protocol,
            )
            for resource in sorted(self._owned, key=model.resource_sort_key)
            if resource not in busy
        ]
        self._in_flight.update((id(action), action) for action in batch)
        return batch

    def _step(self, event: member.MemberInput) -> None:
        self.state = member.transition(self.state, event)

    def _protocol(self) -> model.Protocol:
        return self.assignment.protocol if self.assignment else min(self.protocols)

    def _to_stop(self) -> list[str]:
        target = self._target
        return [
            resource
            for resource, running in self._owned.items()
            if (wanted := target.get(resource)) is None
            or resource in self._epoch_restart
            or wanted.epoch != running.epoch
            or wanted.config != running.config
        ]

    def _pending_starts(self) -> list[str]:
        if self.state not in member.LIVE_STATES:
            return []
        # A resource whose timed-out start still runs waits for it: never two at once.
        return [
            resource
            for resource in self._target
            if resource not in self._owned
            and resource not in self._failed_starts
            and resource not in self._zombies
        ]

    def _starts(self) -> list[Action]:
        protocol = self._protocol()
        return [
            Start(
                resource=resource,
                epoch=self._target[resource].epoch,
                config=self._target[resource].config,
                generation=self._accepted_generation,
                protocol=protocol,
                connector=self._target[resource].connector,
            )
            for resource in sorted(self._pending_starts(), key=model.resource_sort_key)
        ]

    def _flips(self) -> list[Action]:
        if self.state not in member.LIVE_STATES:
            return []
        generation = self._accepted_generation
        flips: list[Action] = []
        for resource in sorted(self._owned, key=model.resource_sort_key):
            wanted = self._target.get(resource)
            paused = wanted is not None and wanted.paused
            if paused and resource not in self._paused:
                flips.append(Pause(resource=resource, generation=generation))
            elif not paused and resource in self._paused:
                flips.append(Resume(resource=resource, generation=generation))
        return flips

    def _maybe_applied(self) -> None:
        # Applied = every stop and start of the accepted assignment has finished.
        if (
            self.state in member.LIVE_STATES
            and not self._needs_assignment
            and self._applied_generation != self._accepted_generation
        ):
            self._applied_generation = self._accepted_generation
            self._fenced = False
            self._report_dirty = True

    def _record(self, resource: str, error: str | None) -> None:
        if error is None:
            self._failed.pop(resource, None)
        else:
            self._failed[resource] = truncated(error)
            self._failure_counts[resource] = self._failure_counts.get(resource, 0) + 1
