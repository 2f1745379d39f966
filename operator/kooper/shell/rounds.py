"""One asyncio task per WorkerGroup: wait for a burst of events, run one step.

A round gathers the ``control.step.Inputs`` (the kopf index views, plus the reads a
decision needs: the owners of departed pods, and a fresh read of ConfigMaps that
look edited), calls the pure ``control.step.step``, and makes the ``Step``'s writes in
the order ``Step.writes`` states (``writes.Writer``); then Events, the audit log,
metrics and the Connector statuses. The order is what makes an operator restart at
any moment safe (see ``control.step`` and ``control.state``).

Events are coalesced: handlers only ``poke`` the runner, which waits for a short
debounce and then plans once for everything that happened meanwhile. The delay
deadline and Lease expiries are timers of this loop; the deadline itself lives in
the WorkerGroup status, so a restarted operator keeps it.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Protocol

from kooper.control import liveness, rollout, status, views
from kooper.control import step as control
from kooper.core import ids, model
from kooper.sdk import apierrors
from kooper.shell import audit, connectors, kube, metrics, settings, warmup, writes

logger = logging.getLogger("kooper.shell")

Restart = writes.Restart


class Views(Protocol):
    """Read access to the watched objects (kopf indexes in the operator)."""

    def group(self, namespace: str, name: str) -> views.GroupView | None:
        """The WorkerGroup, if it exists."""

    def pods(self, namespace: str) -> Iterable[views.PodView]:
        """Every pod of the namespace."""

    def leases(self, namespace: str) -> Iterable[views.LeaseView]:
        """Every member Lease of the namespace."""

    def released(self, namespace: str) -> Iterable[views.LeaseView]:
        """Member Leases of the namespace deleted lately, as they last were."""

    def groups_of(self, namespace: str) -> Iterable[views.GroupView]:
        """Every WorkerGroup of the namespace."""

    def connectors(self, namespace: str, group: str) -> Iterable[views.ConnectorView]:
        """Connectors naming ``group``."""

    def configmaps(self, namespace: str, group: str) -> Iterable[views.ConfigMapView]:
        """ConfigMaps labelled for ``group``."""


@dataclasses.dataclass(slots=True)
class Context:
    """What every group runner shares."""

    client: kube.Client
    views: Views
    identity: str
    audit: audit.AuditLog
    run_id: str = "operator"
    debounce_s: float = 0.05
    retry_s: float = 1.0
    max_retry_s: float = 60.0
    """Failed rounds back off from ``retry_s``, doubling, up to this."""
    connector_status: bool = True
    connector_status_delay_s: float = 0.5
    """Connector statuses wait this long after a round, so that a placement and the
    members' reports that follow it land in one patch per connector, not two."""
    connector_status_max_wait_s: float = 2.0
    """...and keep waiting, up to this long, while members have not applied their
    latest document yet (their reports will change ``running``)."""
    clock: Callable[[], float] = time.time
    """Wall-clock seconds, read when a runner starts (``SteadyClock``): a step's ``now_ms``."""
    leader_epoch: int = 0
    """This leader's term (``shell.leader``; 0: no election): runners made now write it."""
    on_lost: Callable[[str], None] = lambda why: None
    """Called when a write found a newer leader's epoch: this replica must stop leading."""


@dataclasses.dataclass(frozen=True, slots=True)
class RoundResult:
    """What a round did, for tests and the benchmark."""

    generation: int
    changed: int
    written: int
    failed: int
    deleted: int
    compute_s: float
    latency_s: float | None
    phases: tuple[tuple[str, float], ...] = ()
    """Seconds spent per phase (read, plan, write, status), for the benchmark."""


class SteadyClock:
    """Wall-clock seconds that advance with the monotonic clock: the wall clock is read
    once, so a step of it (NTP correcting it, a VM resumed) moves no Lease expiry, which
    is timed by when this operator observed a renewal (``control.liveness``). A forward
    step would otherwise make every Lease look expired at once and its member depart
    while it runs its work. What is persisted (deadlines) is wall time as of the start."""

    def __init__(self, wall: Callable[[], float] = time.time) -> None:
        self._offset = wall() - time.monotonic()

    def __call__(self) -> float:
        return self._offset + time.monotonic()


