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

A departure is *permanent* when Kubernetes tells us the pod will not come back
under its name: its StatefulSet was scaled below its ordinal, or its owner is
gone. The ``kooper`` policy then reassigns its work without waiting out the
scheduled-rebalance delay.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from kooper.control import views

Fingerprint = tuple[int | None, str, int | None, str]
"""What identifies one version of a Lease: renewTime, holder, duration, report."""
Observed = Mapping[str, tuple[Fingerprint, int]]
"""Lease name → (the version last seen, when this operator first saw that version)."""


def fingerprint(lease: views.LeaseView) -> Fingerprint:
    """A Lease version: any write by its worker (a renewal, a report) changes it."""
    return (lease.renew_ms, lease.incarnation, lease.duration_s, lease.report_text)


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


def expires_at_ms(lease: views.LeaseView, *, observed_ms: int, default_duration_s: int,
                  skew_s: int) -> int | None:
    """When the member is declared departed if its Lease does not change again (None:
    the Lease was never acquired or renewed)."""
    if lease.renew_ms is None:
        return None
    duration = lease.duration_s if lease.duration_s is not None else default_duration_s
    return observed_ms + (duration + skew_s) * 1000


def lease_live(
    lease: views.LeaseView, *, now_ms: int, default_duration_s: int, skew_s: int,
    observed_ms: int | None = None,
) -> bool:
    """Whether the Lease still vouches for its member at ``now_ms``, its current version
    having been observed at ``observed_ms`` (None: observed now)."""
    expires = expires_at_ms(lease, observed_ms=now_ms if observed_ms is None else observed_ms,
                            default_duration_s=default_duration_s, skew_s=skew_s)
    return expires is not None and now_ms < expires


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
