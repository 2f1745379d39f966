"""Executing a ``control.step.Step``'s writes against the API, in the Step's order.

1. deletions of departed members' ConfigMaps (a failure fails the round: nothing
   of theirs is written elsewhere before their documents are gone), each with a
   ``resourceVersion`` precondition;
2. the ConfigMaps (each with a ``resourceVersion`` precondition; a 409 re-reads the
   version and retries: the operator owns the data), in parallel;
3. the WorkerGroup status (a 409 re-reads the status and retries; one showing a newer
   persisted generation means another operator is active: ``Restart``).

**Fencing** (with leader election, ``epoch`` > 0): every ConfigMap carries the
leader's epoch (the ``kooper.dev/leader-epoch`` annotation and the document's
``leaderEpoch``), and so does the status (``status.leaderEpoch``). Every replace and
delete is preconditioned on the ``resourceVersion`` of a version whose epoch this
leader has checked is not newer than its own; a 409 re-reads, and a newer epoch
there is ``LostLeadership``, never a retry. Before a new term's first round,
``fence`` re-issues every ConfigMap of the group and claims the status under the
new epoch, so every precondition a stalled leader still holds is broken before
anything moves (docs/protocol.md, "Fencing the leader").

Only outcomes flow back into the decisions: which ConfigMap writes failed
(``Step.failed``). The resourceVersions kept here are for noticing edits by others.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from kooper.control import state, status, step, views
from kooper.core import errors, ids, model
from kooper.protocol import codec, messages
from kooper.sdk import apierrors
from kooper.shell import kube, metrics

logger = logging.getLogger("kooper.shell")


class Restart(errors.KooperError):
    """Another writer is ahead of us: drop in-memory state and restore from the API."""


class LostLeadership(Restart):
    """A newer leader's epoch is on what we were about to overwrite: our term is over."""


def configmap_body(namespace: str, group: str, group_uid: str, member: str,
                   text: str, *, epoch: int = 0) -> dict[str, Any]:
    """A member's ConfigMap, owned by its WorkerGroup (annotated with the leader epoch).
    Empty ``text``: no document (a fence's placeholder, ``Writer.fence``)."""
    annotations = {views.LEADER_EPOCH_ANNOTATION: str(epoch)} if epoch else {}
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": views.configmap_name(member),
            "namespace": namespace,
            "labels": {views.GROUP_LABEL: group, views.MEMBER_LABEL: member},
            **({"annotations": annotations} if annotations else {}),
            "ownerReferences": [{
                "apiVersion": f"{views.GROUP}/{views.VERSION}",
                "kind": "WorkerGroup",
                "name": group,
                "uid": group_uid,
                "controller": True,
                "blockOwnerDeletion": True,
            }],
        },
        "data": {messages.CONFIGMAP_KEY: text} if text else {},
    }


