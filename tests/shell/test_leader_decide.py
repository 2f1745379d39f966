"""``leader.decide`` as a table: what a replica does with the Lease it read."""

import pytest

from kooper.shell import leader

A = leader.Action


def lease(holder, duration=10):
    return {"spec": {"holderIdentity": holder, "leaseDurationSeconds": duration}}


@pytest.mark.parametrize(("read", "observed_ms", "now_ms", "action"), [
    (None, 0, 0, A.CREATE),
    (lease("me"), 0, 60_000, A.RENEW),  # ours, however old
    (lease("other"), 0, 9_999, A.STAND_BY),  # renewed less than its duration ago (as seen)
    (lease("other"), 0, 10_000, A.TAKE_OVER),  # stood still for its duration
    (lease("other", duration=None), 0, 14_999, A.STAND_BY),  # our default (15 s) then
    (lease(""), 0, 0, A.TAKE_OVER),  # released on a clean stop
])
def test_a_replica_creates_renews_stands_by_or_takes_over(read, observed_ms, now_ms, action):
    assert leader.decide(read, me="me", observed_ms=observed_ms, now_ms=now_ms,
                         lease_s=15) is action
