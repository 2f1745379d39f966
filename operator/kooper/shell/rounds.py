"""One asyncio task per WorkerGroup: wait for a burst of events, run one round.

A round reads the kopf index views, builds a ``Snapshot``, calls the pure
``assignor.plan``, and writes, in this order (the order is what makes an operator
restart at any moment safe, see ``state.py``):

1. the ConfigMaps in ``Plan.changed`` (plus any edited or deleted by hand),
   each with a ``resourceVersion`` precondition, in parallel;
2. the WorkerGroup status, including the persisted planner state, with a
   ``resourceVersion`` precondition (a 409 from another operator's newer round
   makes this one start over from what is persisted);
3. deletions of departed members' ConfigMaps;
4. Connector statuses that changed, Events, the audit log and metrics.

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
from collections.abc import Iterable, Mapping
from typing import Any, Protocol

from kooper.core import assignor, errors, ids, model
from kooper.protocol import codec, messages
from kooper.shell import (
    audit,
    kube,
    liveness,
    metrics,
    placement,
    snapshot,
    state,
    status,
    views,
    warmup,
)

logger = logging.getLogger("kooper.shell")


class Views(Protocol):
    """Read access to the watched objects (kopf indexes in the operator)."""

    def group(self, namespace: str, name: str) -> views.GroupView | None:
        """The WorkerGroup, if it exists."""

    def pods(self, namespace: str) -> Iterable[views.PodView]:
        """Every pod of the namespace."""

    def leases(self, namespace: str) -> Iterable[views.LeaseView]:
        """Every member Lease of the namespace."""

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
    connector_status: bool = True
    connector_status_delay_s: float = 0.5
    """Connector statuses wait this long after a round, so that a placement and the
    members' reports that follow it land in one patch per connector, not two."""
    connector_status_max_wait_s: float = 2.0
    """...and keep waiting, up to this long, while members have not applied their
    latest document yet (their reports will change ``running``)."""


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


class Restart(errors.KooperError):
    """Another writer is ahead of us: drop in-memory state and restore from the API."""


