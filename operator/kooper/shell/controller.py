"""The operator-wide object: config, API client, one runner per WorkerGroup, wake-up rules.

kopf handlers call into this with the object they saw; this decides whether the
event matters for a round (a Lease renewal alone does not: only a changed report,
a new or deleted Lease, or a renewal after an expiry does) and pokes the runners
of the namespace. It also owns the Connector-level bad input that no group round
sees: a Connector naming a WorkerGroup that does not exist.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Coroutine, Iterable, Mapping
from typing import Any

from kooper.control import connector_status, status, views
from kooper.sdk import apierrors
from kooper.shell import (
    audit,
    credentials,
    gcfreeze,
    kube,
    leader,
    metrics,
    ownership,
    rounds,
    settings,
)
from kooper.shell.login import Login
from kooper.shell.writes import status_epoch

logger = logging.getLogger("kooper.shell")


RELEASED_KEPT = 1024
"""How many deleted member Leases' last versions ``IndexViews`` keeps (the oldest go first)."""


class IndexViews:
    """``rounds.Views`` over kopf indexes (``kopf.Index``: key → store of values), plus the
    last versions of deleted member Leases, which no index keeps."""

    def __init__(self, indices: Mapping[str, Any]) -> None:
        self._indices = indices
        self._released: dict[tuple[str, str], views.LeaseView] = {}

    def lease_deleted(self, lease: views.LeaseView) -> None:
        """Keep the last version of a deleted member Lease (its DELETED event's object)."""
        key = (lease.namespace, lease.name)
        self._released.pop(key, None)
        self._released[key] = lease
        while len(self._released) > RELEASED_KEPT:
            del self._released[next(iter(self._released))]

    def lease_back(self, lease: views.LeaseView) -> None:
        """A Lease of that name exists again: its deleted version says nothing any more."""
        self._released.pop((lease.namespace, lease.name), None)

    def released(self, namespace: str) -> Iterable[views.LeaseView]:
        """Deleted member Leases of a namespace, as they last were."""
        return [lease for (ns, _), lease in self._released.items() if ns == namespace]

    def _values(self, index: str, key: object) -> Iterable[Any]:
        store = self._indices[index].get(key)
        return list(store) if store is not None else []

    def newest_leader_epoch(self) -> int:
        """The newest leader epoch on a WorkerGroup or Connector status or a member
        ConfigMap (0: none)."""
        found = [status_epoch(group.status) for group in self.groups()]
        found += [status_epoch(connector.status)
                  for store in self._indices["kooper_connectors"].values()
                  for connector in store]
        found += [cm.leader_epoch for store in self._indices["kooper_configmaps"].values()
                  for cm in store]
        return max(found, default=0)

    def group(self, namespace: str, name: str) -> views.GroupView | None:
        """The WorkerGroup view, if indexed."""
        found: list[views.GroupView] = list(self._values("kooper_groups", (namespace, name)))
        return found[0] if found else None

    def groups(self) -> list[views.GroupView]:
        """Every WorkerGroup view."""
        return [value for store in self._indices["kooper_groups"].values() for value in store]

    def groups_of(self, namespace: str) -> Iterable[views.GroupView]:
        """Every WorkerGroup view of a namespace."""
        return [group for group in self.groups() if group.namespace == namespace]

    def pods(self, namespace: str) -> Iterable[views.PodView]:
        """Pods of a namespace."""
        return self._values("kooper_pods", namespace)

    def leases(self, namespace: str) -> Iterable[views.LeaseView]:
        """Member Leases of a namespace."""
        return self._values("kooper_leases", namespace)

    def connectors(self, namespace: str, group: str) -> Iterable[views.ConnectorView]:
        """Connectors naming ``group``."""
        return self._values("kooper_connectors", (namespace, group))

    def every_connector(self) -> list[views.ConnectorView]:
        """Every Connector view, whatever group it names."""
        return [value for store in self._indices["kooper_connectors"].values()
                for value in store]

    def configmaps(self, namespace: str, group: str) -> Iterable[views.ConfigMapView]:
        """kooper ConfigMaps of ``group``."""
        return self._values("kooper_configmaps", (namespace, group))


