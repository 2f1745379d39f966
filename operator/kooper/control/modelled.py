"""``step`` inputs for runners that model a group instead of watching one.

The simulator and ``kooper replay`` know each member as a ``model.Member`` (what it
reports) and each connector as a task count; these build the same views the
operator's kopf indexes hold, so that all three run the one ``step``. A modelled
member's Lease never expires on its own: the runner removes the member when it
departs. Each pod is owned by its own ReplicaSet-like controller, named after the
pod, that exists until the pod is scaled away (a known-permanent departure).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from kooper.control import selectors, views
from kooper.core import ids, model
from kooper.protocol import messages

NAMESPACE = "default"
OWNER_KIND = "ReplicaSet"
FOREVER_S = 10**9
"""A modelled Lease's duration: it expires only when its member departs."""


def group(name: str, settings: model.Settings, *, status: Mapping[str, Any] | None = None,
          max_moves_per_round: int | str | None = None) -> views.GroupView:
    """The WorkerGroup ``name``, selecting pods labelled with it; ``max_moves_per_round``
    is its ``spec.balancing.maxMovesPerRound`` (``None``: unset, the policy's default)."""
    return views.GroupView(
        namespace=NAMESPACE, name=name, uid=f"uid-{name}", generation=1, resource_version="",
        selector=selectors.Selector(((views.GROUP_LABEL, name),)), settings=settings,
        lease_duration_s=FOREVER_S, clock_skew_s=0, status=dict(status or {}),
        max_moves_per_round=max_moves_per_round)


def connectors(name: str, counts: Mapping[str, int]) -> list[views.ConnectorView]:
    """Running connectors with these task counts."""
    return [views.ConnectorView(
        namespace=NAMESPACE, name=connector, uid=f"uid-{connector}", generation=1, group=name,
        tasks_max=tasks, config={}, state="running", restart="", status={},
    ) for connector, tasks in counts.items()]


def pod(name: str, member: model.Member, owner: tuple[str, str] | None = None,
        labels: Mapping[str, str] | None = None) -> views.PodView:
    """The pod of a live member (its uid names the incarnation); by default its own
    ReplicaSet-like owner, or ``owner`` with extra ``labels`` (a rollout's revision)."""
    kind, owner_name = owner if owner is not None else (OWNER_KIND, member.id)
    return views.PodView(
        namespace=NAMESPACE, name=member.id, uid=f"{member.id}/{member.incarnation}",
        labels={views.GROUP_LABEL: name, **(labels or {})}, deleting=False, owner_kind=kind,
        owner_name=owner_name)


def lease(member: model.Member, member_epoch: int = 0) -> views.LeaseView:
    """The member's Lease, carrying its report (naming ``member_epoch``, if any)."""
    report = messages.Report(member=member.id, incarnation=member.incarnation,
                             protocols=member.protocols, generation=member.generation,
                             owned=member.owned, fenced=member.fenced,
                             member_epoch=member_epoch, rejoins=member.rejoins)
    return views.LeaseView(
        namespace=NAMESPACE, name=views.configmap_name(member.id), member=member.id,
        pod_uid=f"{member.id}/{member.incarnation}", incarnation=member.incarnation,
        renew_ms=0, duration_s=FOREVER_S, report=report, error="", report_text="")


class Members:
    """Pods and Leases of modelled members, rebuilt only for members whose report changed.

    ``views`` returns the same list objects until a member changes (and the same pods
    list until one joins or leaves), so the step's indexes see unchanged objects.
    """

    def __init__(self, name: str) -> None:
        self.name = name
        self._members: dict[ids.WorkerId, model.Member] = {}
        self._pods: dict[ids.WorkerId, views.PodView] = {}
        self._leases: dict[ids.WorkerId, views.LeaseView] = {}
        self._lists: tuple[list[views.PodView], list[views.LeaseView]] | None = None
        self._pods_list: list[views.PodView] | None = None
        self._described: dict[ids.WorkerId, tuple[tuple[str, str], Mapping[str, str]]] = {}

    def describe(self, member: ids.WorkerId, owner: tuple[str, str],
                 labels: Mapping[str, str]) -> None:
        """The pod ``member`` is created next carries this owner and these labels."""
        self._described[member] = (owner, labels)

    def pending(self, member: ids.WorkerId) -> None:
        """Pod ``member`` was created (as ``describe`` says) and its worker has not joined."""
        if member in self._members:
            return
        owner, labels = self._described.get(member, (None, None))
        self._pods[member] = dataclasses.replace(
            pod(self.name, model.Member(member, incarnation="pending"), owner, labels))
        self._pods_list = None
        self._lists = None

    def update(self, member: model.Member, member_epoch: int = 0) -> None:
        """``member`` reports (joins, or reports again), in ``member_epoch`` if any."""
        if self._members.get(member.id) is member:
            return
        before = self._members.get(member.id)
        self._members[member.id] = member
        if before is None or before.incarnation != member.incarnation:
            owner, labels = self._described.get(member.id, (None, None))
            self._pods[member.id] = pod(self.name, member, owner, labels)
            self._pods_list = None
        self._leases[member.id] = lease(member, member_epoch)
        self._lists = None

    def remove(self, member: ids.WorkerId) -> None:
        """``member`` departed: its pod and Lease are gone."""
        if self._members.pop(member, None) is not None:
            self._pods.pop(member, None)
            self._leases.pop(member, None)
            self._pods_list = None
            self._lists = None

    def terminating(self, member: ids.WorkerId) -> None:
        """``member``'s pod got a ``deletionTimestamp`` (a graceful stop began)."""
        found = self._pods.get(member)
        if found is not None and not found.deleting:
            self._pods[member] = dataclasses.replace(found, deleting=True)
            self._pods_list = None
            self._lists = None

    def leave(self, member: ids.WorkerId) -> None:
        """``member`` deleted its Lease (``Worker.leave``); its terminating pod stays."""
        if self._members.pop(member, None) is not None:
            self._leases.pop(member, None)
            self._lists = None

    def pod_gone(self, member: ids.WorkerId, uid: str) -> None:
        """The kubelet removed the pod ``uid`` of a member that already left."""
        found = self._pods.get(member)
        if member not in self._members and found is not None and found.uid == uid:
            del self._pods[member]
            self._pods_list = None
            self._lists = None

    def current(self) -> tuple[list[views.PodView], list[views.LeaseView]]:
        """(pods, leases) of the members as updated."""
        if self._lists is None:
            if self._pods_list is None:
                self._pods_list = list(self._pods.values())
            self._lists = (self._pods_list, list(self._leases.values()))
        return self._lists

    def views(self, members: Mapping[ids.WorkerId, model.Member]
              ) -> tuple[list[views.PodView], list[views.LeaseView]]:
        """(pods, leases) of exactly ``members``."""
        for gone in [m for m in self._members if m not in members]:
            self.remove(gone)
        for member in members.values():
            self.update(member)
        return self.current()
