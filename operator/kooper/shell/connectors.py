"""Connector statuses, patched off the round's critical path (latest wins).

A burst of rounds patches each Connector once: the statuses wait
``connector_status_delay_s`` after a round (so a placement and the members' reports
that follow it land in one patch) and keep waiting, up to
``connector_status_max_wait_s``, while members have not applied their latest document.
The statuses themselves are computed by ``control.status``.

**Fencing** (with leader election, ``epoch`` > 0): every status patched carries the
leader's epoch (``status.leaderEpoch``) and is preconditioned on a ``resourceVersion``
(the one the last patch returned, else the watched one). A 409 re-reads the
Connector: a newer epoch there is ``LostLeadership`` (the term is over: ``on_lost``),
anything else (a user edited the spec) is patched again over what was read. A new
term's first patches stamp every Connector of its group with its epoch (a status of
an older epoch always differs), so from then on every patch of a stalled older
leader fails; one that landed before is overwritten by them.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from kooper.control import connector_status, failures, placement, status, step, views
from kooper.sdk import apierrors
from kooper.shell import kube, metrics, settings, writes

logger = logging.getLogger("kooper.shell")


class ConnectorStatuses:
    """One group's Connector statuses: what was patched, and the queue of the next patch."""

    def __init__(self, client: kube.Client, namespace: str, *, delay_s: float,
                 max_wait_s: float, retry_s: float, max_retry_s: float = 60.0,
                 epoch: int = 0,
                 on_lost: Callable[[str], None] = lambda why: None) -> None:
        self.client = client
        self.namespace = namespace
        self.epoch = epoch
        """This leader's term (0: no leader election, nothing to fence)."""
        self.on_lost = on_lost
        """Called once a newer term's epoch is found on a Connector status."""
        self.lost = False
        self._versions: dict[str, str] = {}
        """Per Connector, the resourceVersion our last patch returned."""
        self._uids: dict[str, str] = {}
        """Per Connector, the uid of the object the three above are about."""
        self._own: dict[str, list[str]] = {}
        """Per Connector, the resourceVersions our last few patches returned."""
        self.delay_s = delay_s
        self.max_wait_s = max_wait_s
        self.retry_s = retry_s
        self.max_retry_s = max_retry_s
        self.failures = 0
        """Batches of patches that failed in a row: the retries back off
        (``settings.retry_delay_s``), or an outage would be patched every ``retry_s``."""
        self.patched: dict[str, dict[str, Any]] = {}
        self._generations: dict[str, int] = {}
        self._holders = placement.Placement()
        """Where each resource is assigned, as of the last Connector statuses."""
        self._owned = placement.Placement()
        """Who reports running each resource, as of the last Connector statuses."""
        self._dirty: set[str] = set()
        self._wanted: step.Connectors | None = None
        self._now_ms = 0
        self.task: asyncio.Task[None] | None = None

    @property
    def busy(self) -> bool:
        """Whether statuses are queued or being patched."""
        return self.task is not None and not self.task.done()

    def recreated(self, connectors: Iterable[views.ConnectorView]) -> bool:
        """Whether one of ``connectors`` is a new object under the name of one whose status
        was patched (deleted and created again): a round that looks the same as the last
        must still plan, so that its status gets written."""
        return any(self._uids.get(c.name, c.uid) != c.uid for c in connectors)

    def queue(self, work: step.Connectors, now_ms: int) -> None:
        """Patch these statuses soon (replacing whatever was queued)."""
        self._dirty |= work.dirty
        self._wanted = work
        self._now_ms = now_ms
        if not self.busy:
            self.task = asyncio.get_running_loop().create_task(self._loop())

    async def _loop(self) -> None:
        since = time.monotonic()
        while True:
            await asyncio.sleep(self.delay_s)
            wanted = self._wanted
            if wanted is None or self.lost:
                return
            if not wanted.settled and time.monotonic() - since < self.max_wait_s:
                continue  # Members are still applying: one patch once they reported.
            self._wanted = None
            since = time.monotonic()
            try:
                ok = await self._patch(wanted, self._now_ms)
            except Exception:
                logger.exception("%s: Connector statuses failed", self.namespace)
                ok = False
            if ok:
                self.failures = 0
            else:
                # Retry what failed (a restart's ``observed`` must land) unless a newer
                # round already queued its own statuses.
                self.failures += 1
                await asyncio.sleep(settings.retry_delay_s(self.retry_s, self.max_retry_s,
                                                           self.failures))
                if self._wanted is None:
                    self._wanted = wanted

    async def _patch(self, work: step.Connectors, now_ms: int) -> bool:
        """Patch the statuses that changed; False when some patch failed."""
        # Only connectors with a resource whose holder or runner changed, or whose spec
        # changed, are recomputed: 100,000 task entries per round would be wasted work.
        dirty, self._dirty = self._dirty, set()
        dirty |= self._holders.update(
            {member: part.assigned for member, part in work.plan.members.items()})
        dirty |= self._owned.update({m: live.owned for m, live in work.snapshot.members.items()})
        holders, owned = self._holders.tasks, self._owned.tasks
        moving = work.plan.handing_over()
        handing = moving.connectors | moving.tasks
        present = {connector.name for connector in work.connectors}
        for connector in work.connectors:
            if self._uids.get(connector.name, connector.uid) != connector.uid:
                # Deleted and created again under its name: a new object, with no status.
                self.patched.pop(connector.name, None)
                self._generations.pop(connector.name, None)
                self._versions.pop(connector.name, None)
            self._uids[connector.name] = connector.uid
        for name in [n for n in self._uids if n not in present]:
            del self._uids[name]
        for name in [n for n in self._own if n not in present]:
            del self._own[name]
        for name in [n for n in self.patched if n not in present]:
            del self.patched[name]
        for name in [n for n in self._generations if n not in present]:
            del self._generations[name]
        for name in [n for n in self._versions if n not in present]:
            del self._versions[name]
        broken: dict[str, list[tuple[str, failures.Record]]] = {}
        for resource, record in work.failures.items():
            broken.setdefault(record.connector, []).append((resource, record))
        patches = []
        for number, connector in enumerate(work.connectors):
            if number % 100 == 99:
                await asyncio.sleep(0)  # 1,000 Connectors: let rounds run meanwhile
            seen = self._generations.get(connector.name)
            if connector.name not in dirty and seen == connector.generation and \
                    connector.name in self.patched:
                continue
            self._generations[connector.name] = connector.generation
            base = self.patched.get(connector.name) or connector.status
            restart = work.restarts.get(connector.name) or base.get("restart")
            instances = self._holders.connectors
            marked = {resource: fields for resource, record in broken.get(connector.name, ())
                      if (fields := failures.entry(
                          record, worker=instances.get(resource) if resource == connector.name
                          else holders.get(resource)))}
            wanted = connector_status.connector_status(
                connector, holders=holders, owned=owned, epochs=work.plan.state.epochs,
                group_exists=True, restart=restart if isinstance(restart, Mapping) else None,
                instances=instances, failed=marked,
                task_restart=work.task_restarts.get(connector.name, ""),
                rejected=work.rejected.get(connector.name, ""), handing=handing)
            settled = connector_status.settle_connector_status(wanted, previous=base,
                                                     generation=connector.generation,
                                                     now_ms=now_ms)
            if self.epoch:
                settled = {**settled, "leaderEpoch": self.epoch}
            if status.same_status(base, settled):
                continue
            version = self._versions.get(connector.name) or connector.resource_version
            patches.append((connector.name, base, settled, version))

        failed: set[str] = set()

        async def patch(name: str, base: Mapping[str, Any], settled: dict[str, Any],
                        version: str) -> None:
            try:
                await self._patch_one(name, base, settled, version)
            except apierrors.NotFound:
                self.patched.pop(name, None)  # Deleted meanwhile: nothing to retry.
                return
            except writes.LostLeadership as exc:
                self.patched.pop(name, None)
                if not self.lost:
                    self.lost = True
                    logger.warning("%s: %s; standing by", self.namespace, exc)
                    self.on_lost(str(exc))
                return
            except apierrors.ApiError as exc:
                logger.warning("%s: Connector %s status: %s", self.namespace, name, exc)
                self.patched.pop(name, None)
                failed.add(name)
                return
            self.patched[name] = settled

        await asyncio.gather(*(patch(*item) for item in patches))
        self._dirty.update(failed)
        return not failed and not self.lost

    async def _patch_one(self, name: str, base: Mapping[str, Any], settled: dict[str, Any],
                         version: str) -> None:
        """Patch one Connector's status from ``base`` to ``settled``; fenced: preconditioned
        on ``version``, and a 409 re-reads (a newer term there: ``LostLeadership``)."""
        if not self.epoch:
            result = await self.client.patch_status("connectors", self.namespace, name,
                                                    status.merge_patch(base, settled))
            self._mine(name, result)
            return
        for _ in range(5):
            self._outranked(name, base)
            try:
                result = await self.client.patch_status(
                    "connectors", self.namespace, name, status.merge_patch(base, settled),
                    resource_version=version or None)
            except apierrors.Conflict:
                metrics.CONFLICTS.labels("connectors/status").inc()
                fresh = await self.client.read_connector(self.namespace, name)
                base = fresh.get("status") or {}
                version = str(fresh.get("metadata", {}).get("resourceVersion", ""))
                continue
            self._versions[name] = str(result.get("metadata", {}).get("resourceVersion", ""))
            self._mine(name, result)
            return
        raise apierrors.Conflict(f"Connector {self.namespace}/{name} status: still conflicting",
                                 status=409)

    def _mine(self, name: str, result: Mapping[str, Any]) -> None:
        version = str(result.get("metadata", {}).get("resourceVersion", ""))
        if version:
            self._own[name] = [*self._own.get(name, ())[-3:], version]

    def foreign(self, connector: views.ConnectorView) -> bool:
        """Whether the watched status of ``connector`` was written by someone else:
        neither one of our last few patches nor what we last patched. If so, what we
        patched is forgotten: the next patch starts from the status the API holds."""
        ours = self.patched.get(connector.name)
        if ours is None or connector.uid != self._uids.get(connector.name) or \
                connector.resource_version in self._own.get(connector.name, ()) or \
                status.same_status(connector.status, ours):
            return False
        del self.patched[connector.name]
        self._versions.pop(connector.name, None)
        self._dirty.add(connector.name)
        return True

    def _outranked(self, name: str, base: Mapping[str, Any]) -> None:
        theirs = writes.status_epoch(base)
        if theirs > self.epoch:
            raise writes.LostLeadership(
                f"Connector {name}'s status was written by leader epoch {theirs}, after ours "
                f"({self.epoch})")