class Shell:
    """Everything the kopf handlers share (kept in kopf's ``memo``)."""

    def __init__(self, config: settings.Config, login: Login | None = None) -> None:
        self.config = config
        self.login = login
        """The one source of credentials (made at start when not given)."""
        self.kopf_token: str | None = None
        """The Authorization header last handed to kopf (None: kopf has not logged in)."""
        self.runners: dict[tuple[str, str], rounds.GroupRunner] = {}
        self.context: rounds.Context | None = None
        self.index_views: IndexViews | None = None
        self._leases: dict[tuple[str, str], tuple[str, int | None, int]] = {}
        self._pods: dict[tuple[str, str], tuple[object, ...]] = {}
        self._groups: dict[tuple[str, str], tuple[str, int]] = {}
        self._connectors: dict[tuple[str, str], tuple[object, ...]] = {}
        self._orphans: dict[tuple[str, str], str] = {}
        self._orphan_retries: dict[tuple[str, str], tuple[int, asyncio.Task[None]]] = {}
        """Connector → (failures in a row, the retry waiting) of its WorkerGroupNotFound."""
        self.audit: audit.AuditLog | None = None
        self._freezer: asyncio.Task[int] | None = None
        self.leading = not config.leader_election
        """Whether this replica runs rounds (always, without leader election)."""
        metrics.LEADER.set(int(self.leading))
        self.elector: leader.Elector | None = None
        self._election: asyncio.Task[None] | None = None
        self._background: set[asyncio.Task[None]] = set()
        self._adoption: asyncio.Task[None] | None = None

    # --- lifecycle ------------------------------------------------------------------

    def ensure_login(self) -> Login:
        """The login, made from the config on first use (``KooperError`` without credentials)."""
        if self.login is None:
            self.login = credentials.login(self.config, on_login=metrics.count_login)
        return self.login

    def start(self, indices: Mapping[str, Any]) -> None:
        """Build the client and the shared context (kopf startup)."""
        self.index_views = IndexViews(indices)
        self.audit = audit.AuditLog(self.config.audit_log)
        self.context = rounds.Context(
            client=kube.Client(self.ensure_login(), concurrency=self.config.write_concurrency),
            views=self.index_views,
            identity=self.config.identity,
            audit=self.audit,
            run_id=self.config.run_id,
            debounce_s=self.config.debounce_s,
            retry_s=self.config.retry_s,
            connector_status=self.config.connector_status,
            on_lost=self._lost_leadership,
        )
        owner = (ownership.Owner(self.context.client, self.config.leader_namespace,
                                 self.config.owner) if self.config.owner else None)
        if owner is not None and self._adoption is None and self._owns_peering():
            assert self.config.peering is not None
            self._adoption = asyncio.get_running_loop().create_task(
                owner.keep_owning_peering(self.config.peering), name="own-peering")
        if self.config.leader_election and self._election is None:
            self.elector = leader.Elector(
                client=self.context.client, namespace=self.config.leader_namespace,
                identity=self.config.identity, on_start=self._lead, on_stop=self._step_down,
                lease_s=self.config.leader_lease_s, renew_s=self.config.leader_renew_s,
                epoch_floor=self._epoch_floor, name=self.config.leader_lease,
                owner=owner)
            self._election = asyncio.get_running_loop().create_task(self.elector.run(),
                                                                    name="leader-election")
        if self.config.gc_freeze and self._freezer is None:
            self._freezer = asyncio.get_running_loop().create_task(
                gcfreeze.freeze_when_settled(self.runners.values), name="gc-freeze")

    def _owns_peering(self) -> bool:
        """Whether the peering object is a KopfPeering in the owner's namespace (a
        ClusterKopfPeering, or one in another namespace, cannot have it as its owner)."""
        return bool(self.config.peering) and self.config.namespaces == (
            self.config.leader_namespace,)

    async def _lead(self) -> None:
        """This replica won the Lease: a runner per known group, each fencing the older
        terms' writes out, then restoring from the API."""
        self.leading = True
        metrics.LEADER.set(1)
        assert self.index_views is not None
        assert self.context is not None
        self.context.leader_epoch = self.elector.epoch if self.elector is not None else 0
        for group in self.index_views.groups():
            self.group_seen(group.namespace, group.name, deleted=False, uid=group.uid,
                            generation=group.generation)
        for connector in self.index_views.every_connector():  # a standby flagged none
            if self.index_views.group(connector.namespace, connector.group) is None:
                self._in_background(self.connector_seen(connector, deleted=False), "orphan")

    def _epoch_floor(self) -> int:
        """The newest leader epoch on anything a term fences (a group's status, a member
        ConfigMap, a Connector's status): a recreated Lease's floor. Below it, a term's
        fence finds the newer epoch (a ConfigMap left from an earlier installation, say)
        and stands down, and the next term is only one newer: a term per epoch."""
        if self.index_views is None:
            return 0
        return self.index_views.newest_leader_epoch()

    def _lost_leadership(self, why: str) -> None:
        """A round found a newer leader's epoch: stop every runner now; the elector stands
        by until the Lease says otherwise."""
        if not self.leading:
            return
        if self.elector is not None:
            self.elector.leading = False
        self._in_background(self._step_down(), "step-down")

    def _in_background(self, work: Coroutine[Any, Any, None], name: str) -> None:
        """Run ``work`` as a task the shell keeps until it ends."""
        task = asyncio.get_running_loop().create_task(work, name=name)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _step_down(self) -> None:
        """This replica lost (or gave up) the Lease: stop every runner before anyone leads,
        and drop its groups' series (the leader exports them; a standby's frozen copies
        would raise alerts forever)."""
        self.leading = False
        metrics.LEADER.set(0)
        for key in list(self._orphan_retries):  # a later term flags them again
            self._forget_orphan_retry(key)
        self._orphans.clear()
        for (namespace, name), runner in list(self.runners.items()):
            await runner.stop()
            metrics.forget_group(f"{namespace}/{name}")
        self.runners.clear()
        self._groups.clear()

    async def stop(self) -> None:
        """Stop every runner and close the client (kopf cleanup)."""
        if self._election is not None:
            self._election.cancel()  # steps down and releases the Lease
            with contextlib.suppress(asyncio.CancelledError):
                await self._election
            self._election = None
        if self._adoption is not None:
            self._adoption.cancel()  # whatever it ended with, stopping goes on
            await asyncio.gather(self._adoption, return_exceptions=True)
            self._adoption = None
        if self._freezer is not None:
            self._freezer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._freezer
            self._freezer = None
        for runner in list(self.runners.values()):
            await runner.stop()
        self.runners.clear()
        for _, retry in self._orphan_retries.values():
            retry.cancel()
        self._orphan_retries.clear()
        if self.context is not None:
            await self.context.client.close()
        if self.audit is not None:
            self.audit.close()

    # --- groups -----------------------------------------------------------------------

    def group_seen(self, namespace: str, name: str, *, deleted: bool, uid: str = "",
                   generation: int = 0, resource_version: str = "",
                   status: Mapping[str, Any] | None = None) -> rounds.GroupRunner | None:
        """Create the group's runner on first sight and poke it; forget it when deleted.

        A change of the status alone (our own patch coming back) pokes nobody: only a
        new object or a new spec generation does, and it pokes the namespace's other
        groups too (a selector that now matches their pods, or no longer does:
        ``control.elsewhere.taken``). A status someone else wrote (``status``, at
        ``resource_version``: ``GroupRunner.status_seen``) pokes the group, which
        writes its status again.
        """
        key = (namespace, name)
        if deleted:
            self._groups.pop(key, None)
            runner = self.runners.pop(key, None)
            if runner is not None and runner.task is not None:
                runner.task.cancel()
            metrics.forget_group(f"{namespace}/{name}")  # no stale series (or alerts) left
            self.poke_namespace(namespace)
            if self.leading:
                self._in_background(self._group_deleted(namespace, name, runner),
                                    "group-deleted")
            return None
        if not self.leading:
            return None  # A standby: the leader runs the rounds (``_lead`` starts them).
        runner = self.runners.get(key)
        if runner is None:
            assert self.context is not None, "the startup handler has not run"
            runner = rounds.GroupRunner(self.context, namespace, name)
            self.runners[key] = runner
            runner.start()
            self.poke_namespace(namespace)  # (itself too: a second wake of a new runner)
        elif self._groups.get(key) != (uid, generation):
            self.poke_namespace(namespace)
        elif runner.fencing:
            runner.poke()
        elif status is not None and runner.status_seen(resource_version, status):
            runner.poke()  # Someone else wrote the status: it is written again.
        self._groups[key] = (uid, generation)
        return runner

    async def _group_deleted(self, namespace: str, name: str,
                             runner: rounds.GroupRunner | None) -> None:
        """A deleted WorkerGroup's Connectors say so (``WorkerGroupNotFound``), once its
        runner, and the Connector statuses it was still writing, have stopped."""
        if runner is not None:
            await runner.stop()
        assert self.index_views is not None
        for connector in list(self.index_views.connectors(namespace, name)):
            await self.connector_seen(connector, deleted=False)

    def poke_namespace(self, namespace: str) -> None:
        """Wake every group of a namespace."""
        for (ns, _), runner in self.runners.items():
            if ns == namespace:
                runner.poke()

    # --- wake-up rules ----------------------------------------------------------------

    def lease_seen(self, lease: views.LeaseView, *, deleted: bool) -> None:
        """Poke when the report, holder or liveness of a member Lease changed."""
        key = (lease.namespace, lease.name)
        if deleted:
            self._leases.pop(key, None)
            if self.index_views is not None:
                self.index_views.lease_deleted(lease)
            self.poke_namespace(lease.namespace)
            return
        if self.index_views is not None:
            self.index_views.lease_back(lease)
        before = self._leases.get(key)
        duration = lease.duration_s or 30
        self._leases[key] = (lease.report_text + "|" + lease.incarnation, lease.renew_ms,
                             duration)
        if before is None or before[0] != self._leases[key][0]:
            self.poke_namespace(lease.namespace)
        elif before[1] is not None and lease.renew_ms is not None and (
            lease.renew_ms - before[1] >= before[2] * 1000
            or time.time() * 1000 >= before[1] + before[2] * 1000
        ):
            self.poke_namespace(lease.namespace)  # Renewed after (or near) an expiry.

    def pod_seen(self, pod: views.PodView, *, deleted: bool) -> None:
        """Poke when a pod appears, disappears, is relabelled or starts terminating."""
        key = (pod.namespace, pod.name)
        essence = (pod.uid, tuple(sorted(pod.labels.items())), pod.deleting)
        if deleted:
            self._pods.pop(key, None)
        elif self._pods.get(key) == essence:
            return
        else:
            self._pods[key] = essence
        self.poke_namespace(pod.namespace)

    def configmap_seen(self, cm: views.ConfigMapView, *, deleted: bool) -> None:
        """Poke the group when its ConfigMap differs from what it wrote."""
        runner = self.runners.get((cm.namespace, cm.group))
        if runner is None:
            return
        ours = runner.written.get(cm.member)
        if ours is None:
            if not deleted:
                runner.poke()  # A ConfigMap we do not know: the round deletes or adopts it.
            return
        if deleted:
            runner.poke()
        elif cm.resource_version not in runner.own_versions.get(cm.member, ()) and \
                cm.resource_version != ours[0] and cm.text != ours[1]:
            runner.poke()  # Not one of our own writes coming back late: someone edited it.

    async def connector_seen(self, connector: views.ConnectorView, *, deleted: bool) -> None:
        """Poke the namespace; flag a Connector whose WorkerGroup does not exist.

        Only a new or deleted Connector, a new spec generation or a new restart value
        pokes: the operator's own status patches come back as events too, and 1,000
        Connectors would otherwise plan 1,000 rounds for nothing. A status someone else
        wrote (``ConnectorStatuses.foreign``) pokes its group, which patches it again.
        """
        key = (connector.namespace, connector.name)
        essence = (connector.uid, connector.generation, connector.group, connector.restart)
        if deleted:
            self._connectors.pop(key, None)
            self._orphans.pop(key, None)
            self._forget_orphan_retry(key)
            self.poke_namespace(connector.namespace)
            return
        if self._connectors.get(key) != essence:
            self._connectors[key] = essence
            self.poke_namespace(connector.namespace)
        else:
            runner = self.runners.get((connector.namespace, connector.group))
            if runner is not None and runner.statuses.foreign(connector):
                runner.replan = True  # Someone else wrote its status: patched again.
                runner.poke()
        assert self.index_views is not None
        assert self.context is not None
        if self.index_views.group(connector.namespace, connector.group) is not None:
            self._orphans.pop(key, None)
            self._forget_orphan_retry(key)
            return
        if self._orphans.get(key) == connector.group or not self.leading:
            return  # flagged already; or a standby, and the leader flags it (``_lead``)
        self._orphans[key] = connector.group
        now_ms = int(time.time() * 1000)
        restart = connector.status.get("restart")
        wanted = connector_status.connector_status(
            connector, holders={}, owned={}, epochs={}, group_exists=False,
            restart=restart if isinstance(restart, Mapping) else None)
        settled = connector_status.settle_connector_status(wanted, previous=connector.status,
                                                 generation=connector.generation, now_ms=now_ms)
        client = self.context.client
        message = (f"spec.workerGroup names {connector.group!r}, which does not exist in "
                   f"namespace {connector.namespace!r}: nothing runs this connector")
        try:
            await client.patch_status("connectors", connector.namespace, connector.name,
                                      status.merge_patch(connector.status, settled))
            await client.post_event(
                involved={"apiVersion": f"{views.GROUP}/{views.VERSION}", "kind": "Connector",
                          "namespace": connector.namespace, "name": connector.name,
                          "uid": connector.uid},
                reason="WorkerGroupNotFound", message=message, warning=True,
                reporter=self.config.identity)
            metrics.BAD_INPUT.labels("WorkerGroupNotFound").inc()
        except apierrors.ApiError as exc:
            self._orphans.pop(key, None)
            logger.warning("Connector %s/%s: %s", connector.namespace, connector.name, exc)
            self._retry_orphan(key, connector.group)
            return
        self._forget_orphan_retry(key)

    def _retry_orphan(self, key: tuple[str, str], group: str) -> None:
        """Flag the Connector again later (``retry_s``, doubled per failure in a row, at
        most a minute): nothing else may happen to it that would call ``connector_seen``."""
        failures = self._orphan_retries[key][0] + 1 if key in self._orphan_retries else 1
        delay = settings.retry_delay_s(self.config.retry_s, 60.0, failures)

        async def retry() -> None:
            await asyncio.sleep(delay)
            assert self.index_views is not None
            for found in self.index_views.connectors(key[0], group):
                if found.name == key[1]:
                    await self.connector_seen(found, deleted=False)

        self._forget_orphan_retry(key)
        task = asyncio.get_running_loop().create_task(retry(), name=f"orphan-{key[1]}")
        self._orphan_retries[key] = (failures, task)

    def _forget_orphan_retry(self, key: tuple[str, str]) -> None:
        retry = self._orphan_retries.pop(key, None)
        if retry is not None and retry[1] is not asyncio.current_task():
            retry[1].cancel()
