"""The Lease timing budget: one rule, the same in Python and in the WorkerGroup CRD."""

import pytest
from hypothesis import given
from hypothesis import strategies as st
from tests.chart import conftest, crdschema

from kooper.protocol import timing


def test_the_default_budget_fences_at_18_s_and_stops_by_28_s_of_a_30_s_lease():
    budget = timing.Budget.of(30).check()
    assert (budget.renew_interval_s, budget.stop_timeout_s, budget.fence_margin_s) == (10, 10, 2)
    assert budget.fence_after_s == 18
    assert budget.deadline_s == 28
    assert budget.retry_window_s == 8


@pytest.mark.parametrize("lease", [1, 5, 15, 30, 3600])
def test_setting_only_the_lease_always_gives_a_sound_budget(lease):
    assert timing.Budget.of(lease).problems() == []


def test_a_stop_timeout_as_long_as_the_lease_is_refused_with_the_numbers():
    with pytest.raises(timing.TimingBudgetError, match=r"stop timeout 30s .* lease duration 30s"):
        timing.Budget.of(30, stop_timeout_s=30).check()


def test_a_renewal_slower_than_the_fence_is_refused():
    # fence after 15 - 5 - 1 = 9 s, renewing every 10 s: fenced between any two renewals.
    assert timing.Budget.of(15, renew_interval_s=10).problems()


def test_a_zero_or_negative_part_is_refused():
    assert timing.Budget.of(30, fence_margin_s=0).problems() == [
        "fence margin must be positive, got 0"
    ]
    with pytest.raises(ValueError, match="renew interval must be positive"):
        timing.Budget.of(30, renew_interval_s=-1).check()


@pytest.fixture(scope="module")
def workergroup_crd():
    (crd,) = conftest.load_yaml_docs(conftest.CRDS / "workergroups.yaml")
    return crd


OPTIONAL = st.one_of(st.none(), st.integers(1, 40))


@given(lease=st.integers(5, 60), renew=OPTIONAL, stop=OPTIONAL, margin=OPTIONAL)
def test_the_crd_admits_exactly_the_budgets_the_sdk_accepts(
    workergroup_crd, lease, renew, stop, margin
):
    spec = {"selector": {"matchLabels": {"app": "w"}}, "leaseDurationSeconds": lease}
    for key, value in (
        ("renewIntervalSeconds", renew),
        ("stopTimeoutSeconds", stop),
        ("fenceMarginSeconds", margin),
    ):
        if value is not None:
            spec[key] = value
    obj = {"apiVersion": "kooper.dev/v1alpha1", "kind": "WorkerGroup", "spec": spec}
    admitted = crdschema.admit(workergroup_crd, obj)[1] == []
    sound = not timing.Budget.of(
        lease, renew_interval_s=renew, stop_timeout_s=stop, fence_margin_s=margin
    ).problems()
    assert admitted == sound
