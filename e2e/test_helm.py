"""The chart through the real ``helm`` on kind, while a group runs: lint, an operator
upgrade (a values change that rolls the operator Deployment), uninstall and install
again. The operator is the group's leader, not a member: none of this may stop, move
or double-run any work. ``helm uninstall`` leaves the CRDs (``crds.keep``), so the
WorkerGroup and Connectors outlive the release; the workers' ServiceAccount and Role do
not (they are the chart's), so their tokens die with it, they fence, and after the
install they need a restart to get tokens of the new ServiceAccount (docs/install.md).
"""

from __future__ import annotations

import json

import pytest

from e2e import conftest, demo, invariants, kind, tools

pytestmark = [pytest.mark.e2e, pytest.mark.kind_tier, pytest.mark.timeout(1800)]


def assert_nothing_moved(rows, expected):
    assert invariants.overlaps(rows) == [], "a resource ran on two members at once"
    assert invariants.not_running(rows, expected) == []
    stops = [r for r in rows if r.event is invariants.Kind.STOP]
    assert stops == [], f"the operator's release changed and work stopped: {stops[:5]}"


def test_helm_lint_passes_on_the_chart(kube):
    out = kube.helm("lint", str(conftest.ROOT / "charts" / "kooper"), "--strict")
    assert "0 chart(s) failed" in out


def test_an_operator_upgrade_while_the_group_runs_moves_nothing(kube, group):
    group.baseline()
    before = group.operator_pods()
    with group.record("helm-upgrade") as rec:
        kind.install_chart(kube, "--set", "operator.podAnnotations.kooper\\.dev/drill=upgrade")
        tools.wait_for("the operator pods replaced",
                       lambda: group.operator_pods().isdisjoint(before), timeout_s=300)
        group.wait_balanced(demo.REPLICAS)
    history = json.loads(kube.helm("history", "kooper", "-n", conftest.NAMESPACE, "-o", "json"))
    assert history[-1]["status"] == "deployed"
    assert len(history) >= 2
    assert_nothing_moved(rec.rows, group.expected())


def test_uninstall_keeps_the_crds_and_the_group_and_a_reinstall_brings_it_back(kube, group):
    group.baseline()
    expected = group.expected()
    with group.record("helm-reinstall") as rec:
        kube.helm("uninstall", "kooper", "-n", conftest.NAMESPACE, "--wait")
        crds = kube.kubectl("get", "crd", "-o", "name")
        assert "workergroups.kooper.dev" in crds
        assert "connectors.kooper.dev" in crds
        assert group.json("workergroup", demo.GROUP)["metadata"]["name"] == demo.GROUP
        assert group.expected() == expected
        tools.wait_for("the operator pods gone", lambda: not group.operator_pods(), timeout_s=120)
        kind.install_chart(kube)
        group.k("rollout", "restart", f"statefulset/{demo.STATEFULSET}")
        group.rollout_status()
        group.wait_balanced(demo.REPLICAS)
    assert invariants.overlaps(rec.rows) == [], "a resource ran on two members at once"
    assert invariants.not_running(rec.rows, expected) == []
