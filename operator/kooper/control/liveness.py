"""When a member is alive, when it departed, and when it is gone for good.

A member is live while its pod exists (same uid as its Lease's owner) and its
Lease *changed* within ``leaseDurationSeconds + clockSkewSeconds`` of when this
operator *observed* the change, on this operator's clock (``observe``), as
Kubernetes' node lifecycle controller and client-go's leader election do. The
worker-written ``renewTime`` is never compared with our clock: a worker whose
clock runs behind ours cannot make its Lease expire early (issue 12, mechanism
2), nor one whose clock runs ahead keep it alive. An operator that just started
has observed nothing: it treats every Lease as observed now, which can only
delay an expiry, never hasten it. The margin covers watch delivery delays.

A gone pod is not a stopped process (``vanished``, issue 22). A pod force-deleted
(``kubectl delete pod --force --grace-period=0``, a lost node) leaves the API while
its process may still run; it cannot renew any more, so it fences itself by its own
timing budget. Such a member stays a member, holding what it held, until the budget
ran out on our clock: ``leaseDurationSeconds + clockSkewSeconds`` after the last
renewal it may have made. That is the observation of its Lease's current version while
the Lease is still there, else the round that first saw the pod gone (a renewal may
have landed after the last version we observed, and before the pod went); and each
later renewal by the same incarnation counts it again (``_renewed``: its pod relabelled
out of the selector, a force-deleted pod's process that created its Lease again: a
process that renews runs). The next
incarnation under its name is no member before then either. Only the pod that the
member's Lease named proves a process stopped: a new incarnation in the same pod (the
kubelet restarts a container after it exited), a Lease that expired while that pod was
there, or one deleted while that pod was stopping (``Worker.leave`` of a worker that
predates ``left``) unless the Lease's last version still owns work (``still_owning``:
someone deleted it while the worker was still stopping). Or the worker's own word: the
last version of a deleted Lease (the watch's DELETED event carries it) whose report
says that incarnation ``left`` (``left``): without it, a round that first sees the
Lease and the pod gone together (the worker wrote its last report, deleted its Lease
and exited within one debounce) could not tell a graceful leave from a force-deleted
pod whose Lease was collected after it. A Lease gone while its pod runs on, with no
such word, was deleted by someone else (``kubectl delete lease``): the worker runs on
and its next renewal creates the Lease again, so the member keeps its work meanwhile
(and is a member again then), or departs when its budget ran out.

A departure is *permanent* when Kubernetes tells us the pod will not come back
under its name: its StatefulSet was scaled below its ordinal, or its owner is
gone. The ``kooper`` policy then reassigns its work without waiting out the
scheduled-rebalance delay.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator, Mapping, Sequence

from kooper.control import views
from kooper.core import ids, model
from kooper.protocol import messages

Fingerprint = tuple[int | None, str, int | None, str, str]
"""What identifies one version of a Lease: renewTime, holder, duration, report, and
the pod that owns it."""
Observed = Mapping[str, tuple[Fingerprint, int]]
"""Lease name → (the version last seen, when this operator first saw that version)."""


def fingerprint(lease: views.LeaseView) -> Fingerprint:
    """A Lease version: any write by its worker (a renewal, a report) changes it."""
    return (lease.renew_ms, lease.incarnation, lease.duration_s, lease.report_text,
            lease.pod_uid)


def observe(previous: Observed, leases: Sequence[views.LeaseView], *, now_ms: int) -> Observed:
    """When each Lease's current version was first observed (``now_ms`` if it is new).

    Returns ``previous`` itself when nothing changed (most rounds of a big group).
    """
    result: dict[str, tuple[Fingerprint, int]] = {}
    changed = len(previous) != len(leases)
    for lease in leases:
        seen = fingerprint(lease)
        before = previous.get(lease.name)
        if before is not None and before[0] == seen:
            result[lease.name] = before
        else:
            result[lease.name] = (seen, now_ms)
            changed = True
    return result if changed else previous


def expiry_ms(observed_ms: int, duration_s: int | None, *, default_duration_s: int,
              skew_s: int) -> int:
    """When a Lease version observed at ``observed_ms`` stops vouching for its member:
    its duration (``default_duration_s`` when it names none) plus the clock skew allowed,
    on the observer's clock. The one place this fact is written."""
    duration = duration_s if duration_s is not None else default_duration_s
    return observed_ms + (duration + skew_s) * 1000


def expires_at_ms(lease: views.LeaseView, *, observed_ms: int, default_duration_s: int,
                  skew_s: int) -> int | None:
    """When the member is declared departed if its Lease does not change again (None:
    the Lease was never acquired or renewed)."""
    if lease.renew_ms is None:
        return None
    return expiry_ms(observed_ms, lease.duration_s, default_duration_s=default_duration_s,
                     skew_s=skew_s)


