"""A renewal sent after a gap never undoes the fencing the gap called for (issue 12).

Found by the real-process chaos run (tests/chaos_real): a worker SIGSTOPped past its
Lease is thawed, its Lease keeper renews at once, and the main loop may hear of that
renewal before it looks at the clock. Here the test plays that order on the fake
clock of tests/sdk/test_worker_fencing.py (30 s lease: fence at 18 s, end at 28 s).
"""

import pytest
from tests.sdk.test_worker_fencing import Harness
from tests.sdk.worker_helpers import assign

from kooper.protocol import member
from kooper.sdk import client

pytest.importorskip("kmock")


def test_a_renewal_sent_after_the_end_of_the_budget_still_ends_the_process(api):
    h = Harness(api)
    assign(api, 1, [], ["A-0"])
    h.applied(1)
    h.clock.now += 40  # frozen for 40 s
    assert h.worker.keeper.renew(h.worker._owner)  # the keeper renews before the loop turns
    with pytest.raises(client.WorkerStuckError):
        h.worker.step()
    assert h.exits == [client.STUCK_EXIT_CODE]


def test_a_renewal_sent_after_the_fence_still_fences_and_stops_everything_as_lost(api):
    h = Harness(api)
    assign(api, 1, [], ["A-0"])
    h.applied(1)
    h.clock.now += 20  # past the fence (18 s), before the end (28 s)
    assert h.worker.keeper.renew(h.worker._owner)
    h.worker.step()
    h.callbacks.called("on_lost", "A-0")
    assert h.worker.session.state is member.MemberState.JOINING  # back, fenced, empty
    assert h.worker.session.report().fenced
    assert h.exits == []


def test_a_renewal_sent_within_the_budget_keeps_everything_running(api):
    h = Harness(api)
    assign(api, 1, [], ["A-0"])
    h.applied(1)
    h.clock.now += 17
    assert h.worker.keeper.renew(h.worker._owner)
    h.worker.step()
    assert h.worker.session.state is member.MemberState.STABLE
    assert h.worker.session.owned == {"A-0"}
