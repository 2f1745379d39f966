"""Issue 22, the control plane itself under chaos: kube-apiserver, then etcd, SIGKILLed in
the middle of a departure round and restarted, on the real local control plane.

Two ``kooper run --leader-election`` replicas and four demo workers (e2e/leaders.py).
A worker is SIGKILLed; at a drawn point of the leader's round the cluster's
kube-apiserver (``api-restart``) or etcd (``etcd-restart``) is SIGKILLed, kept down
for a drawn time and restarted with the same ports and data (the host does it,
``kooper.controlplane.host``). Seed 20 draws: the API server down 20 s once the leader
logged the round (longer than the leader Lease, 15 s, and the members' Lease, 5 s),
then etcd down 8 s right after the kill. The invariants come from the workers' own
rows (e2e/chaos_log.py); the fault is checked to have struck (the pids changed, a
read of the API failed during the outage, the workers logged failed renewals).

The same faults, with more runs and mixed with the other families:
``benchmarks/bench_chaos_real.py --control --restarts`` (docs/benchmarks.md). Not
covered by seed 20: an 8 s API server outage, which left both replicas' kopf stopped (a
503 while the restarted server installed its paths escalated past kopf's backoffs) and
every resource stopped; kopf's backoffs now never run out (``shell.settings.RetryForever``;
the last test here).
"""

from __future__ import annotations

import pytest
from e2e import chaos_real, leaders

pytestmark = [pytest.mark.chaos_real, pytest.mark.realk8s, pytest.mark.timeout(600)]

SEED = 20
LEADER_LEASE_S = 15


@pytest.fixture(scope="module")
def report(cluster, tmp_path_factory) -> chaos_real.Report:
    faults = [(fault, ordinal) for ordinal, fault in enumerate(leaders.RESTART_FAULTS)]
    return leaders.run_scenario(chaos_real.Settings(), tmp_path_factory.mktemp("restart"),
                                faults, cluster=cluster, seed=SEED)


def test_both_processes_were_killed_and_restarted(report):
    assert [s.fault.split("@")[0] for s in report.steps] == list(leaders.RESTART_FAULTS)
    for step in report.steps:
        old, new = step.pids
        assert old > 0, (step.fault, step.pids)
        assert new not in (0, old), (step.fault, step.pids)


def test_one_outage_outlasted_the_leader_lease(report):
    assert max(s.down_s for s in report.steps) > LEADER_LEASE_S, [
        (s.fault, s.down_s) for s in report.steps]


def test_the_clients_met_the_outage(report):
    # A read of the API right after each kill failed (refused while the API server is
    # down, timed out while etcd is); with the API server down, every worker's Lease
    # renewal is refused, and the workers logged it. (Down etcd, the API server holds
    # their requests instead: the workers fence by the clock, logging no error.)
    assert all(s.outage for s in report.steps), [(s.fault, s.outage) for s in report.steps]
    api = next(s for s in report.steps if s.fault.startswith("api-restart@"))
    assert api.worker_errors > 0, (api.fault, api.down_s, api.worker_errors)


def test_the_group_healed_in_time(report):
    assert report.late == [], report.describe()


def test_no_resource_ran_on_two_workers_at_once(report):
    assert report.overlaps == [], report.describe()


def test_nothing_is_lost_and_epochs_and_generations_only_grow(report):
    assert (report.lost, report.unexpected) == ([], []), report.describe()
    assert report.epoch_regressions == [], report.describe()
    assert report.generation_regressions == [], report.describe()


@pytest.fixture(scope="module")
def short_outage(cluster, tmp_path_factory) -> chaos_real.Report:
    # The API server down 8 s before the leader's departure round: it comes back while
    # kopf's watches retry, and answers 503 for a moment while it installs its paths.
    return leaders.run_scenario(chaos_real.Settings(), tmp_path_factory.mktemp("short"),
                                [("api-restart", 1)], cluster=cluster, seed=SEED,
                                rng=leaders.Drawn(["before-round", 8.0]))


def test_a_short_api_server_outage_leaves_the_operator_working(short_outage):
    """Before ``RetryForever`` the first run of this scenario left both replicas' kopf
    stopped, their processes up, and all the work stopped: the run timed out waiting
    for a leader and the test failed."""
    (step,) = short_outage.steps
    assert step.down_s == 8.0
    assert step.outage
    assert short_outage.late == [], short_outage.describe()
    assert (short_outage.lost, short_outage.overlaps) == ([], []), short_outage.describe()
