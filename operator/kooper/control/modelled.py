"""``step`` inputs for runners that model a group instead of watching one.

The simulator and ``kooper replay`` know each member as a ``model.Member`` (what it
reports) and each connector as a task count; these build the same views the
operator's kopf indexes hold, so that all three run the one ``step``. A modelled
member's Lease never expires on its own: the runner removes the member when it
departs. Each pod is owned by its own ReplicaSet-like controller, named after the
pod, that exists until the pod is scaled away (a known-permanent departure).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kooper.control import views
from kooper.core import ids, model
from kooper.protocol import messages

NAMESPACE = "default"
OWNER_KIND = "ReplicaSet"
FOREVER_S = 10**9
"""A modelled Lease's duration: it expires only when its member departs."""


def group(name: str, settings: model.Settings, *, status: Mapping[str, Any] | None = None
          ) -> views.GroupView:
    """The WorkerGroup ``name``, selecting pods labelled with it."""
    return views.GroupView(
        namespace=NAMESPACE, name=name, uid=f"uid-{name}", generation=1, resource_version="",
        selector=views.Selector(((views.GROUP_LABEL, name),)), settings=settings,
        lease_duration_s=FOREVER_S, clock_skew_s=0, status=dict(status or {}))


def connectors(name: str, counts: Mapping[str, int]) -> list[views.ConnectorView]:
    """Running connectors with these task counts."""
    return [views.ConnectorView(
        namespace=NAMESPACE, name=connector, uid=f"uid-{connector}", generation=1, group=name,
        tasks_max=tasks, config={}, state="running", restart="", status={},
    ) for connector, tasks in counts.items()]


def pod(name: str, member: model.Member) -> views.PodView:
    """The pod of a live member (its uid names the incarnation)."""
    return views.PodView(
        namespace=NAMESPACE, name=member.id, uid=f"{member.id}/{member.incarnation}",
        labels={views.GROUP_LABEL: name}, deleting=False, owner_kind=OWNER_KIND,
        owner_name=member.id)


def lease(member: model.Member) -> views.LeaseView:
    """The member's Lease, carrying its report."""
    report = messages.Report(member=member.id, incarnation=member.incarnation,
                             protocols=member.protocols, generation=member.generation,
                             owned=member.owned, fenced=member.fenced)
    return views.LeaseView(
        namespace=NAMESPACE, name=views.configmap_name(member.id), member=member.id,
        pod_uid=f"{member.id}/{member.incarnation}", incarnation=member.incarnation,
        renew_ms=0, duration_s=FOREVER_S, report=report, error="", report_text="")


class Members:
    """Pods and Leases of modelled members, rebuilt only for members whose report changed."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._views: dict[ids.WorkerId, tuple[model.Member, views.PodView, views.LeaseView]] = {}

    def views(self, members: Mapping[ids.WorkerId, model.Member]
              ) -> tuple[list[views.PodView], list[views.LeaseView]]:
        """(pods, leases) of ``members``."""
        for gone in [m for m in self._views if m not in members]:
            del self._views[gone]
        pods, leases = [], []
        for member_id, member in members.items():
            known = self._views.get(member_id)
            if known is None or known[0] is not member:
                known = (member, pod(self.name, member), lease(member))
                self._views[member_id] = known
            pods.append(known[1])
            leases.append(known[2])
        return pods, leases
