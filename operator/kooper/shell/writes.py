"""Executing a ``control.step.Step``'s writes against the API, in the Step's order.

1. deletions of departed members' ConfigMaps (a failure fails the round: nothing
   of theirs is written elsewhere before their documents are gone);
2. the ConfigMaps (each with a ``resourceVersion`` precondition; a 409 re-reads the
   version and retries: the operator owns the data), in parallel;
3. the WorkerGroup status (a 409 re-reads the status and retries; one showing a newer
   persisted generation means another operator is active: ``Restart``).

Only outcomes flow back into the decisions: which ConfigMap writes failed
(``Step.failed``). The resourceVersions kept here are for noticing edits by others.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Mapping
from typing import Any

from kooper.control import state, status, step, views
from kooper.core import errors, ids, model
from kooper.protocol import codec, messages
from kooper.sdk import apierrors
from kooper.shell import kube, metrics

logger = logging.getLogger("kooper.shell")


class Restart(errors.KooperError):
    """Another writer is ahead of us: drop in-memory state and restore from the API."""


def configmap_body(namespace: str, group: str, group_uid: str, member: str,
                   text: str) -> dict[str, Any]:
    """A member's ConfigMap, owned by its WorkerGroup."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": views.configmap_name(member),
            "namespace": namespace,
            "labels": {views.GROUP_LABEL: group, views.MEMBER_LABEL: member},
            "ownerReferences": [{
                "apiVersion": f"{views.GROUP}/{views.VERSION}",
                "kind": "WorkerGroup",
                "name": group,
                "uid": group_uid,
                "controller": True,
                "blockOwnerDeletion": True,
            }],
        },
        "data": {messages.CONFIGMAP_KEY: text},
    }