def expired(leases: Sequence[views.LeaseView], observed: Observed, *, now_ms: int,
            default_duration_s: int, skew_s: int) -> list[str]:
    """The Leases whose version, as last observed, stopped vouching for its member by
    ``now_ms``: read them again before a round declares their members departed. A silent
    watch (a half-open connection) shows an old version while the worker still renews;
    a member must not depart on a stale copy."""
    found = []
    for lease in leases:
        seen = observed.get(lease.name)
        if seen is None or seen[0] != fingerprint(lease):
            continue  # a version this round observes first: it vouches from now
        expires = expires_at_ms(lease, observed_ms=seen[1],
                                default_duration_s=default_duration_s, skew_s=skew_s)
        if expires is not None and expires <= now_ms:
            found.append(lease.name)
    return found


def lease_live(
    lease: views.LeaseView, *, now_ms: int, default_duration_s: int, skew_s: int,
    observed_ms: int | None = None,
) -> bool:
    """Whether the Lease still vouches for its member at ``now_ms``, its current version
    having been observed at ``observed_ms`` (None: observed now)."""
    expires = expires_at_ms(lease, observed_ms=now_ms if observed_ms is None else observed_ms,
                            default_duration_s=default_duration_s, skew_s=skew_s)
    return expires is not None and now_ms < expires


@dataclasses.dataclass(frozen=True, slots=True)
class Vanished:
    """A member whose pod vanished while its process may still run (``vanished``)."""

    report: messages.Report
    """What it last reported (after a restart, unknown: everything it may run)."""
    until_ms: int
    """When its fence budget has run out on our clock: it departs then."""


def left(released: Iterable[views.LeaseView]) -> Mapping[ids.WorkerId, str]:
    """member → the incarnation whose last report, in the last version of its deleted
    Lease, says it left: it stopped everything and starts nothing again."""
    return {m: r.incarnation for m, r in _last_reports(released) if r.left and not r.owned}


def still_owning(released: Iterable[views.LeaseView]) -> Mapping[ids.WorkerId, str]:
    """member → the incarnation whose last report, in the last version of its deleted
    Lease, still owns work: someone else deleted that Lease while the worker ran it."""
    return {m: r.incarnation for m, r in _last_reports(released) if r.owned}


def _last_reports(released: Iterable[views.LeaseView]
                  ) -> Iterator[tuple[ids.WorkerId, messages.Report]]:
    """(member, report) of each deleted Lease's last version whose report names its
    incarnation and the member the Lease is for."""
    for lease in released:
        report = lease.report
        if report is not None and report.incarnation and report.member == lease.member:
            yield ids.WorkerId(lease.member), report


def vanished(
    previous: Mapping[ids.WorkerId, Vanished], *, state: model.PlanState,
    live: Mapping[ids.WorkerId, model.Member], pods: Mapping[str, views.PodView],
    leases: Sequence[views.LeaseView], before: Observed, observed: Observed,
    reports: Mapping[ids.WorkerId, messages.Report], now_ms: int, default_duration_s: int,
    skew_s: int,
    documents: Mapping[ids.WorkerId, tuple[str, model.ConnectorsAndTasks]] | None = None,
    gone: Mapping[ids.WorkerId, str] | None = None,
    owning: Mapping[ids.WorkerId, str] | None = None,
) -> Mapping[ids.WorkerId, Vanished]:
    """Members that hold work and whose process may run on without a pod, until when.

    ``state`` is the last round's plan (who holds work, as which incarnation), ``live``
    this round's members, ``before``/``observed`` the Lease observations before and
    after this round's ``observe``, ``reports`` the last good reports, ``documents``
    what the ConfigMaps a just-restored leader read assign or revoke
    (``Memory.given`` in its first round: a KIP-415 leader that forgot the
    assignments still knows them), ``gone`` the incarnations that said they left
    (``left``): none of them is kept, ``owning`` the incarnations whose deleted Lease's
    last version still owns work (``still_owning``): their pod stopping proves nothing.
    Returns ``previous`` itself when nothing changed.
    """
    said_left, still = gone or {}, owning or {}
    by_name = {lease.name: lease for lease in leases} if previous else None
    result = {m: v for m, v in _renewals(previous, by_name, observed, default_duration_s,
                                         skew_s).items()
              if now_ms < v.until_ms and m in state.assignments
              and said_left.get(m) != v.report.incarnation
              and not _live_as(live, m, v.report.incarnation)}
    for member, was, held in _holders(state, documents):
        if member in previous:
            continue  # kept above, or its budget ran out (or it left): it departs now
        if was and said_left.get(member) == was:
            continue  # its last report says it stopped everything and left
        found = live.get(member)
        if found is not None and (not was or found.incarnation == was):
            continue  # live, as the incarnation that holds the work
        name = views.configmap_name(member)
        last = before.get(name)
        uid = last[0][4] if last is not None else ""
        if by_name is None:
            by_name = {lease.name: lease for lease in leases}
        lease = by_name.get(name)
        if _stopped_in_pod(uid, pods.get(member), lease, owning=still.get(member) == was):
            continue
        base, duration = now_ms, last[0][2] if last is not None else None
        if lease is not None and uid and lease.pod_uid == uid and name in observed:
            base, duration = observed[name][1], lease.duration_s  # not collected yet
        until = expiry_ms(base, duration, default_duration_s=default_duration_s, skew_s=skew_s)
        if until <= now_ms:
            continue
        report = reports.get(member)
        if report is None or report.incarnation != was or state.forgotten:
            report = messages.Report(member=member, incarnation=was,
                                     protocols=frozenset(model.Protocol), generation=-1,
                                     owned=held)
        result[member] = Vanished(report, until)
    return previous if result == previous else result