class GroupRunner:
    """The rebalancing loop of one WorkerGroup: gather, ``step``, execute."""

    def __init__(self, context: Context, namespace: str, name: str) -> None:
        self.ctx = context
        self.namespace = namespace
        self.name = name
        self.key = f"{namespace}/{name}"
        self.flag = asyncio.Event()
        self.burst_started: float | None = None
        self.memory: control.Memory | None = None
        """The last step's memory; None: restore from the API next round."""
        self.caches = control.Caches()
        self.clock = SteadyClock(context.clock)
        self.writer = writes.Writer(context.client, namespace, name,
                                    epoch=context.leader_epoch)
        self.statuses = connectors.ConnectorStatuses(
            context.client, namespace, delay_s=context.connector_status_delay_s,
            max_wait_s=context.connector_status_max_wait_s, retry_s=context.retry_s,
            max_retry_s=context.max_retry_s, epoch=context.leader_epoch,
            on_lost=context.on_lost)
        self.wake_at_ms: int | None = None
        self.replan = False
        """Plan the next round even if its inputs look the same as the last one's."""
        self.task: asyncio.Task[None] | None = None
        self._reread: dict[str, tuple[liveness.Fingerprint, views.LeaseView | None]] = {}
        """Lease → (the version the watch shows, what reading it again found: None, gone)
        (``_confirmed``)."""
        self.rereads = 0
        """Leases read again because the watch showed them expired (tests read it)."""
        self._warmed: tuple[Any, model.ConnectorsAndTasks | None] | None = None
        """(cache, configured resources) ``warmup.warm`` last rehearsed a departure for."""
        self._planned_configured: model.ConnectorsAndTasks | None = None
        self.warmups = 0
        """Departures rehearsed to warm the cache (tests read it)."""
        self.results: list[RoundResult] = []
        """The last 100 rounds that planned (tests and the benchmark read them)."""
        self.rounds_planned = 0
        self.round_failures = 0
        """Rounds failed in a row (the backoff's exponent; tests read it)."""
        self.unreported = 0
        """Refused rounds in a row whose conditions could not be written (their retry's
        backoff exponent)."""
        self.steps_run = 0
        """Steps run, planned or not (tests wait on it)."""
        self.steps: list[tuple[control.Inputs, control.Memory, int, control.Step]] | None = None
        """When a list: every planned step's (inputs, memory, now_ms, final Step) (tests)."""

    @property
    def written(self) -> dict[str, tuple[str, str]]:
        """member → (resourceVersion, text) of its ConfigMap as we last wrote it."""
        return self.writer.written

    @property
    def own_versions(self) -> dict[str, list[str]]:
        """member → resourceVersions of our own last few writes of its ConfigMap."""
        return self.writer.own_versions

    @property
    def fencing(self) -> bool:
        """Whether the runner waits for its fencing writes to come back (pokes on any change)."""
        return self.memory is None and self.writer.epoch > 0

    @property
    def patching_connectors(self) -> bool:
        """Whether Connector statuses are queued or being patched (they trail the round)."""
        return self.statuses.busy

    # --- loop ---------------------------------------------------------------

    def poke(self) -> None:
        """Something changed: plan soon (coalesced with whatever else happens)."""
        if self.burst_started is None:
            self.burst_started = time.monotonic()
        self.flag.set()

    def status_seen(self, resource_version: str, shown: Mapping[str, Any]) -> bool:
        """The watch shows the WorkerGroup's status: whether someone else wrote it (it is
        then written again whole, by a round that plans even if nothing else changed)."""
        if not self.writer.foreign_status(resource_version, shown):
            return False
        self.replan = True
        return True

    def start(self) -> None:
        """Start the loop as a task of the running event loop."""
        if self.task is None or self.task.done():
            self.task = asyncio.get_running_loop().create_task(self.loop(), name=self.key)
            self.poke()

    async def stop(self) -> None:
        """Cancel the loop and wait for it."""
        for task in (self.statuses.task, self.task):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task

    async def loop(self) -> None:
        """Wait for a poke or a timer, debounce, run a round; never dies on a round's error."""
        while True:
            timeout = None
            if self.wake_at_ms is not None:
                timeout = max(0.0, self.wake_at_ms / 1000 - self.clock())
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.flag.wait(), timeout)
            await asyncio.sleep(self.ctx.debounce_s)
            self.flag.clear()
            started = self.burst_started
            self.burst_started = None
            try:
                await self.round(burst_started=started)
            except asyncio.CancelledError:
                raise
            except writes.LostLeadership as exc:
                logger.warning("%s: %s; standing by", self.key, exc)
                self.ctx.on_lost(str(exc))
                return
            except Restart as exc:
                logger.warning("%s: %s; restoring state from the API", self.key, exc)
                self.memory = None
                self.poke()
            except Exception as exc:
                # Exponential backoff (retry_s, doubled per failure in a row, at most
                # max_retry_s), and the WorkerGroup says so until a round succeeds.
                self.round_failures += 1
                delay = settings.retry_delay_s(self.ctx.retry_s, self.ctx.max_retry_s,
                                               self.round_failures)
                logger.exception("%s: round failed (%d in a row); retrying in %.1fs",
                                 self.key, self.round_failures, delay)
                metrics.ROUND_ERRORS.labels(self.key).inc()
                if self.memory is not None:
                    self.memory = self.memory.replace(last_key=None)
                await self._round_failed(exc, delay)
                await asyncio.sleep(delay)
                self.burst_started = started
                self.flag.set()
            else:
                self.round_failures = 0

    async def _round_failed(self, exc: Exception, delay_s: float) -> None:
        """``Degraded=True`` (``RoundFailed``) on the WorkerGroup, best effort."""
        group = self.ctx.views.group(self.namespace, self.name)
        if group is None:
            return
        message = (f"{self.round_failures} round(s) failed in a row, retrying in "
                   f"{delay_s:.1f}s: {exc}")[:1024]
        await self._conditions(group, [status.Condition("Degraded", True, "RoundFailed",
                                                        message)], what="the failed round")

    async def _conditions(self, group: views.GroupView, wanted: Sequence[status.Condition],
                          *, what: str) -> bool:
        """Patch only these conditions (the others kept), unless they are there already;
        False when the patch failed."""
        previous = group.status.get("conditions") or []
        types = {c.type for c in wanted}
        kept = [c for c in previous if isinstance(c, dict) and c.get("type") not in types]
        written = status.conditions(
            wanted, previous=previous, generation=group.generation,
            now=views.format_time(round(self.clock() * 1000)))
        if status.same_status({"conditions": previous},
                              {"conditions": [*kept, *written]}):
            return True
        try:
            await self.ctx.client.patch_status("workergroups", self.namespace, self.name,
                                               {"conditions": [*kept, *written]})
        except apierrors.ApiError as error:
            logger.warning("%s: cannot report %s: %s", self.key, what, error)
            return False
        return True

    async def _refused(self, group: views.GroupView, decided: control.Step) -> None:
        """A spec the step cannot act on: its conditions, Event and count; nothing else.
        Conditions that could not be written are tried again (``retry_s``, doubled per
        failure in a row, at most ``max_retry_s``): nothing else may poke the group."""
        for reason in decided.metrics.bad_input:
            metrics.BAD_INPUT.labels(reason).inc()
        for event in decided.events:
            logger.warning("%s: %s", self.key, event.message)
            self._post(involved=self._involved(group), reason=event.reason,
                       message=event.message, warning=event.warning)
        if await self._conditions(group, decided.refused, what="the invalid spec"):
            self.unreported = 0
            return
        self.unreported += 1
        delay = settings.retry_delay_s(self.ctx.retry_s, self.ctx.max_retry_s, self.unreported)
        self.wake_at_ms = round((self.clock() + delay) * 1000)

    def _involved(self, group: views.GroupView) -> dict[str, str]:
        return {"apiVersion": f"{views.GROUP}/{views.VERSION}", "kind": "WorkerGroup",
                "namespace": self.namespace, "name": self.name, "uid": group.uid}

    # --- one round ------------------------------------------------------------

    async def gather(self, group: views.GroupView) -> tuple[control.Inputs, control.Memory]:
        """The step's inputs (reading what the views cannot tell) and the memory to use."""
        configmaps = {cm.member: cm for cm in self.ctx.views.configmaps(self.namespace,
                                                                        self.name)}
        if self.memory is None:
            leases = list(self.ctx.views.leases(self.namespace))
            members = set(control.leased_members(group, self.ctx.views.pods(self.namespace),
                                                 leases))
            self.memory = control.restored(group, configmaps, reported=[
                lease.report.generation for lease in leases
                if lease.member in members and lease.report is not None])
            self.caches = control.Caches()
            assigned = self.memory.persisted.state.assignments
            self.writer.reset(configmaps, unreadable=[m for m in configmaps
                                                      if m not in assigned])
            logger.info("%s: restored generation %d, %d ConfigMaps", self.key,
                        self.memory.persisted.state.generation, len(configmaps))
        inputs = control.Inputs(
            group=group, pods=list(self.ctx.views.pods(self.namespace)),
            leases=await self._confirmed(group, list(self.ctx.views.leases(self.namespace))),
            released=list(self.ctx.views.released(self.namespace)),
            connectors=list(self.ctx.views.connectors(self.namespace, self.name)),
            configmaps=configmaps, leader=self.ctx.identity,
            leader_epoch=self.writer.epoch,
            others=[g for g in self.ctx.views.groups_of(self.namespace) if g.name != self.name])
        owners: dict[control.Owner, control.OwnerFacts] = {}
        for kind, name in sorted(control.owners_to_read(inputs, self.memory)):
            try:
                exists, replicas = await self.ctx.client.read_owner(self.namespace, kind, name)
            except apierrors.ApiError as exc:
                logger.warning("%s: cannot read %s %s: %s", self.key, kind, name, exc)
                continue
            owners[(kind, name)] = control.OwnerFacts(exists, replicas)
        rollouts: dict[control.Owner, control.RolloutFacts] = {}
        wanted = rollout.owners_to_read(inputs)
        if wanted:
            try:
                rollouts = await self.ctx.client.read_rollouts(self.namespace, wanted)
            except apierrors.ApiError as exc:  # decide without: no member counts as outdated
                logger.warning("%s: cannot read the pods' rollouts: %s", self.key, exc)
        live = [ids.WorkerId(lease.member) for lease in inputs.leases]
        edits = await self.writer.edits(live, configmaps)
        # A document we did not plan may carry a newer generation than any we issued:
        # the member's rewrite must be newer still, or its worker ignores it.
        self.memory = self.memory.issuing_above(self.writer.newest_found)
        return dataclasses.replace(inputs, owners=owners, edits=edits,
                                   rollouts=rollouts), self.memory

    async def _confirmed(self, group: views.GroupView, leases: list[views.LeaseView]
                         ) -> list[views.LeaseView]:
        """``leases`` with those that expired as the watch shows them read again
        (``liveness.expired``): a member departs on what the API holds, not on a copy a
        silent watch stopped updating. What was read stands in for the copy it replaced
        until the watch shows another; one that cannot be read is decided on as shown."""
        assert self.memory is not None
        indexed = {lease.name: lease for lease in leases}
        self._reread = {name: kept for name, kept in self._reread.items()
                        if name in indexed and liveness.fingerprint(indexed[name]) == kept[0]}
        shown = {lease.name: self._reread[lease.name][1] if lease.name in self._reread
                 else lease for lease in leases}
        stale = liveness.expired(
            [lease for lease in shown.values() if lease is not None],
            self.memory.volatile.observed, now_ms=round(self.clock() * 1000),
            default_duration_s=group.lease_duration_s, skew_s=group.clock_skew_s)
        for name in sorted(stale):
            self.rereads += 1
            try:
                fresh: views.LeaseView | None = views.parse_lease(
                    await self.ctx.client.read_lease(self.namespace, name))
            except apierrors.NotFound:
                fresh = None
            except apierrors.ApiError as exc:
                logger.warning("%s: cannot read Lease %s again: %s", self.key, name, exc)
                continue
            seen = liveness.fingerprint(indexed[name])
            if fresh is None or liveness.fingerprint(fresh) != seen:
                self._reread[name] = (seen, fresh)
                shown[name] = fresh
        return [lease for lease in shown.values() if lease is not None]

    async def round(self, *, burst_started: float | None = None) -> RoundResult | None:
        """Plan once and write the result; returns None when nothing needed doing."""
        group = self.ctx.views.group(self.namespace, self.name)
        if group is None:
            return None
        if self.memory is None and not await self.writer.fence(group, {
                cm.member: cm for cm in self.ctx.views.configmaps(self.namespace, self.name)},
                members=control.leased_members(group, self.ctx.views.pods(self.namespace),
                                               self.ctx.views.leases(self.namespace))):
            self.steps_run += 1
            return None  # our fencing writes come back through the watch: then restore
        t_read = time.perf_counter()
        now_ms = round(self.clock() * 1000)
        inputs, memory = await self.gather(group)
        if self.replan or (self.ctx.connector_status
                           and self.statuses.recreated(inputs.connectors)):
            memory = memory.replace(last_key=None)  # same inputs, but a status to write
            self.replan = False
        started = time.perf_counter()
        decided = control.step(inputs, memory, now_ms=now_ms, caches=self.caches)
        compute_s = time.perf_counter() - started
        plan = decided.plan
        if plan is None or decided.snapshot is None:
            self.memory = decided.memory
            self.wake_at_ms = decided.wake_at_ms
            self.steps_run += 1
            if decided.refused:
                await self._refused(group, decided)
            return None
        t_write = time.perf_counter()
        decided, deleted, failed, t_status = await self._execute(group, decided, memory)
        latency = (time.monotonic() - burst_started) if burst_started is not None else None
        if decided.configmap_writes and latency is not None:
            metrics.LATENCY.labels(self.key).observe(latency)
        t_done = time.perf_counter()
        self.memory = decided.memory
        self.wake_at_ms = decided.wake_at_ms
        if self.steps is not None:
            self.steps.append((inputs, memory, now_ms, decided))
        self.after(group, decided, compute_s=compute_s, now_ms=now_ms)
        written = len(decided.configmap_writes)
        result = RoundResult(
            generation=plan.state.generation, changed=len(plan.changed),
            written=written - len(failed), failed=len(failed), deleted=deleted,
            compute_s=compute_s, latency_s=latency if written else None,
            phases=(("read", started - t_read), ("plan", compute_s),
                    ("write", t_status - t_write), ("status", t_done - t_status)),
        )
        self.results.append(result)
        self.rounds_planned += 1
        self.steps_run += 1
        self._warm(decided, now_ms)
        del self.results[:-100]
        return result

    async def _execute(self, group: views.GroupView, decided: control.Step,
                       before: control.Memory,
                       ) -> tuple[control.Step, int, frozenset[ids.WorkerId], float]:
        """Make the step's writes in ``Step.phases()`` order (the one place it is stated),
        a phase's writes in parallel. Returns the step as the ConfigMap writes left it
        (``Step.failed``: the final status then says which failed), how many ConfigMaps
        were deleted, which writes failed, and when the final status write began.
        ``before``: the memory the step planned from."""
        original = decided
        deleted, failed, t_status = 0, frozenset[ids.WorkerId](), time.perf_counter()
        for phase in original.phases():
            first = phase[0]
            if isinstance(first, control.DeleteConfigMap):
                deleted = await self.writer.delete(
                    w.member for w in phase if isinstance(w, control.DeleteConfigMap))
            elif isinstance(first, control.WriteConfigMap):
                failed = await self.writer.configmaps(
                    [w.assignment for w in phase if isinstance(w, control.WriteConfigMap)],
                    group_uid=group.uid)
                decided = decided.failed(failed, retry_ms=int(self.ctx.retry_s * 1000))
            else:
                for write in phase:
                    assert isinstance(write, control.WriteStatus)
                    final = write.status is original.status
                    if final:
                        t_status = time.perf_counter()
                        # The ConfigMaps are written: this round's generation is out. If
                        # the status write fails, the retry must plan after it, never
                        # again at it (a worker ignores a generation it already holds),
                        # and post the warnings this round found, which ``after`` never
                        # will (the Events it deduplicates are those of ``before``).
                        self.memory = decided.memory.replace(
                            reported=before.volatile.reported)
                    assert decided.status is not None
                    await self.writer.group_status(group, decided.status if final
                                                   else write.status)
        return decided, deleted, failed, t_status

    def after(self, group: views.GroupView, decided: control.Step, *, compute_s: float,
              now_ms: int) -> None:
        """Events, metrics, the audit log and the Connector statuses of a planned step."""
        plan, snap, previous = decided.plan, decided.snapshot, decided.previous
        assert plan is not None
        assert snap is not None
        assert previous is not None
        for reason in decided.metrics.bad_input:
            metrics.BAD_INPUT.labels(reason).inc()
        metrics.IGNORED_LEASES.labels(self.key).set(decided.metrics.ignored_leases)
        if decided.metrics.connector_restarts:
            metrics.CONNECTOR_RESTARTS.labels(self.key).inc(decided.metrics.connector_restarts)
        metrics.observe_failures(self.key, failed=decided.metrics.failed_resources,
                                 restarts=decided.metrics.resource_restarts,
                                 rejected=decided.metrics.rejected_resources)
        metrics.observe_pacing(self.key, deferred=decided.metrics.balancing_deferred,
                               pending=decided.metrics.balancing_pending)
        by_name = {c.name: c for c in decided.connectors.connectors} if decided.connectors \
            else {}
        for event in decided.events:
            if event.connector:
                connector = by_name[event.connector]
                involved = {"apiVersion": f"{views.GROUP}/{views.VERSION}", "kind": "Connector",
                            "namespace": connector.namespace, "name": connector.name,
                            "uid": connector.uid}
            else:
                involved = self._involved(group)
            self._post(involved=involved, reason=event.reason, message=event.message,
                       warning=event.warning)
        self.ctx.audit.write(audit.rows(
            previous=previous, plan=plan, group=self.key, policy=str(group.settings.policy),
            run=self.ctx.run_id, now_ms=now_ms, snapshot=snap))
        if self.ctx.connector_status and decided.connectors is not None:
            self.statuses.queue(decided.connectors, now_ms)
        metrics.observe_round(
            self.key, plan=plan, snapshot=snap, compute_s=compute_s, now_ms=now_ms,
            revoked=sum(len(r) for r in audit.revoked(previous, plan).values()),
            imbalance=status.imbalance(plan), grace_ms=decided.metrics.grace_ms,
        )

    def _warm(self, decided: control.Step, now_ms: int) -> None:
        """Rehearse a departure once per cache (``warmup``), after this round's writes.

        Again when the configured resources change (a new configuration resets the
        assignor's indexes), but only once they stayed the same for two planned rounds:
        connectors created one by one would otherwise pay a rehearsal per round.
        """
        assert decided.snapshot is not None
        configured = self.caches.configured_of(decided.snapshot)
        cache = self.caches.assignor
        stable = configured is self._planned_configured
        self._planned_configured = configured
        if self._warmed is not None and self._warmed[0] is cache and (
                self._warmed[1] is configured or not stable):
            return
        started = time.perf_counter()
        if warmup.warm(cache, decided.snapshot, decided.memory.persisted.state, now_ms=now_ms,
                       configured=configured):
            self.warmups += 1
            self._warmed = (cache, configured)
            logger.debug("%s: rehearsed a departure to warm the assignor's cache in %.0f ms",
                         self.key, (time.perf_counter() - started) * 1000)

    def _post(self, *, involved: Mapping[str, str], reason: str, message: str,
              warning: bool) -> None:
        """Post an Event in the background, without holding the round up. An answer that
        may change (unreachable, 5xx) is tried again (``retry_s``, doubled per try,
        ``EVENT_TRIES`` in all; a 429 the client already waits out, ``kube.Client``);
        what is still not posted, or refused, is logged and counted
        (``kooper_events_dropped_total``)."""
        async def post() -> None:
            for attempt in range(1, EVENT_TRIES + 1):
                try:
                    await self.ctx.client.post_event(
                        involved=involved, reason=reason, message=message, warning=warning,
                        reporter=self.ctx.identity)
                    return
                except _TRANSIENT as exc:
                    if attempt == EVENT_TRIES:
                        _dropped(self.key, reason, exc)
                        return
                    await asyncio.sleep(settings.retry_delay_s(
                        self.ctx.retry_s, self.ctx.max_retry_s, attempt))
                except apierrors.ApiError as exc:
                    _dropped(self.key, reason, exc)
                    return

        task = asyncio.get_running_loop().create_task(post())
        _background.add(task)
        task.add_done_callback(_background.discard)


_background: set[asyncio.Task[None]] = set()

EVENT_TRIES = 5
"""Tries of an Event the API server did not answer or answered 5xx."""
_TRANSIENT = (apierrors.Unreachable, apierrors.ServerError)


def _dropped(key: str, reason: str, error: apierrors.ApiError) -> None:
    logger.warning("%s: posting a %s Event failed: %s", key, reason, error)
    metrics.EVENTS_DROPPED.inc()
