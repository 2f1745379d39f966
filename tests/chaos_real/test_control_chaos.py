"""Issue 22, the control side under chaos: the leading replica frozen (SIGSTOP) or cut off
from the API at a random point of a departure round, on the real control plane.

Two ``kooper run --leader-election`` replicas and four demo workers (e2e/leaders.py). A
worker is SIGKILLed; shortly after the leader logs that it acts on it (a uniformly drawn
point, before, among or after the round's writes), the leader is frozen, or partitioned
at the fault proxy. It stays so until the standby leads under a newer leader epoch and
the group is whole under it; then it is thawed or healed and must stand down. The
invariants come from the workers' own rows (e2e/chaos_log.py); the fault proxy's record
of the stale leader's writes after the takeover says whether any landed.

The same faults, with more runs and mixed with the worker families:
``benchmarks/bench_chaos_real.py --control`` (docs/benchmarks.md).
"""

from __future__ import annotations

import pytest
from e2e import chaos_real, leaders

pytestmark = [pytest.mark.chaos_real, pytest.mark.realk8s, pytest.mark.timeout(600)]

SEED = 7


@pytest.fixture(scope="module")
def report(cluster, tmp_path_factory) -> chaos_real.Report:
    faults = [(fault, ordinal) for ordinal, fault in enumerate(leaders.CONTROL_FAULTS)]
    return leaders.run_scenario(chaos_real.Settings(), tmp_path_factory.mktemp("control"),
                                faults, cluster=cluster, seed=SEED)


def test_both_control_faults_struck_and_the_group_healed(report):
    assert [s.fault.split("@")[0] for s in report.steps] == list(leaders.CONTROL_FAULTS)
    assert report.late == [], report.describe()


def test_no_resource_ran_on_two_workers_at_once(report):
    assert report.overlaps == [], report.describe()


def test_nothing_is_lost_and_epochs_and_generations_only_grow(report):
    assert (report.lost, report.unexpected) == ([], []), report.describe()
    assert report.epoch_regressions == [], report.describe()
    assert report.generation_regressions == [], report.describe()


def test_no_write_of_the_stale_leader_landed_after_the_takeover(report):
    assert [s.stale_landed for s in report.steps] == [0, 0], [
        (s.fault, s.stale_writes, s.stale_landed) for s in report.steps]
