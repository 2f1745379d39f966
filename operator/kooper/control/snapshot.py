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

from kooper.control import liveness, selectors, views
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
    new_pods: tuple[views.PodView, ...] = ()
    """Matching pods not seen (as the same object) by the last call with the same memo."""


def wanted(connectors: Iterable[views.ConnectorView]) -> tuple[dict[str, int], dict[str, str]]:
    """Task counts by connector, and the non-running states by connector."""
    counts: dict[str, int] = {}
    states: dict[str, str] = {}
    for connector in connectors:
        counts[connector.name] = 0 if connector.state == "stopped" else connector.tasks_max
        if connector.state != "running":
            states[connector.name] = connector.state
    return counts, states


class Memo:
    """What ``collect_members`` computed last time, reused for the same view objects.

    kopf indexes (and the simulator) hand back the same view object until the
    object changes, so at 1,000 members most Leases and pods are the objects of the
    round before: their selector match and their ``Member`` are looked up, not rebuilt.
    A pods or Leases list passed once must not be mutated afterwards.
    """

    def __init__(self) -> None:
        self.selector: selectors.Selector | None = None
        self.pods: Iterable[views.PodView] | None = None
        self.matching: dict[str, views.PodView] = {}
        self.matches: dict[str, tuple[views.PodView, bool]] = {}
        self.members: dict[str, tuple[views.LeaseView, views.PodView, model.Member, int]] = {}
        self.leases: list[views.LeaseView] | None = None
        self.result: Members | None = None

    def select(self, selector: selectors.Selector) -> None:
        """Forget everything learnt under another selector."""
        if self.selector != selector:
            self.selector, self.pods, self.matches, self.members = selector, None, {}, {}
            self.leases = self.result = None


_Found = tuple[model.Member, messages.Report, int | None]


def _member_of(group: views.GroupView, lease: views.LeaseView, pod: views.PodView | None, *,
               last_good: Mapping[ids.WorkerId, messages.Report], now_ms: int,
               issues: list[Issue], observed: liveness.Observed | None) -> _Found | None:
    """The member a Lease vouches for now, with its report and expiry (None: not one)."""
    if lease.name != views.configmap_name(lease.member):
        # A member is its Lease's name (kooper-<pod>): a Lease labelled for another
        # member is a forged or broken copy, never that member's heartbeat.
        if pod is not None:
            issues.append(Issue(
                "LeaseIdentityMismatch",
                f"Lease {lease.name} is labelled for member {lease.member!r}; a member's "
                f"Lease is named {views.configmap_name(lease.member)}: ignored",
                lease.member))
        return None
    holder_pod = lease.holder.partition("/")[0]
    if holder_pod and holder_pod != lease.member:
        # The holder is the pod that writes the Lease: another pod's renewals (a copy
        # kept alive by its forger) never vouch for this member.
        if pod is not None:
            issues.append(Issue(
                "LeaseIdentityMismatch",
                f"Lease {lease.name} is held by {lease.holder!r}, not by member "
                f"{lease.member!r}: ignored", lease.member))
        return None
    if pod is None:
        return None  # Another group's member, or a pod that is gone.
    if lease.pod_uid and lease.pod_uid != pod.uid:
        return None  # The Lease of a previous pod with this name, awaiting garbage collection.
    seen = observed.get(lease.name) if observed is not None else None
    observed_ms = seen[1] if seen is not None else now_ms
    expiry = liveness.expires_at_ms(lease, observed_ms=observed_ms,
                                    default_duration_s=group.lease_duration_s,
                                    skew_s=group.clock_skew_s)
    if expiry is None or now_ms >= expiry:
        return None
    member = ids.WorkerId(lease.member)
    report = lease.report
    if report is None:
        previous = last_good.get(member)
        if lease.error and lease.error != views.NO_REPORT:
            issues.append(Issue("MalformedReport", f"{member}: {lease.error}", member))
        if previous is None or previous.incarnation != lease.incarnation:
            return None
        report = previous
    return member_of(member, report), report, expiry


def member_of(member: ids.WorkerId, report: messages.Report) -> model.Member:
    """``member`` as its report describes it."""
    return model.Member(
        id=member,
        owned=report.owned,
        generation=report.generation,
        protocols=report.protocols or frozenset({model.Protocol.EAGER}),
        incarnation=report.incarnation,
        fenced=report.fenced,
        rejoins=report.rejoins,
    )


def with_vanished(found: Members, vanished: Mapping[ids.WorkerId, liveness.Vanished]
                  ) -> Members:
    """``found`` with the members whose pod vanished (``liveness.vanished``) still
    members, as the incarnation that holds the work, until their budget ran out."""
    if not vanished:
        return found
    members = dict(found.members)
    reports = dict(found.reports)
    for member, gone in vanished.items():
        members[member] = member_of(member, gone.report)
        reports[member] = gone.report
    soonest = min(gone.until_ms for gone in vanished.values())
    expiry = soonest if found.next_expiry_ms is None else min(found.next_expiry_ms, soonest)
    return dataclasses.replace(found, members=members, reports=reports, next_expiry_ms=expiry)


