"""When a member is alive, when it departed, and when it is gone for good.

A member is live while its pod exists (same uid as its Lease's owner) and its
Lease was renewed within ``leaseDurationSeconds + clockSkewSeconds``. The skew
margin is there because ``renewTime`` is written with the worker's clock and
read with ours.

A departure is *permanent* when Kubernetes tells us the pod will not come back
under its name: its StatefulSet was scaled below its ordinal, or its owner is
gone. The ``kooper`` policy then reassigns its work without waiting out the
scheduled-rebalance delay.
"""

from __future__ import annotations

from kooper.control import views


def lease_live(
    lease: views.LeaseView, *, now_ms: int, default_duration_s: int, skew_s: int
) -> bool:
    """Whether the Lease still vouches for its member at ``now_ms``."""
    expires = lease.expires_at_ms(default_duration_s=default_duration_s, skew_s=skew_s)
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