class GroupRunner:
    """The rebalancing loop of one WorkerGroup."""

    def __init__(self, context: Context, namespace: str, name: str) -> None:
        self.ctx = context
        self.namespace = namespace
        self.name = name
        self.key = f"{namespace}/{name}"
        self.flag = asyncio.Event()
        self.burst_started: float | None = None
        self.previous: model.PlanState | None = None
        self.last_plan: model.Plan | None = None
        self.last_inputs: tuple[object, ...] | None = None
        self.written: dict[str, tuple[str, str]] = {}
        """member → (resourceVersion, text) of the ConfigMap as we last wrote it."""
        self.good_reports: dict[ids.WorkerId, messages.Report] = {}
        self.given: dict[ids.WorkerId, tuple[str, model.ConnectorsAndTasks]] = {}
        """member → (incarnation, everything ever written to its ConfigMap since)."""
        self.pod_owners: dict[str, tuple[str, str]] = {}
        self.permanent: dict[str, bool] = {}
        self.group_rv: str | None = None
        self.last_status: Mapping[str, Any] | None = None
        self.connector_statuses: dict[str, dict[str, Any]] = {}
        self._connector_generations: dict[str, int] = {}
        self._holders = placement.Placement()
        """Where each resource is assigned, as of the last Connector statuses."""
        self._owned = placement.Placement()
        """Who reports running each resource, as of the last Connector statuses."""
        self.reported: set[tuple[str, str]] = set()
        """(reason, subject) of bad-input Events already posted (no spam)."""
        self.conditions_state: dict[str, str] = {}
        self.wake_at_ms: int | None = None
        self.task: asyncio.Task[None] | None = None
        self._connectors_wanted: tuple[model.Plan, model.Snapshot,
                                       list[views.ConnectorView], int] | None = None
        self._connectors_task: asyncio.Task[None] | None = None
        self._connectors_settled = True
        """Whether every member had applied its document in the round last queued."""
        self.restarts_done: dict[str, dict[str, Any]] = {}
        """connector → ``status.restart`` record of the last restart value acted on."""
        self.restarts_pending: dict[str, tuple[str, frozenset[str]]] = {}
        """connector → (value, resources whose member's write failed: restart them again)."""
        self._connectors_dirty: set[str] = set()
        self._encoded: tuple[model.PlanState, dict[str, Any]] | None = None
        self._claims: dict[ids.WorkerId, tuple[model.ConnectorsAndTasks, ...]] = {}
        """member → (owned, given, configured, unknown claims) of the last round."""
        self.cache = assignor.Cache()
        """The assignor's indexes of this group's last rounds: a round costs what changed."""
        self._configured_cache: tuple[tuple[tuple[str, int], ...],
                                      model.ConnectorsAndTasks] | None = None
        self._warmed: tuple[assignor.Cache, model.ConnectorsAndTasks | None] | None = None
        """(cache, configured resources) ``warmup.warm`` last rehearsed a departure for."""
        self._planned_configured: model.ConnectorsAndTasks | None = None
        """The configured resources of the round planned before this one."""
        self.warmups = 0
        """Departures rehearsed to warm the cache (tests read it)."""
        self.own_versions: dict[str, list[str]] = {}
        """member → resourceVersions of our own last few writes of its ConfigMap."""
        self.results: list[RoundResult] = []
        """The last 100 rounds that planned (tests and the benchmark read them)."""
        self.rounds_planned = 0

    @property
    def patching_connectors(self) -> bool:
        """Whether Connector statuses are queued or being patched (they trail the round)."""
        return self._connectors_task is not None and not self._connectors_task.done()

    # --- loop ---------------------------------------------------------------

    def poke(self) -> None:
        """Something changed: plan soon (coalesced with whatever else happens)."""
        if self.burst_started is None:
            self.burst_started = time.monotonic()
        self.flag.set()

    def start(self) -> None:
        """Start the loop as a task of the running event loop."""
        if self.task is None or self.task.done():
            self.task = asyncio.get_running_loop().create_task(self.loop(), name=self.key)
            self.poke()

    async def stop(self) -> None:
        """Cancel the loop and wait for it."""
        if self._connectors_task is not None:
            self._connectors_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._connectors_task
        if self.task is not None:
            self.task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.task

    async def loop(self) -> None:
        """Wait for a poke or a timer, debounce, run a round; never dies on a round's error."""
        while True:
            timeout = None
            if self.wake_at_ms is not None:
                timeout = max(0.0, self.wake_at_ms / 1000 - time.time())
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
            except Restart as exc:
                logger.warning("%s: %s; restoring state from the API", self.key, exc)
                self.previous = None
                self.last_inputs = None
                self.poke()
            except Exception:
                logger.exception("%s: round failed; retrying in %.1fs", self.key,
                                 self.ctx.retry_s)
                metrics.ROUND_ERRORS.labels(self.key).inc()
                self.last_inputs = None
                await asyncio.sleep(self.ctx.retry_s)
                self.burst_started = started
                self.flag.set()

    # --- one round ------------------------------------------------------------

    async def round(self, *, burst_started: float | None = None) -> RoundResult | None:
        """Plan once and write the result; returns None when nothing needed doing."""
        group = self.ctx.views.group(self.namespace, self.name)
        if group is None:
            return None
        t_read = time.perf_counter()
        now_ms = int(time.time() * 1000)
        pods = list(self.ctx.views.pods(self.namespace))
        found = snapshot.collect_members(
            group, pods=pods, leases=self.ctx.views.leases(self.namespace),
            last_good=self.good_reports, now_ms=now_ms,
        )
        for member, report in found.reports.items():
            self.good_reports[member] = report
        for pod in found.pods.values():
            if pod.owner_kind:
                self.pod_owners[pod.name] = (pod.owner_kind, pod.owner_name)
        connectors = list(self.ctx.views.connectors(self.namespace, self.name))
        configmaps = {cm.member: cm for cm in self.ctx.views.configmaps(self.namespace, self.name)}
        if self.previous is None:
            self._restore(group, configmaps)
        previous = self.previous
        assert previous is not None
        pods_by_name = {pod.name: pod for pod in pods}
        permanent = await self._permanent_departures(previous, found.members, pods_by_name)
        restarts = self._restarts(connectors)
        snap = snapshot.build(group, connectors=connectors, members=found.members,
                              departed_permanently=permanent,
                              restarts=(r for _, resources in restarts.values() for r in resources))
        edited = await self._edited_configmaps(found.members, configmaps)
        due = previous.delay is not None and previous.delay.deadline_ms <= now_ms
        inputs = (snap, group.generation, found.issues, len(found.pods),
                  tuple(sorted((c.name, tuple(sorted(c.config.items())), c.state, c.restart)
                               for c in connectors)))
        if inputs == self.last_inputs and not edited and not due and self.last_plan is not None:
            self._schedule(self.last_plan, found.next_expiry_ms, now_ms)
            return None

        started = time.perf_counter()
        read_s = started - t_read
        configured = self._configured(snap)
        plan = assignor.plan(snap, previous, now_ms=now_ms, configured=configured,
                             cache=self.cache)
        compute_s = time.perf_counter() - started

        # Before the writes: what a member was never given is judged against earlier rounds.
        problems = self._problems(found, snap, configured)
        _, states = snapshot.wanted(connectors)
        configs = {c.name: c.config for c in connectors}
        to_write = set(plan.changed) | {m for m in edited if m in plan.members}
        t_write = time.perf_counter()
        failed = await self._write_configmaps(plan, to_write, configs=configs, states=states,
                                              policy=str(group.settings.policy))
        self._restarts_written(restarts, plan, failed, now_ms)
        latency = (time.monotonic() - burst_started) if burst_started is not None else None
        if to_write and latency is not None:
            metrics.LATENCY.labels(self.key).observe(latency)
        new_state = state.merge_partial(previous, plan.state, failed)

        pending = tuple(
            member for member, member_plan in plan.members.items()
            if snap.members[member].generation < member_plan.generation
        )
        facts = status.GroupFacts(snapshot=snap, plan=plan, now_ms=now_ms,
                                  pods_matched=len(found.pods), problems=problems,
                                  pending=pending)
        t_status = time.perf_counter()
        await self._patch_group_status(group, facts, new_state)
        t_done = time.perf_counter()
        deleted = await self._delete_departed(plan, configmaps)

        self.previous = new_state
        self.last_plan = plan
        self.last_inputs = inputs if not failed else None
        await self._after_round(group, previous=previous, plan=plan, snap=snap,
                                connectors=connectors, now_ms=now_ms, pending=bool(pending),
                                restarted=[name for name in sorted(restarts)
                                           if name not in self.restarts_pending])
        metrics.observe_round(
            self.key, plan=plan, snapshot=snap, compute_s=compute_s, now_ms=now_ms,
            revoked=sum(len(m.revoked) for m in plan.members.values()),
            imbalance=status.imbalance(plan),
        )
        self._schedule(plan, found.next_expiry_ms, now_ms, retry=bool(failed))
        result = RoundResult(
            generation=plan.state.generation, changed=len(plan.changed),
            written=len(to_write) - len(failed), failed=len(failed), deleted=deleted,
            compute_s=compute_s, latency_s=latency if to_write else None,
            phases=(("read", read_s), ("plan", compute_s), ("write", t_status - t_write),
                    ("status", t_done - t_status)),
        )
        self.results.append(result)
        self.rounds_planned += 1
        self._warm(snap, new_state, configured, now_ms)
        del self.results[:-100]
        return result

    # --- restarts (kooper.dev/restart) -------------------------------------------------

    def _restarts(self, connectors: list[views.ConnectorView]
                  ) -> dict[str, tuple[str, frozenset[str]]]:
        """connector → (new restart value, resources to restart in place this round)."""
        handled = {name: str(record["observed"]) for name, record in self.restarts_done.items()}
        requested = snapshot.restart_requests(connectors, handled=handled)
        counts, _ = snapshot.wanted(connectors)
        result: dict[str, tuple[str, frozenset[str]]] = {}
        for name, value in requested.items():
            pending = self.restarts_pending.get(name)
            if pending is not None and pending[0] == value:
                result[name] = pending
            else:
                result[name] = (value, snapshot.restart_resources(name, counts.get(name, 0)))
        for name in list(self.restarts_pending):
            if name not in result:
                del self.restarts_pending[name]
        present = {connector.name for connector in connectors}
        for name in list(self.restarts_done):
            if name not in present:
                del self.restarts_done[name]  # Deleted: a new one by this name starts afresh.
        return result

    def _restarts_written(self, restarts: Mapping[str, tuple[str, frozenset[str]]],
                          plan: model.Plan, failed: set[ids.WorkerId], now_ms: int) -> None:
        """Mark restarts done, except for resources of members whose write failed.

        Those stay pending: the next round bumps their epochs again and writes their
        members (who never saw the first bump), so each resource restarts once.
        """
        for name, (value, resources) in restarts.items():
            left: set[str] = set()
            for member in failed:
                member_plan = plan.members.get(member)
                if member_plan is not None:
                    left.update(r for r in resources if r in member_plan.assigned)
            if left:
                self.restarts_pending[name] = (value, frozenset(left))
                continue
            self.restarts_pending.pop(name, None)
            self.restarts_done[name] = status.restart_record(
                value, now_ms=now_ms, generation=plan.state.generation)
            self._connectors_dirty.add(name)

    def _configured(self, snap: model.Snapshot) -> model.ConnectorsAndTasks:
        """``snap.configured()``, rebuilt only when task counts change (100,000 strings)."""
        key = tuple(sorted(snap.connectors.items()))
        if self._configured_cache is None or self._configured_cache[0] != key:
            self._configured_cache = (key, snap.configured())
        return self._configured_cache[1]

    def _warm(self, snap: model.Snapshot, new_state: model.PlanState,
              configured: model.ConnectorsAndTasks, now_ms: int) -> None:
        """Rehearse a departure once per cache (``warmup``), after this round's writes.

        Again when the configured resources change (a new configuration resets the
        assignor's indexes), but only once they stayed the same for two planned rounds:
        connectors created one by one would otherwise pay a rehearsal per round.
        """
        stable = configured is self._planned_configured
        self._planned_configured = configured
        if self._warmed is not None and self._warmed[0] is self.cache and (
                self._warmed[1] is configured or not stable):
            return
        started = time.perf_counter()
        if warmup.warm(self.cache, snap, new_state, now_ms=now_ms, configured=configured):
            self.warmups += 1
            self._warmed = (self.cache, configured)
            logger.debug("%s: rehearsed a departure to warm the assignor's cache in %.0f ms",
                         self.key, (time.perf_counter() - started) * 1000)

    def _schedule(self, plan: model.Plan, expiry_ms: int | None, now_ms: int, *,
                  retry: bool = False) -> None:
        candidates = [t for t in (plan.next_round_at_ms, expiry_ms) if t is not None]
        if retry:
            candidates.append(now_ms + int(self.ctx.retry_s * 1000))
        self.wake_at_ms = min(candidates) if candidates else None

    # --- restore ----------------------------------------------------------------

    def _restore(self, group: views.GroupView,
                 configmaps: Mapping[str, views.ConfigMapView]) -> None:
        restored = state.restore(
            group.status.get("state"),
            ((member, cm.text) for member, cm in configmaps.items()),
            group=self.name,
        )
        self.previous = restored.state
        self.cache = assignor.Cache()
        self._encoded = None
        self.written = {
            member: (cm.resource_version, cm.text)
            for member, cm in configmaps.items()
            if member not in restored.unreadable
        }
        for member, assigned in restored.state.assignments.items():
            given = assigned.union(restored.state.revoking.get(member, model.EMPTY))
            self.given[member] = (restored.state.incarnations.get(member, ""), given)
        self.group_rv = None
        self.last_status = None
        logger.info("%s: restored generation %d, %d ConfigMaps, delay %s", self.key,
                    restored.state.generation, len(configmaps),
                    restored.state.delay.deadline_ms if restored.state.delay else None)

    # --- departures ---------------------------------------------------------------

    async def _permanent_departures(
        self, previous: model.PlanState, members: Mapping[ids.WorkerId, model.Member],
        pods: Mapping[str, views.PodView],
    ) -> set[ids.WorkerId]:
        absent = {m for m in previous.assignments if m not in members}
        absent.update(m for m in previous.lost if m not in members)
        for member in list(self.permanent):
            if member in members:
                del self.permanent[member]
        result: set[ids.WorkerId] = set()
        for member in sorted(absent):
            pod = pods.get(member)
            if pod is not None and not pod.deleting:
                continue  # Lease expired but the pod is there: it may recover.
            if member not in self.permanent:
                kind, owner = self.pod_owners.get(member, ("", ""))
                exists, replicas = True, None
                if kind in liveness.PERMANENT_OWNER_KINDS:
                    try:
                        exists, replicas = await self.ctx.client.read_owner(
                            self.namespace, kind, owner)
                    except kube.KubeError as exc:
                        logger.warning("%s: cannot read %s %s: %s", self.key, kind, owner, exc)
                        continue
                self.permanent[member] = liveness.permanently_departed(
                    pod_name=member, owner_kind=kind, owner_name=owner,
                    owner_exists=exists, replicas=replicas,
                )
            if self.permanent[member]:
                result.add(ids.WorkerId(member))
        return result

    # --- ConfigMaps -------------------------------------------------------------------

    async def _edited_configmaps(
        self, members: Mapping[ids.WorkerId, model.Member],
        configmaps: Mapping[str, views.ConfigMapView],
    ) -> set[ids.WorkerId]:
        """Live members whose ConfigMap differs from what we wrote (edited or deleted)."""
        edited: set[ids.WorkerId] = set()
        suspects = []
        for member in members:
            ours = self.written.get(member)
            if ours is None:
                continue
            cm = configmaps.get(member)
            if cm is not None and (cm.resource_version == ours[0] or cm.text == ours[1]
                                   or cm.resource_version in self.own_versions.get(member, ())):
                # Ours, or an older write of ours the watch has not caught up with yet.
                continue
            suspects.append(member)
        # Confirm with a fresh read before acting (in parallel: the index may lag a lot).
        await asyncio.gather(*(self._check_edited(member, edited) for member in suspects))
        return edited

    async def _check_edited(self, member: ids.WorkerId, edited: set[ids.WorkerId]) -> None:
        """Read a ConfigMap the index shows differently from our last write; flag edits."""
        ours = self.written[member]
        try:
            body = await self.ctx.client.read_configmap(self.namespace,
                                                        views.configmap_name(member))
        except kube.NotFoundError:
            self.written.pop(member, None)
            edited.add(member)
            self._report_once("ConfigMapDeleted", member,
                              f"ConfigMap {views.configmap_name(member)} was deleted; "
                              "rewriting it")
            return
        fresh = views.parse_configmap(body)
        if fresh.text != ours[1]:
            self.written[member] = (fresh.resource_version, fresh.text)
            edited.add(member)
            self.reported.discard(("ConfigMapEdited", member))
            self._report_once("ConfigMapEdited", member,
                              f"ConfigMap {views.configmap_name(member)} was changed by "
                              "someone else; rewriting it")
        else:
            self.written[member] = (fresh.resource_version, fresh.text)

    def _configmap_body(self, member: str, text: str, group: views.GroupView) -> dict[str, Any]:
        return {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": views.configmap_name(member),
                "namespace": self.namespace,
                "labels": {views.GROUP_LABEL: self.name, views.MEMBER_LABEL: member},
                "ownerReferences": [{
                    "apiVersion": f"{views.GROUP}/{views.VERSION}",
                    "kind": "WorkerGroup",
                    "name": self.name,
                    "uid": group.uid,
                    "controller": True,
                    "blockOwnerDeletion": True,
                }],
            },
            "data": {messages.CONFIGMAP_KEY: text},
        }

    async def _write_configmaps(
        self, plan: model.Plan, members: Iterable[ids.WorkerId], *,
        configs: Mapping[str, Mapping[str, str]], states: Mapping[str, str], policy: str,
    ) -> set[ids.WorkerId]:
        group = self.ctx.views.group(self.namespace, self.name)
        assert group is not None
        failed: set[ids.WorkerId] = set()

        async def write(member: ids.WorkerId) -> None:
            message = state.assignment_message(
                group=self.name, member=member, plan=plan.members[member],
                protocol=plan.protocol, policy=policy, delay_ms=plan.delay_ms,
                leader=self.ctx.identity, epochs=plan.state.epochs, configs=configs,
                states=states, incarnation=plan.state.incarnations.get(member, ""),
            )
            text = codec.encode_assignment(message)
            body = self._configmap_body(member, text, group)
            try:
                rv = await self._put_configmap(member, body)
            except kube.KubeError as exc:
                logger.warning("%s: writing %s failed: %s", self.key,
                               views.configmap_name(member), exc)
                failed.add(member)
                return
            self.written[member] = (rv, text)
            self.own_versions[member] = [*self.own_versions.get(member, ())[-3:], rv]
            incarnation = plan.state.incarnations.get(member, "")
            known = self.given.get(member)
            given = known[1] if known is not None and known[0] == incarnation else model.EMPTY
            self.given[member] = (
                incarnation, given.union(message.assigned).union(message.revoked))

        await asyncio.gather(*(write(member) for member in sorted(members)))
        return failed

    async def _put_configmap(self, member: str, body: Mapping[str, Any]) -> str:
        """Create or replace with a precondition; on 409 re-read and retry (we own the data)."""
        known = self.written.get(member)
        rv: str | None = known[0] if known else None
        for _ in range(5):
            try:
                return await self.ctx.client.write_configmap(body, resource_version=rv)
            except kube.ConflictError:
                metrics.CONFLICTS.labels("configmap").inc()
            except kube.NotFoundError:
                rv = None
                continue
            try:
                fresh = await self.ctx.client.read_configmap(self.namespace,
                                                             views.configmap_name(member))
                rv = str(fresh.get("metadata", {}).get("resourceVersion", ""))
            except kube.NotFoundError:
                rv = None
        raise kube.ConflictError(f"ConfigMap {views.configmap_name(member)}: still conflicting")

    async def _delete_departed(self, plan: model.Plan,
                               configmaps: Mapping[str, views.ConfigMapView]) -> int:
        gone = (set(configmaps) | set(self.written)) - set(plan.members)
        for member in gone:
            self.written.pop(member, None)
        await asyncio.gather(*(
            self.ctx.client.delete_configmap(self.namespace, views.configmap_name(member))
            for member in sorted(gone)
        ))
        return len(gone)

    # --- status -----------------------------------------------------------------------

    async def _patch_group_status(self, group: views.GroupView, facts: status.GroupFacts,
                                  new_state: model.PlanState) -> None:
        encoded = state.encode(new_state, previous=self._encoded)
        self._encoded = (new_state, encoded)
        base = self.last_status if self.last_status is not None else group.status
        rv = self.group_rv or group.resource_version
        for _ in range(5):
            wanted = status.group_status(facts, state=encoded, generation=group.generation,
                                         previous=base)
            patch = status.merge_patch(base, wanted)
            if not patch:
                return
            try:
                result = await self.ctx.client.patch_status(
                    "workergroups", self.namespace, self.name, patch, resource_version=rv)
            except kube.ConflictError:
                metrics.CONFLICTS.labels("workergroups/status").inc()
                fresh = await self.ctx.client.read_group(self.namespace, self.name)
                theirs = (fresh.get("status") or {}).get("rebalanceGeneration", 0)
                if isinstance(theirs, int) and theirs > new_state.generation:
                    raise Restart(f"the persisted generation {theirs} is ahead of ours "
                                  f"({new_state.generation}): another operator is active") from None
                base = fresh.get("status") or {}
                rv = str(fresh.get("metadata", {}).get("resourceVersion", ""))
                continue
            except kube.NotFoundError:
                return  # The group was deleted meanwhile.
            self.group_rv = str(result.get("metadata", {}).get("resourceVersion", "")) or None
            self.last_status = result.get("status") or wanted
            return
        raise kube.ConflictError(f"WorkerGroup {self.key} status: still conflicting")

    # --- events, connectors, audit ----------------------------------------------------------

    def _problems(self, found: snapshot.Members, snap: model.Snapshot,
                  configured: model.ConnectorsAndTasks) -> tuple[tuple[str, str], ...]:
        problems: list[tuple[str, str]] = []
        for issue in found.issues:
            problems.append((issue.reason, issue.message))
            self._report_once(issue.reason, f"{issue.member}:{issue.message}", issue.message)
        for member_id, member in snap.members.items():
            known = self.given.get(member_id)
            given = known[1] if known and known[0] == member.incarnation else model.EMPTY
            cached = self._claims.get(member_id)
            if cached is not None and cached[0] is member.owned and cached[1] is given \
                    and cached[2] is configured:
                claims = cached[3]  # Same objects as last round: 1,000 set operations saved.
            else:
                claims = snapshot.unknown_claims(member, given=given, configured=configured)
                self._claims[member_id] = (member.owned, given, configured, claims)
            if claims:
                message = (f"{member_id} reports running {status.describe(claims)} it was never "
                           f"given ({', '.join(claims.sorted()[:5])}); they are revoked")
                problems.append(("UnknownClaim", message))
                self._report_once("UnknownClaim", f"{member_id}/{member.incarnation}", message)
        for member_id in [m for m in self._claims if m not in snap.members]:
            del self._claims[member_id]
        if not found.pods:
            self._report_once("SelectorMatchesNoPods", "",
                              "spec.selector matches no pod in this namespace")
        else:
            self.reported.discard(("SelectorMatchesNoPods", ""))
        return tuple(problems)

    def _report_once(self, reason: str, subject: str, message: str) -> None:
        metrics.BAD_INPUT.labels(reason).inc()
        if (reason, subject) in self.reported:
            return
        self.reported.add((reason, subject))
        self._event(reason, message, warning=True)

    def _event(self, reason: str, message: str, *, warning: bool = False) -> None:
        group = self.ctx.views.group(self.namespace, self.name)
        if group is None:
            return
        involved = {
            "apiVersion": f"{views.GROUP}/{views.VERSION}", "kind": "WorkerGroup",
            "namespace": self.namespace, "name": self.name, "uid": group.uid,
        }
        self._spawn(self.ctx.client.post_event(
            involved=involved, reason=reason, message=message, warning=warning,
            reporter=self.ctx.identity))

    def _connector_event(self, connector: views.ConnectorView, reason: str, message: str
                         ) -> None:
        involved = {
            "apiVersion": f"{views.GROUP}/{views.VERSION}", "kind": "Connector",
            "namespace": connector.namespace, "name": connector.name, "uid": connector.uid,
        }
        self._spawn(self.ctx.client.post_event(
            involved=involved, reason=reason, message=message, reporter=self.ctx.identity))

    def _spawn(self, coro: Any) -> None:
        async def guarded() -> None:
            try:
                await coro
            except kube.KubeError as exc:
                logger.warning("%s: posting an Event failed: %s", self.key, exc)

        task = asyncio.get_running_loop().create_task(guarded())
        _background.add(task)
        task.add_done_callback(_background.discard)

    async def _after_round(
        self, group: views.GroupView, *, previous: model.PlanState, plan: model.Plan,
        snap: model.Snapshot, connectors: list[views.ConnectorView], now_ms: int,
        restarted: Iterable[str] = (), pending: bool = False,
    ) -> None:
        by_name = {connector.name: connector for connector in connectors}
        for name in restarted:
            record = self.restarts_done[name]
            metrics.CONNECTOR_RESTARTS.labels(self.key).inc()
            connector = by_name[name]
            count = 0 if connector.state == "stopped" else connector.tasks_max
            self._connector_event(
                connector, "ConnectorRestarted",
                f"kooper.dev/restart={record['observed']!r}: the instance and {count} task(s) "
                f"restart in place with new epochs (generation {record['rebalanceGeneration']})")
        gone = audit.departed(previous, plan)
        joined = [m for m in sorted(plan.members)
                  if m not in previous.assignments or m in gone]
        if joined:
            self._event("MemberJoined", f"{len(joined)} member(s) joined: "
                        + ", ".join(joined[:10]) + ("..." if len(joined) > 10 else ""))
        if gone:
            why = ("scale-down, reassigned now"
                   if set(gone) <= snap.departed_permanently else "pod gone or Lease expired")
            self._event("MemberDeparted", f"{len(gone)} member(s) departed ({why}): "
                        + ", ".join(gone[:10]) + ("..." if len(gone) > 10 else ""))
        if plan.changed:
            moved = sum(len(r) for r in plan.newly_assigned.values())
            revoked = sum(len(m.revoked) for m in plan.members.values())
            if plan.revoking:
                self._event("RevokingForBalance",
                            f"generation {plan.state.generation}: {revoked} resource(s) "
                            f"revoked from {sum(1 for m in plan.members.values() if m.revoked)} "
                            "member(s) to move them next round")
            else:
                self._event("RebalanceCompleted",
                            f"generation {plan.state.generation}: {moved} resource(s) assigned, "
                            f"{len(plan.changed)} ConfigMap(s) written, "
                            f"{len(plan.members)} member(s), protocol {plan.protocol}")
        if plan.state.delay is not None and (
            previous.delay is None or previous.delay.deadline_ms != plan.state.delay.deadline_ms
        ):
            self._event("DelayScheduled",
                        f"{status.describe(plan.state.lost_resources())} lost; rebalance "
                        f"scheduled in {plan.delay_ms // 1000}s at "
                        f"{views.format_time(plan.state.delay.deadline_ms)}")
        unassigned = len(plan.unassigned)
        if unassigned and plan.state.delay is None:
            if ("WorkUnassigned", str(unassigned)) not in self.reported:
                self.reported = {r for r in self.reported if r[0] != "WorkUnassigned"}
                self.reported.add(("WorkUnassigned", str(unassigned)))
                metrics.BAD_INPUT.labels("WorkUnassigned").inc()
                self._event("WorkUnassigned",
                            f"{status.describe(plan.unassigned)} unassigned: "
                            f"{'no live member' if not plan.members else 'waiting for members'}",
                            warning=True)
        else:
            self.reported = {r for r in self.reported if r[0] != "WorkUnassigned"}
        self.ctx.audit.write(audit.rows(
            previous=previous, plan=plan, group=self.key, policy=str(group.settings.policy),
            run=self.ctx.run_id, now_ms=now_ms,
        ))
        if self.ctx.connector_status:
            # Off the round's critical path, latest wins: a burst of rounds patches once.
            self._connectors_wanted = (plan, snap, connectors, now_ms)
            self._connectors_settled = not pending
            if self._connectors_task is None or self._connectors_task.done():
                self._connectors_task = asyncio.get_running_loop().create_task(
                    self._connectors_loop())

    async def _connectors_loop(self) -> None:
        since = time.monotonic()
        while True:
            await asyncio.sleep(self.ctx.connector_status_delay_s)
            if self._connectors_wanted is None:
                return
            if not self._connectors_settled and \
                    time.monotonic() - since < self.ctx.connector_status_max_wait_s:
                continue  # Members are still applying: one patch once they reported.
            wanted, self._connectors_wanted = self._connectors_wanted, None
            since = time.monotonic()
            try:
                ok = await self._patch_connectors(*wanted)
            except Exception:
                logger.exception("%s: Connector statuses failed", self.key)
                ok = False
            if not ok:
                # Retry what failed (a restart's ``observed`` must land) unless a newer
                # round already queued its own statuses.
                await asyncio.sleep(self.ctx.retry_s)
                if self._connectors_wanted is None:
                    self._connectors_wanted = wanted

    async def _patch_connectors(self, plan: model.Plan, snap: model.Snapshot,
                                connectors: list[views.ConnectorView], now_ms: int) -> bool:
        """Patch the statuses that changed; False when some patch failed."""
        # Only connectors with a resource whose holder or runner changed, or whose spec
        # changed, are recomputed: 100,000 task entries per round would be wasted work.
        dirty, self._connectors_dirty = self._connectors_dirty, set()
        dirty |= self._holders.update(
            {member: member_plan.assigned for member, member_plan in plan.members.items()})
        dirty |= self._owned.update({member: live.owned for member, live in snap.members.items()})
        holders, owned = self._holders.where, self._owned.where
        patches = []
        for number, connector in enumerate(connectors):
            if number % 100 == 99:
                await asyncio.sleep(0)  # 1,000 Connectors: let rounds run meanwhile
            seen = self._connector_generations.get(connector.name)
            if connector.name not in dirty and seen == connector.generation and \
                    connector.name in self.connector_statuses:
                continue
            self._connector_generations[connector.name] = connector.generation
            base = self.connector_statuses.get(connector.name) or connector.status
            restart = self.restarts_done.get(connector.name) or base.get("restart")
            wanted = status.connector_status(
                connector, holders=holders, owned=owned, epochs=plan.state.epochs,
                group_exists=True, restart=restart if isinstance(restart, Mapping) else None)
            settled = status.settle_connector_status(wanted, previous=base,
                                                     generation=connector.generation,
                                                     now_ms=now_ms)
            if status.same_status(base, settled):
                continue
            patches.append((connector.name, status.merge_patch(base, settled), settled))

        failed: set[str] = set()

        async def patch(name: str, body: dict[str, Any], settled: dict[str, Any]) -> None:
            try:
                await self.ctx.client.patch_status("connectors", self.namespace, name, body)
            except kube.NotFoundError:
                self.connector_statuses.pop(name, None)  # Deleted meanwhile: nothing to retry.
                return
            except kube.KubeError as exc:
                logger.warning("%s: Connector %s status: %s", self.key, name, exc)
                self.connector_statuses.pop(name, None)
                failed.add(name)
                return
            self.connector_statuses[name] = settled

        await asyncio.gather(*(patch(*item) for item in patches))
        self._connectors_dirty.update(failed)
        return not failed


_background: set[asyncio.Task[None]] = set()