def collect_members(
    group: views.GroupView,
    *,
    pods: Iterable[views.PodView],
    leases: Iterable[views.LeaseView],
    last_good: Mapping[ids.WorkerId, messages.Report],
    now_ms: int,
    memo: Memo | None = None,
    observed: liveness.Observed | None = None,
) -> Members:
    """Live members: a matching pod, an unexpired Lease of that pod, a usable report.

    A Lease expires ``leaseDurationSeconds + clockSkewSeconds`` after ``observed``
    says its current version was first seen (``liveness.observe``; a Lease missing
    from it counts as seen now). A memo must be used with one ``observed`` history.
    """
    memo = memo if memo is not None else Memo()
    leases = list(leases) if not isinstance(leases, list) else leases
    selector = group.selector
    memo.select(selector)
    quick = _changed_only(group, memo, pods=pods, leases=leases, last_good=last_good,
                          now_ms=now_ms, observed=observed)
    if quick is not None:
        return quick
    matching, new_pods = _matching(selector, pods, memo)
    built = memo.members
    members: dict[ids.WorkerId, model.Member] = {}
    reports: dict[ids.WorkerId, messages.Report] = {}
    issues: list[Issue] = []
    next_expiry: int | None = None
    kept: dict[str, tuple[views.LeaseView, views.PodView, model.Member, int]] = {}
    for lease in leases:
        found_pod = matching.get(lease.member)
        known = built.get(lease.member)
        if known is not None and known[0] is lease and known[1] is found_pod:
            if now_ms >= known[3]:
                continue  # Expired.
            member_id = known[2].id
            members[member_id] = known[2]
            reports[member_id] = known[0].report or last_good[member_id]
            kept[lease.member] = known
            if next_expiry is None or known[3] < next_expiry:
                next_expiry = known[3]
            continue
        found = _member_of(group, lease, found_pod, last_good=last_good, now_ms=now_ms,
                           issues=issues, observed=observed)
        if found is None or found_pod is None:
            continue
        member, report, expiry = found
        members[member.id] = member
        reports[member.id] = report
        if expiry is not None and (next_expiry is None or expiry < next_expiry):
            next_expiry = expiry
        if lease.report is not None and expiry is not None:
            kept[lease.member] = (lease, found_pod, member, expiry)
    memo.members = kept
    result = Members(members, matching, tuple(issues), next_expiry, reports, tuple(new_pods))
    memo.leases, memo.result = leases, result
    return result


def _matching(selector: selectors.Selector, pods: Iterable[views.PodView], memo: Memo
              ) -> tuple[dict[str, views.PodView], list[views.PodView]]:
    """The pods the selector matches, by name, and those that newly match (a pod object
    matched before is not matched again: the memo)."""
    new_pods: list[views.PodView] = []
    if pods is memo.pods:
        return memo.matching, new_pods  # The very same pods as last time.
    seen = memo.matches
    matching: dict[str, views.PodView] = {}
    fresh: dict[str, tuple[views.PodView, bool]] = {}
    for pod in pods:
        hit = seen.get(pod.name)
        if hit is not None and hit[0] is pod:
            ok = hit[1]
        else:
            ok = selector.matches(pod.labels)
            if ok:
                new_pods.append(pod)
        fresh[pod.name] = (pod, ok)
        if ok:
            matching[pod.name] = pod
    memo.pods, memo.matching, memo.matches = pods, matching, fresh
    return matching, new_pods


def _changed_only(group: views.GroupView, memo: Memo, *, pods: Iterable[views.PodView],
                  leases: list[views.LeaseView],
                  last_good: Mapping[ids.WorkerId, messages.Report], now_ms: int,
                  observed: liveness.Observed | None) -> Members | None:
    """The last result with only the Leases that are new objects redone, when that is
    exact: same pods, same Leases in the same places, nobody expired, no bad input."""
    before, last = memo.leases, memo.result
    if before is None or last is None or pods is not memo.pods or last.issues \
            or len(before) != len(leases) \
            or (last.next_expiry_ms is not None and now_ms >= last.next_expiry_ms):
        return None
    changed = [(old, new) for old, new in zip(before, leases, strict=True) if old is not new]
    members = dict(last.members)
    reports = dict(last.reports)
    kept = dict(memo.members)
    next_expiry = last.next_expiry_ms
    for old, new in changed:
        if old.member != new.member or old.member not in kept:
            return None  # Moved, or a Lease that was no member: the whole pass decides.
        pod = memo.matching.get(new.member)
        issues: list[Issue] = []
        found = _member_of(group, new, pod, last_good=last_good, now_ms=now_ms, issues=issues,
                           observed=observed)
        if found is None or issues or pod is None or new.report is None:
            return None
        member, report, expiry = found
        if expiry is None:
            return None
        if kept[old.member][3] == next_expiry and (expiry is None or expiry > next_expiry):
            return None  # The earliest expiry moved later: the whole pass finds the new one.
        members[member.id] = member
        reports[member.id] = report
        kept[new.member] = (new, pod, member, expiry)
        if expiry is not None and (next_expiry is None or expiry < next_expiry):
            next_expiry = expiry
    memo.members = kept
    result = Members(members, last.pods, (), next_expiry, reports, ())
    memo.leases, memo.result = leases, result
    return result


def build(
    group: views.GroupView,
    *,
    connectors: Iterable[views.ConnectorView],
    members: Mapping[ids.WorkerId, model.Member],
    departed_permanently: Iterable[ids.WorkerId] = (),
    restarts: Iterable[str] = (),
    counts: Mapping[str, int] | None = None,
    outdated: frozenset[ids.WorkerId] = frozenset(),
    updated: frozenset[ids.WorkerId] = frozenset(),
    rolling: bool = False,
) -> model.Snapshot:
    """The round's snapshot (``counts``: ``wanted(connectors)[0]`` if already known)."""
    if counts is None:
        counts, _ = wanted(connectors)
    return model.Snapshot(
        connectors=dict(counts),
        members=dict(members),
        settings=group.settings,
        departed_permanently=frozenset(departed_permanently),
        restarts=frozenset(restarts),
        outdated=outdated,
        updated=updated,
        rolling=rolling,
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