def _stopped_in_pod(uid: str, pod: views.PodView | None, lease: views.LeaseView | None, *,
                    owning: bool) -> bool:
    """Whether the pod ``uid`` its Lease named, still there, proves its process stopped: a
    new incarnation in it (the old one exited), its Lease there but expired (it fenced
    itself), or its Lease gone while the pod stops (a worker that predates ``left``
    leaving), unless that Lease's last version still ``owning`` work. A Lease gone while
    its pod runs on (or stops, owning work), with no word that it left, was deleted by
    someone else: the worker runs on and renews it again, so it keeps its work."""
    return bool(uid) and pod is not None and pod.uid == uid and (
        lease is not None or (pod.deleting and not owning))


def _renewals(kept: Mapping[ids.WorkerId, Vanished],
              by_name: Mapping[str, views.LeaseView] | None, observed: Observed,
              default_duration_s: int, skew_s: int) -> Mapping[ids.WorkerId, Vanished]:
    """Each kept member as ``_renewed`` by its Lease, if there (``by_name``)."""
    if not kept or by_name is None:
        return kept
    return {m: _renewed(v, by_name.get(views.configmap_name(m)), observed,
                        default_duration_s=default_duration_s, skew_s=skew_s)
            for m, v in kept.items()}


def _renewed(kept: Vanished, lease: views.LeaseView | None, observed: Observed, *,
             default_duration_s: int, skew_s: int) -> Vanished:
    """``kept`` with its budget counted again from its Lease's newest version, when that
    incarnation still renews it: its pod is there but no longer matches the selector
    (relabelled), or the process of a force-deleted pod created its Lease again. A
    process that renews runs: its work stays with it. What it reports there is what it
    runs: a revocation it applied frees that work, as a live member's acknowledgement
    does (a relabelled member told to give work up for balance)."""
    if lease is None or lease.incarnation != kept.report.incarnation \
            or lease.renew_ms is None or lease.name not in observed:
        return kept
    until = max(kept.until_ms, expiry_ms(observed[lease.name][1], lease.duration_s,
                                         default_duration_s=default_duration_s, skew_s=skew_s))
    report = lease.report if lease.report is not None \
        and lease.report.incarnation == kept.report.incarnation else kept.report
    if until == kept.until_ms and report == kept.report:
        return kept
    return Vanished(report, until)


def _live_as(live: Mapping[ids.WorkerId, model.Member], member: ids.WorkerId,
             incarnation: str) -> bool:
    """Whether ``member`` is live again as ``incarnation`` (its Lease was back)."""
    found = live.get(member)
    return found is not None and bool(incarnation) and found.incarnation == incarnation


def _holders(state: model.PlanState,
             documents: Mapping[ids.WorkerId, tuple[str, model.ConnectorsAndTasks]] | None
             ) -> Iterator[tuple[ids.WorkerId, str, model.ConnectorsAndTasks]]:
    """(member, incarnation, what it may run) of every member that may run something."""
    for member, assigned in state.assignments.items():
        revoking = state.revoking.get(member)
        held = assigned if revoking is None else assigned.union(revoking)
        if held:
            yield member, state.incarnations.get(member, ""), held
    for member, (incarnation, assigned) in (documents or {}).items():
        if member not in state.assignments and assigned:
            yield member, incarnation, assigned


def ordinal(pod_name: str, statefulset: str) -> int | None:
    """A StatefulSet pod's ordinal (``workers-3`` of ``workers`` → 3), or None."""
    prefix = f"{statefulset}-"
    if not pod_name.startswith(prefix):
        return None
    suffix = pod_name[len(prefix) :]
    return int(suffix) if suffix.isdigit() else None


PERMANENT_OWNER_KINDS = ("StatefulSet", "ReplicaSet")
"""Owner kinds the operator looks up when one of their pods departs."""


def permanently_departed(
    *, pod_name: str, owner_kind: str, owner_name: str, owner_exists: bool, replicas: int | None
) -> bool:
    """Whether a departed pod is known not to come back under its name.

    ``owner_exists``/``replicas`` come from a read of the owner at departure time
    (``replicas`` only for a StatefulSet).
    """
    if not owner_kind or not owner_name:
        return False
    if not owner_exists:
        return True
    if owner_kind != "StatefulSet" or replicas is None:
        return False
    number = ordinal(pod_name, owner_name)
    return number is not None and number >= replicas