class Writer:
    """One group's API writes and what it remembers of them."""

    def __init__(self, client: kube.Client, namespace: str, name: str) -> None:
        self.client = client
        self.namespace = namespace
        self.name = name
        self.written: dict[str, tuple[str, str]] = {}
        """member → (resourceVersion, text) of the ConfigMap as we last wrote it."""
        self.own_versions: dict[str, list[str]] = {}
        """member → resourceVersions of our own last few writes of its ConfigMap."""
        self.group_rv: str | None = None
        self.last_status: Mapping[str, Any] | None = None
        self._encoded: tuple[model.PlanState, dict[str, Any]] | None = None

    def reset(self, configmaps: Mapping[str, views.ConfigMapView],
              unreadable: Iterable[str] = ()) -> None:
        """Forget everything (a restore): the watched ConfigMaps are what we wrote."""
        skip = set(unreadable)
        self.written = {member: (cm.resource_version, cm.text)
                        for member, cm in configmaps.items() if member not in skip}
        self.own_versions = {}
        self.group_rv = None
        self.last_status = None
        self._encoded = None

    # --- edits by others ------------------------------------------------------------

    async def edits(self, members: Iterable[ids.WorkerId],
                    configmaps: Mapping[str, views.ConfigMapView]) -> dict[ids.WorkerId, str]:
        """Live members whose ConfigMap differs from what we wrote (edited or deleted)."""
        suspects = []
        for member in members:
            ours = self.written.get(member)
            if ours is None:
                continue
            cm = configmaps.get(member)
            if cm is not None and (cm.resource_version == ours[0] or cm.text == ours[1]
                                   or cm.resource_version in self.own_versions.get(member, ())):
                continue  # Ours, or an older write of ours the watch has not caught up with.
            suspects.append(member)
        found: dict[ids.WorkerId, str] = {}
        # Confirm with a fresh read before acting (in parallel: the index may lag a lot).
        await asyncio.gather(*(self._check(member, found) for member in suspects))
        return found

    async def _check(self, member: ids.WorkerId, found: dict[ids.WorkerId, str]) -> None:
        ours = self.written[member]
        try:
            body = await self.client.read_configmap(self.namespace, views.configmap_name(member))
        except apierrors.NotFound:
            self.written.pop(member, None)
            found[member] = "deleted"
            return
        fresh = views.parse_configmap(body)
        if fresh.text != ours[1]:
            found[member] = "edited"
        self.written[member] = (fresh.resource_version, fresh.text)

    # --- 2. ConfigMaps -----------------------------------------------------------------

    async def configmaps(self, writes: Iterable[messages.Assignment], *, group_uid: str
                         ) -> frozenset[ids.WorkerId]:
        """Write every Assignment; the members whose write failed."""
        failed: set[ids.WorkerId] = set()

        async def write(message: messages.Assignment) -> None:
            text = codec.encode_assignment(message)
            body = configmap_body(self.namespace, self.name, group_uid, message.member, text)
            try:
                rv = await self._put(message.member, body)
            except apierrors.ApiError as exc:
                logger.warning("%s/%s: writing %s failed: %s", self.namespace, self.name,
                               views.configmap_name(message.member), exc)
                failed.add(ids.WorkerId(message.member))
                return
            self.written[message.member] = (rv, text)
            self.own_versions[message.member] = [
                *self.own_versions.get(message.member, ())[-3:], rv]

        await asyncio.gather(*(write(message) for message in writes))
        return frozenset(failed)

    async def _put(self, member: str, body: Mapping[str, Any]) -> str:
        """Create or replace with a precondition; on 409 re-read and retry (we own the data)."""
        known = self.written.get(member)
        rv: str | None = known[0] if known else None
        for _ in range(5):
            try:
                return await self.client.write_configmap(body, resource_version=rv)
            except apierrors.Conflict:
                metrics.CONFLICTS.labels("configmap").inc()
            except apierrors.NotFound:
                rv = None
                continue
            try:
                fresh = await self.client.read_configmap(self.namespace,
                                                         views.configmap_name(member))
                rv = str(fresh.get("metadata", {}).get("resourceVersion", ""))
            except apierrors.NotFound:
                rv = None
        raise apierrors.Conflict(f"ConfigMap {views.configmap_name(member)}: still conflicting",
                                 status=409)

    # --- 3. the WorkerGroup status --------------------------------------------------------

    async def group_status(self, group: views.GroupView, write: step.GroupStatus) -> None:
        """Merge-patch the status with a resourceVersion precondition."""
        encoded = state.encode(write.state, previous=self._encoded, owners=write.owners,
                               member_epoch=write.member_epoch,
                               epoch_floor=write.epoch_floor, learned=write.learned,
                               terminating=write.terminating)
        self._encoded = (write.state, encoded)
        base = self.last_status if self.last_status is not None else group.status
        rv = self.group_rv or group.resource_version
        for _ in range(5):
            wanted = write.document(encoded=encoded, previous=base)
            patch = status.merge_patch(base, wanted)
            if not patch:
                return
            try:
                result = await self.client.patch_status(
                    "workergroups", self.namespace, self.name, patch, resource_version=rv)
            except apierrors.Conflict:
                metrics.CONFLICTS.labels("workergroups/status").inc()
                fresh = await self.client.read_group(self.namespace, self.name)
                theirs = (fresh.get("status") or {}).get("rebalanceGeneration", 0)
                if isinstance(theirs, int) and theirs > write.state.generation:
                    raise Restart(f"the persisted generation {theirs} is ahead of ours "
                                  f"({write.state.generation}): another operator is "
                                  "active") from None
                base = fresh.get("status") or {}
                rv = str(fresh.get("metadata", {}).get("resourceVersion", ""))
                continue
            except apierrors.NotFound:
                return  # The group was deleted meanwhile.
            self.group_rv = str(result.get("metadata", {}).get("resourceVersion", "")) or None
            self.last_status = result.get("status") or wanted
            return
        raise apierrors.Conflict(f"WorkerGroup {self.namespace}/{self.name} status: "
                                 "still conflicting", status=409)

    # --- 1. deletions -------------------------------------------------------------------------

    async def delete(self, members: Iterable[ids.WorkerId]) -> int:
        """Delete departed members' ConfigMaps (absent already is fine)."""
        gone = sorted(members)
        for member in gone:
            self.written.pop(member, None)
            self.own_versions.pop(member, None)
        await asyncio.gather(*(
            self.client.delete_configmap(self.namespace, views.configmap_name(member))
            for member in gone))
        return len(gone)
