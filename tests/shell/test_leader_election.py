"""Two operator replicas with leader election on the emulator: one leads, the other
stands by (ready), and takes over within the Lease duration when the leader dies."""

from __future__ import annotations

import pytest
from tests.shell.conftest import (
    NS,
    Operator,
    condition,
    group_status,
    make_connector,
    make_group,
    settled,
    wait_for,
)

from kooper.shell import leader, probes

LEASE = "coordination.k8s.io/v1/leases"


def replica(emulated, name):
    return Operator(emulated, identity=name, leader_election=True, leader_namespace=NS,
                    leader_lease_s=2, leader_renew_s=0.2)


def holder(emulated):
    lease = emulated.get(LEASE, leader.LEASE_NAME, namespace=NS) or {}
    return (lease.get("spec") or {}).get("holderIdentity")


@pytest.mark.parametrize("crash", [True, False], ids=["leader crashes", "leader stops"])
def test_the_standby_takes_over_from_persisted_state_and_nothing_runs_twice(
        emulated, fleet, crash):
    a = replica(emulated, "op-a").start()
    wait_for(lambda: holder(emulated) == "op-a", what="op-a leads")
    b = replica(emulated, "op-b").start()
    try:
        make_group(emulated, delay="30s")
        make_connector(emulated, "A", 4)
        for n in range(2):
            fleet.add(f"w-{n}")
        wait_for(lambda: settled(fleet, emulated, resources=5, members=2), what="settle")
        wait_for(lambda: b.shell.elector.holder == "op-a", what="op-b sees the leader")
        assert a.shell.runners  # only the leader runs rounds
        assert not b.shell.runners
        ready, detail = probes.readiness(b.shell)
        assert ready
        assert (detail["role"], detail["leader"]) == ("standby", "op-a")
        assert probes.readiness(a.shell)[1]["role"] == "leader"
        generation = group_status(emulated)["rebalanceGeneration"]

        a.shell.elector.release_on_stop = not crash
        a.stop()  # the leader's process ends (a crash leaves the Lease to expire)
        wait_for(lambda: holder(emulated) == "op-b", what="op-b takes over")
        wait_for(lambda: b.shell.runners, what="op-b runs the group")
        # It resumes from the persisted state: the same generation, nothing moved.
        runner = b.quiet_after(1)
        assert runner.memory.persisted.state.generation >= generation
        assert settled(fleet, emulated, resources=5, members=2)
        # ...and keeps rebalancing.
        fleet.add("w-2")
        wait_for(lambda: settled(fleet, emulated, resources=5, members=3), what="rebalanced")
        assert condition(group_status(emulated), "Ready")["status"] == "True"
        assert b.shell.elector.transitions == 1  # an expired or released Lease, taken over
    finally:
        b.stop()
        a.stop()
    assert not fleet.violations