class Writer:
    """One group's API writes and what it remembers of them."""

    def __init__(self, client: kube.Client, namespace: str, name: str, *,
                 epoch: int = 0) -> None:
        self.client = client
        self.namespace = namespace
        self.name = name
        self.epoch = epoch
        """This leader's term (0: no leader election, no fencing)."""
        self.epochs: dict[str, int] = {}
        """member → the leader epoch on the version of its ConfigMap in ``written``."""
        self.written: dict[str, tuple[str, str]] = {}
        """member → (resourceVersion, text) of the ConfigMap as we last wrote it."""
        self.own_versions: dict[str, list[str]] = {}
        """member → resourceVersions of our own last few writes of its ConfigMap."""
        self.newest_found = 0
        """The newest generation on a document ``edits`` last found that the state does not
        say (0: none): a worker may have accepted it, so its rewrite must be newer."""
        self.unanswered: dict[str, str] = {}
        """member → the text of our last write of its ConfigMap that failed: the API may
        have committed it all the same (a 504 after the commit, a connection reset before
        the answer), and then what it holds is ours, not someone else's edit."""
        self.group_rv: str | None = None
        self.last_status: Mapping[str, Any] | None = None
        self.status_versions: list[str] = []
        """resourceVersions of the WorkerGroup after our last few status writes."""
        self._encoded: tuple[model.PlanState, dict[str, Any]] | None = None

    def reset(self, configmaps: Mapping[str, views.ConfigMapView],
              unreadable: Iterable[str] = ()) -> None:
        """Forget everything (a restore): the watched ConfigMaps are what we wrote."""
        skip = set(unreadable)
        self.written = {member: (cm.resource_version, cm.text)
                        for member, cm in configmaps.items() if member not in skip}
        self.epochs = {member: cm.leader_epoch for member, cm in configmaps.items()}
        self.own_versions = {}
        self.unanswered = {}
        self.group_rv = None
        self.last_status = None
        self.status_versions = []
        self._encoded = None

    # --- edits by others ------------------------------------------------------------

    async def edits(self, members: Iterable[ids.WorkerId],
                    configmaps: Mapping[str, views.ConfigMapView]) -> dict[ids.WorkerId, str]:
        """Live members whose ConfigMap differs from what we wrote: ``"edited"`` or
        ``"deleted"`` by someone else, or ``"unanswered"``: it holds our write that failed
        (its answer lost after the commit), not what the state says the member has. Each
        is written again; only the first two are someone else's doing."""
        found: dict[ids.WorkerId, str] = {}
        self.newest_found = 0
        suspects = []
        for member in members:
            ours = self.written.get(member)
            if ours is None:
                continue
            cm = configmaps.get(member)
            if cm is not None and (cm.resource_version == ours[0] or cm.text == ours[1]
                                   or cm.resource_version in self.own_versions.get(member, ())):
                continue  # Ours, or an older write of ours the watch has not caught up with.
            if cm is not None and cm.text == self.unanswered.get(member):
                # Our failed write landed after all: ours, but not what the state says.
                self.written[member] = (cm.resource_version, cm.text)
                self.epochs[member] = cm.leader_epoch
                found[member] = "unanswered"
                self._found(cm.text)
                continue
            suspects.append(member)
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
        if fresh.text == self.unanswered.get(member):
            found[member] = "unanswered"
            self._found(fresh.text)
        elif fresh.text != ours[1] or (fresh.group, fresh.member) != (self.name, member):
            # (Relabelled: out of the operator's index, and of a restarted one's restore.)
            found[member] = "edited"
            self._found(fresh.text)
        self.written[member] = (fresh.resource_version, fresh.text)
        self.epochs[member] = fresh.leader_epoch

    def _found(self, text: str) -> None:
        try:
            generation = codec.decode_assignment(text).generation
        except errors.KooperError:
            return  # unreadable: no worker accepted it either
        self.newest_found = max(self.newest_found, generation)

    # --- 2. ConfigMaps -----------------------------------------------------------------

    async def configmaps(self, writes: Iterable[messages.Assignment], *, group_uid: str
                         ) -> frozenset[ids.WorkerId]:
        """Write every Assignment; the members whose write failed."""
        failed: set[ids.WorkerId] = set()

        async def write(message: messages.Assignment) -> None:
            text = codec.encode_assignment(message)
            body = configmap_body(self.namespace, self.name, group_uid, message.member, text,
                                  epoch=self.epoch)
            try:
                rv = await self._put(message.member, body)
            except LostLeadership:
                raise
            except apierrors.ApiError as exc:
                logger.warning("%s/%s: writing %s failed: %s", self.namespace, self.name,
                               views.configmap_name(message.member), exc)
                failed.add(ids.WorkerId(message.member))
                self.unanswered[message.member] = text
                return
            self.unanswered.pop(message.member, None)
            self.written[message.member] = (rv, text)
            self.epochs[message.member] = self.epoch
            self.own_versions[message.member] = [
                *self.own_versions.get(message.member, ())[-3:], rv]

        await asyncio.gather(*(write(message) for message in writes))
        return frozenset(failed)

    def outranked(self, what: str, epoch: int) -> None:
        """``LostLeadership`` if ``epoch`` (on something we would write over) is newer than ours."""
        if self.epoch and epoch > self.epoch:
            raise LostLeadership(f"{what} was written by leader epoch {epoch}, after ours "
                                 f"({self.epoch}): another replica leads now")

    async def _put(self, member: str, body: Mapping[str, Any]) -> str:
        """Create or replace with a precondition; on 409 re-read and retry (we own the data),
        unless a newer leader wrote it (``LostLeadership``)."""
        name = views.configmap_name(member)
        known = self.written.get(member)
        rv: str | None = known[0] if known else None
        if rv is not None:
            self.outranked(f"ConfigMap {name}", self.epochs.get(member, 0))
        for _ in range(5):
            try:
                return await self.client.write_configmap(body, resource_version=rv)
            except apierrors.Conflict:
                metrics.CONFLICTS.labels("configmap").inc()
            except apierrors.NotFound:
                if self.epoch:
                    raise Restart(f"ConfigMap {name} was deleted behind our back") from None
                rv = None
                continue
            try:
                fresh = await self.client.read_configmap(self.namespace, name)
            except apierrors.NotFound:
                rv = None
                continue
            meta = fresh.get("metadata", {})
            self.outranked(f"ConfigMap {name}", views.leader_epoch_of(meta))
            rv = str(meta.get("resourceVersion", ""))
        raise apierrors.Conflict(f"ConfigMap {name}: still conflicting", status=409)

    # --- 0. fencing, before a term's first round ----------------------------------------

    async def fence(self, group: views.GroupView,
                    configmaps: Mapping[str, views.ConfigMapView],
                    members: Iterable[str] = ()) -> bool:
        """Put this term's epoch on every ConfigMap of the group and on its status, and
        occupy the name of every member (``members``: the group's, by their Leases) that
        has no ConfigMap yet with an empty one under this epoch.

        True once the watched views show it everywhere (the round may restore and
        plan); else re-issue what does not carry it yet, each preconditioned on the
        version watched (and on a 409, on the version re-read, rebuilt from what it
        holds: a stalled leader's write that landed is kept, never overwritten with
        an older text), claim the status, and return False: the watch brings the
        writes back and the next round asks again. A newer epoch anywhere is
        ``LostLeadership``. After this, every precondition an older term still holds
        fails: its replaces, deletes and status patches all answer 409, and so do its
        creates: a stalled term may be about to create the first document of a member
        that joined (found by the simulator's stalled-leader families, seed 5357: the
        document landed after the fence, at the generation the new term then planned,
        and the member, which had never seen the new epoch, took it and refused the new
        term's as not newer).
        """
        if not self.epoch:
            return True
        pending = []
        for cm in configmaps.values():
            self.outranked(f"ConfigMap {cm.name}", cm.leader_epoch)
            if cm.leader_epoch < self.epoch:
                pending.append(cm)
        vacant = sorted(set(members) - set(configmaps))
        claimed = status_epoch(group.status) >= self.epoch
        self.outranked("the WorkerGroup status", status_epoch(group.status))
        if not pending and not vacant and claimed:
            return True
        await asyncio.gather(*(self._reissue(cm, group.uid) for cm in pending),
                             *(self._occupy(member, group.uid) for member in vacant))
        if not claimed:
            epoch = self.epoch
            await self.patch_status(group, lambda base: {**base, "leaderEpoch": epoch})
        return False

    async def _occupy(self, member: str, group_uid: str) -> None:
        """Create ``member``'s ConfigMap empty under this epoch; taken meanwhile (an older
        term's create landed first): re-issue what is there, as for any ConfigMap."""
        body = configmap_body(self.namespace, self.name, group_uid, member, "",
                              epoch=self.epoch)
        try:
            await self.client.write_configmap(body, resource_version=None)
            return
        except apierrors.Conflict:
            metrics.CONFLICTS.labels("configmap").inc()
        try:
            fresh = views.parse_configmap(await self.client.read_configmap(
                self.namespace, views.configmap_name(member)))
        except apierrors.NotFound:
            return  # deleted meanwhile: the next round's fence looks again
        await self._reissue(fresh, group_uid)

    async def _reissue(self, cm: views.ConfigMapView, group_uid: str) -> None:
        rv, text, epoch = cm.resource_version, cm.text, cm.leader_epoch
        for _ in range(5):
            self.outranked(f"ConfigMap {cm.name}", epoch)
            if epoch >= self.epoch:
                return
            body = configmap_body(self.namespace, self.name, group_uid, cm.member,
                                  with_leader_epoch(text, self.epoch), epoch=self.epoch)
            try:
                await self.client.write_configmap(body, resource_version=rv)
                return
            except apierrors.Conflict:
                metrics.CONFLICTS.labels("configmap").inc()
            except apierrors.NotFound:
                return  # gone: nothing left to fence
            try:
                fresh = views.parse_configmap(
                    await self.client.read_configmap(self.namespace, cm.name))
            except apierrors.NotFound:
                return
            rv, text, epoch = fresh.resource_version, fresh.text, fresh.leader_epoch
        raise apierrors.Conflict(f"ConfigMap {cm.name}: still conflicting", status=409)

    # --- 3. the WorkerGroup status --------------------------------------------------------

    async def group_status(self, group: views.GroupView, write: step.GroupStatus) -> None:
        """Merge-patch the status with a resourceVersion precondition."""
        encoded = state.encode(write.state, previous=self._encoded, owners=write.owners,
                               member_epoch=write.member_epoch,
                               epoch_floor=write.epoch_floor, learned=write.learned,
                               terminating=write.terminating)
        self._encoded = (write.state, encoded)

        def wanted(base: Mapping[str, Any]) -> Mapping[str, Any]:
            document = write.document(encoded=encoded, previous=base)
            return {**document, "leaderEpoch": self.epoch} if self.epoch else document

        await self.patch_status(group, wanted, generation=write.state.generation)

    async def patch_status(self, group: views.GroupView,
                           wanted: Callable[[Mapping[str, Any]], Mapping[str, Any]], *,
                           generation: int | None = None) -> None:
        """Merge-patch the status to ``wanted(current)`` with a resourceVersion precondition;
        a 409 re-reads and retries, unless a newer leader wrote it (``LostLeadership``) or
        its persisted generation is ahead of ``generation`` (``Restart``)."""
        base = self.last_status if self.last_status is not None else group.status
        rv = self.group_rv or group.resource_version
        self.outranked("the WorkerGroup status", status_epoch(base))
        for _ in range(5):
            patch = status.merge_patch(base, wanted(base))
            if not patch:
                return
            try:
                result = await self.client.patch_status(
                    "workergroups", self.namespace, self.name, patch, resource_version=rv)
            except apierrors.Conflict:
                metrics.CONFLICTS.labels("workergroups/status").inc()
                fresh = await self.client.read_group(self.namespace, self.name)
                fresh_status = fresh.get("status") or {}
                self.outranked("the WorkerGroup status", status_epoch(fresh_status))
                theirs = fresh_status.get("rebalanceGeneration", 0)
                if generation is not None and isinstance(theirs, int) and theirs > generation:
                    raise Restart(f"the persisted generation {theirs} is ahead of ours "
                                  f"({generation}): another operator is active") from None
                base = fresh_status
                rv = str(fresh.get("metadata", {}).get("resourceVersion", ""))
                continue
            except apierrors.NotFound:
                return  # The group was deleted meanwhile.
            self.group_rv = str(result.get("metadata", {}).get("resourceVersion", "")) or None
            self.last_status = result.get("status") or wanted(base)
            if self.group_rv:
                self.status_versions = [*self.status_versions[-3:], self.group_rv]
            return
        raise apierrors.Conflict(f"WorkerGroup {self.namespace}/{self.name} status: "
                                 "still conflicting", status=409)

    def foreign_status(self, resource_version: str, shown: Mapping[str, Any]) -> bool:
        """Whether the WorkerGroup status the watch shows was written by someone else:
        neither one of our last few writes nor what we last wrote. If so, what we wrote is
        forgotten: the next status write starts from what the API holds."""
        last = self.last_status
        if last is None or resource_version in self.status_versions or \
                status.same_status(shown, last):
            return False
        self.last_status = None
        self.group_rv = None
        return True

    # --- 1. deletions -------------------------------------------------------------------------

    async def delete(self, members: Iterable[ids.WorkerId]) -> int:
        """Delete departed members' ConfigMaps (absent already is fine), each preconditioned
        on a version no newer leader wrote."""
        gone = sorted(members)
        await asyncio.gather(*(self._delete(member) for member in gone))
        for member in gone:
            self.written.pop(member, None)
            self.own_versions.pop(member, None)
            self.unanswered.pop(member, None)
            self.epochs.pop(member, None)
        return len(gone)

    async def _delete(self, member: str) -> None:
        name = views.configmap_name(member)
        known = self.written.get(member)
        rv: str | None = known[0] if known else None
        if rv is not None:
            self.outranked(f"ConfigMap {name}", self.epochs.get(member, 0))
        elif not self.epoch:
            await self.client.delete_configmap(self.namespace, name)
            return
        for _ in range(5):
            if rv is None:
                try:
                    fresh = await self.client.read_configmap(self.namespace, name)
                except apierrors.NotFound:
                    return
                meta = fresh.get("metadata", {})
                self.outranked(f"ConfigMap {name}", views.leader_epoch_of(meta))
                rv = str(meta.get("resourceVersion", ""))
            try:
                await self.client.delete_configmap(self.namespace, name, resource_version=rv)
                return
            except apierrors.Conflict:
                metrics.CONFLICTS.labels("configmap").inc()
                rv = None
        raise apierrors.Conflict(f"ConfigMap {name}: still conflicting", status=409)


def status_epoch(status_body: Mapping[str, Any]) -> int:
    """The ``leaderEpoch`` of a status (WorkerGroup or Connector; 0 when absent)."""
    value = status_body.get("leaderEpoch", 0)
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def with_leader_epoch(text: str, epoch: int) -> str:
    """An assignment document's text with its ``leaderEpoch`` set (unreadable text as is)."""
    try:
        document = json.loads(text)
    except ValueError:
        return text
    if not isinstance(document, dict):
        return text
    document["leaderEpoch"] = epoch
    return json.dumps(document, separators=(",", ":"))
