"""kopf index views → ``core.model.Snapshot`` (pure: the clock is an argument).

Connectors map to task counts: a ``running`` or ``paused`` connector wants its
instance and ``tasksMax`` tasks (paused work stays assigned so it resumes where it
was; the Assignment's ``states`` tells workers to hold it paused); a ``stopped``
connector keeps its instance assigned (it owns the connector's lifecycle, as in
Kafka Connect's STOPPED state) and wants 0 tasks.

Members come from Leases whose pod matches the group's selector. Anything that
keeps a Lease from counting becomes an ``Issue`` the round turns into an Event.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping

from kooper.control import liveness, views
from kooper.core import ids, model
from kooper.protocol import messages


@dataclasses.dataclass(frozen=True, slots=True)
class Issue:
    """Something wrong with the input, for an Event on the WorkerGroup."""

    reason: str
    message: str
    member: str = ""


@dataclasses.dataclass(frozen=True, slots=True)
class Members:
    """The live members of a group and what we noticed building them."""

    members: Mapping[ids.WorkerId, model.Member]
    pods: Mapping[str, views.PodView]
    """Pods matching the selector, by name (members or not)."""
    issues: tuple[Issue, ...]
    next_expiry_ms: int | None
    """The earliest time a live member's Lease runs out: plan again then."""
    reports: Mapping[ids.WorkerId, messages.Report]
    """The reports used (the last good one where the current one is malformed)."""


def wanted(connectors: Iterable[views.ConnectorView]) -> tuple[dict[str, int], dict[str, str]]:
    """Task counts by connector, and the non-running states by connector."""
    counts: dict[str, int] = {}
    states: dict[str, str] = {}
    for connector in connectors:
        counts[connector.name] = 0 if connector.state == "stopped" else connector.tasks_max
        if connector.state != "running":
            states[connector.name] = connector.state
    return counts, states


def collect_members(
    group: views.GroupView,
    *,
    pods: Iterable[views.PodView],
    leases: Iterable[views.LeaseView],
    last_good: Mapping[ids.WorkerId, messages.Report],
    now_ms: int,
    built: dict[ids.WorkerId, tuple[messages.Report, model.Member]] | None = None,
) -> Members:
    """Live members: a matching pod, an unexpired Lease of that pod, a usable report.

    ``built`` remembers the ``Member`` made from each report object, so that an
    unchanged report gives the same ``Member`` (cheaper to build and to compare).
    """
    selector = group.selector
    matching = {pod.name: pod for pod in pods if selector.matches(pod.labels)}
    members: dict[ids.WorkerId, model.Member] = {}
    reports: dict[ids.WorkerId, messages.Report] = {}
    issues: list[Issue] = []
    next_expiry: int | None = None
    for lease in leases:
        pod = matching.get(lease.member)
        if pod is None:
            continue  # Another group's member, or a pod that is gone.
        if lease.pod_uid and lease.pod_uid != pod.uid:
            continue  # The Lease of a previous pod with this name, awaiting garbage collection.
        if not liveness.lease_live(
            lease, now_ms=now_ms, default_duration_s=group.lease_duration_s,
            skew_s=group.clock_skew_s,
        ):
            continue
        member = ids.WorkerId(lease.member)
        report = lease.report
        if report is None:
            previous = last_good.get(member)
            if lease.error and lease.error != views.NO_REPORT:
                issues.append(Issue("MalformedReport", f"{member}: {lease.error}", member))
            if previous is None or previous.incarnation != lease.incarnation:
                continue
            report = previous
        expiry = lease.expires_at_ms(
            default_duration_s=group.lease_duration_s, skew_s=group.clock_skew_s
        )
        if expiry is not None and (next_expiry is None or expiry < next_expiry):
            next_expiry = expiry
        known = built.get(member) if built is not None else None
        if known is not None and known[0] is report:
            members[member] = known[1]
        else:
            members[member] = model.Member(
                id=member,
                owned=report.owned,
                generation=report.generation,
                protocols=report.protocols or frozenset({model.Protocol.EAGER}),
                incarnation=report.incarnation,
                fenced=report.fenced,
            )
            if built is not None:
                built[member] = (report, members[member])
        reports[member] = report
    if built is not None and len(built) > len(members):
        for gone in [m for m in built if m not in members]:
            del built[gone]
    return Members(members, matching, tuple(issues), next_expiry, reports)


def build(
    group: views.GroupView,
    *,
    connectors: Iterable[views.ConnectorView],
    members: Mapping[ids.WorkerId, model.Member],
    departed_permanently: Iterable[ids.WorkerId] = (),
    restarts: Iterable[str] = (),
) -> model.Snapshot:
    """The round's snapshot."""
    counts, _ = wanted(connectors)
    return model.Snapshot(
        connectors=counts,
        members=dict(members),
        settings=group.settings,
        departed_permanently=frozenset(departed_permanently),
        restarts=frozenset(restarts),
    )


def observed_restart(connector: views.ConnectorView) -> str:
    """The ``kooper.dev/restart`` value an operator already acted on (``status.restart``)."""
    record = connector.status.get("restart")
    if isinstance(record, Mapping):
        observed = record.get("observed")
        if isinstance(observed, str):
            return observed
    return ""


def restart_requests(
    connectors: Iterable[views.ConnectorView], *, handled: Mapping[str, str]
) -> dict[str, str]:
    """Connectors whose ``kooper.dev/restart`` value is new: name → value.

    A value is old once this process acted on it (``handled``) or an earlier one
    persisted it as ``status.restart.observed``; an empty value asks for nothing.
    Like Strimzi's restart annotation, but the annotation stays: setting a new value
    (a timestamp, a counter) asks again.
    """
    result: dict[str, str] = {}
    for connector in connectors:
        value = connector.restart
        if not value:
            continue
        done = handled.get(connector.name)
        if value == (done if done is not None else observed_restart(connector)):
            continue
        result[connector.name] = value
    return result


def restart_resources(name: str, tasks: int) -> frozenset[str]:
    """A connector's instance and its ``tasks`` tasks: what a restart restarts."""
    return frozenset({name, *(model.task_id(name, number) for number in range(tasks))})


def unknown_claims(
    member: model.Member, *, given: model.ConnectorsAndTasks, configured: model.ConnectorsAndTasks
) -> model.ConnectorsAndTasks:
    """Configured resources a member reports owning that it was never given.

    Resources no connector wants any more are not suspicious (the connector was
    deleted or shrunk while they ran): the round revokes them.
    """
    return member.owned.intersection(configured).difference(given)
