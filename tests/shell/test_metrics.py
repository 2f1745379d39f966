"""The operator's metrics: Prometheus naming conventions, labels, and what a round sets."""

import re
import time

import pytest
from prometheus_client import REGISTRY
from prometheus_client.parser import text_string_to_metric_families

import kooper
from kooper.core import assignor, ids, model
from kooper.shell import metrics

W = ids.WorkerId
UNIT_SUFFIXES = ("_seconds", "_bytes", "_resources", "_members", "_ratio")
"""Base units (Prometheus: seconds, bytes, ratios) and the count nouns we use."""


def kooper_families():
    from prometheus_client import generate_latest

    text = generate_latest(REGISTRY).decode()
    return [f for f in text_string_to_metric_families(text) if f.name.startswith("kooper_")]


def operator_families():
    return {f.name: f for f in REGISTRY.collect() if f.name.startswith("kooper_")}


def _plans():
    members = {W(f"w-{n}"): model.Member(W(f"w-{n}"), incarnation=f"i{n}") for n in range(3)}
    first = assignor.plan(model.Snapshot(connectors={"A": 5}, members=members),
                          model.PlanState(), now_ms=1_000)
    # w-2 departs; w-1 says it fenced itself; w-0 has not applied generation 1 yet.
    reported = {
        W("w-0"): model.Member(W("w-0"), incarnation="i0", generation=0),
        W("w-1"): model.Member(W("w-1"), owned=first.members[W("w-1")].assigned, generation=1,
                               incarnation="i1", fenced=True),
    }
    snapshot = model.Snapshot(connectors={"A": 5}, members=reported)
    return snapshot, assignor.plan(snapshot, first.state, now_ms=2_000)


def test_every_operator_metric_name_follows_prometheus_conventions():
    snapshot, plan = _plans()
    metrics.observe_round("conv/wg", plan=plan, snapshot=snapshot, compute_s=0.01,
                          now_ms=2_000, revoked=0, imbalance=1)
    metrics.LATENCY.labels("conv/wg").observe(0.2)
    families = operator_families()
    assert len(families) >= 20
    for name, family in families.items():
        samples = {s.name for s in family.samples}
        if family.type == "counter":
            # prometheus_client strips _total from the family; the series keep it.
            assert f"{name}_total" in samples or not samples, name
        elif family.type == "histogram":
            assert name.endswith("_seconds"), name
        elif family.type == "info" or name.endswith("_info"):
            assert all(s.value == 1 for s in family.samples), name
        else:
            assert family.type == "gauge", name
            assert name.endswith(UNIT_SUFFIXES) or name in metrics.UNITLESS, name
            assert not name.endswith("_total"), name
        for sample in family.samples:
            assert "group" not in sample.labels, name


def test_exposed_text_has_total_on_every_counter_and_no_packed_group_label():
    for family in kooper_families():
        for sample in family.samples:
            if family.type == "counter" and not sample.name.endswith("_created"):
                assert sample.name.endswith("_total"), sample.name
            if "workergroup" in sample.labels:
                assert "/" not in sample.labels["workergroup"]
                assert sample.labels["namespace"]


def test_build_info_carries_the_version():
    assert REGISTRY.get_sample_value(
        "kooper_build_info", {"version": kooper.__version__,
                              "python": __import__("platform").python_version()}) == 1


def test_a_round_sets_namespace_and_workergroup_labels_and_every_gauge():
    snapshot, plan = _plans()
    before = time.time()
    metrics.observe_round("team-a/orders", plan=plan, snapshot=snapshot, compute_s=0.01,
                          now_ms=2_000, revoked=2, imbalance=1)
    labels = {"namespace": "team-a", "workergroup": "orders"}

    def get(name, **more):
        return REGISTRY.get_sample_value(name, {**labels, **more})

    assert get("kooper_rounds_total") >= 1
    assert get("kooper_members", protocol="compatible") == 2
    assert get("kooper_fenced_members") == 1
    assert get("kooper_pending_members") >= 1  # w-0 is at generation 0
    assert get("kooper_assigned_resources") == sum(len(m.assigned) for m in plan.members.values())
    assert get("kooper_unassigned_resources") == len(plan.unassigned)
    assert get("kooper_lost_resources") == len(plan.state.lost_resources())
    assert get("kooper_resource_losses_total") == len(plan.newly_lost)
    assert get("kooper_resource_revocations_total") == 2
    assert get("kooper_assignment_generation") == plan.state.generation
    assert get("kooper_imbalance_resources") == 1
    delay = plan.state.delay
    assert delay is not None, "w-2 departed holding work: a rebalance is scheduled"
    assert get("kooper_delay_remaining_seconds") == (delay.deadline_ms - 2_000) / 1000
    deadline = get("kooper_delay_deadline_timestamp_seconds")
    assert deadline == pytest.approx(before + (delay.deadline_ms - 2_000) / 1000, abs=60)
    assert get("kooper_last_round_timestamp_seconds") >= before
    assert get("kooper_unplanned_departure_grace_seconds") == \
        snapshot.settings.max_delay_ms / 1000  # nothing learned: the whole delay


def test_a_groups_counters_exist_at_zero_from_its_first_round():
    # Prometheus' increase() and rate() cannot see a counter's first step when its series
    # is born at 1: the first failed round after healthy ones went uncounted, so
    # KooperRoundFailures (increase over 10m > 3) needed a fifth failure.
    snapshot, plan = _plans()
    metrics.observe_round("fresh/wg", plan=plan, snapshot=snapshot, compute_s=0.01,
                          now_ms=2_000, revoked=0, imbalance=0)
    labels = {"namespace": "fresh", "workergroup": "wg"}
    for name in ("kooper_round_failures_total", "kooper_connector_restarts_total",
                 "kooper_balancing_deferred_resources_total"):
        assert REGISTRY.get_sample_value(name, labels) == 0, name
    for trigger in ("automatic", "manual"):
        assert REGISTRY.get_sample_value("kooper_failed_resource_restarts_total",
                                         {**labels, "trigger": trigger}) == 0, trigger
    metrics.forget_group("fresh/wg")


def test_a_deleted_group_leaves_no_series_behind():
    snapshot, plan = _plans()
    metrics.observe_round("gone/wg", plan=plan, snapshot=snapshot, compute_s=0.01,
                          now_ms=2_000, revoked=0, imbalance=0)
    metrics.ROUND_ERRORS.labels("gone/wg").inc()
    metrics.forget_group("gone/wg")
    left = [s for f in REGISTRY.collect() for s in f.samples
            if s.labels.get("namespace") == "gone"]
    assert left == []


def test_a_replica_that_steps_down_leaves_no_series_of_the_groups_it_led():
    # Only the leader runs rounds: a standby's frozen copy of the gauges (a deadline now
    # past, pending members, unassigned work) would raise the alerts forever.
    import asyncio

    from kooper.shell import controller, settings

    class Runner:
        async def stop(self):
            pass

    shell = controller.Shell(settings.Config(identity="t", leader_election=True))
    shell.leading = True
    shell.runners[("led", "wg")] = Runner()
    snapshot, plan = _plans()
    metrics.observe_round("led/wg", plan=plan, snapshot=snapshot, compute_s=0.01,
                          now_ms=2_000, revoked=1, imbalance=1)
    metrics.observe_failures("led/wg", failed=1, restarts=(("automatic", 1),))
    metrics.observe_pacing("led/wg", deferred=1, pending=1)
    asyncio.run(shell._step_down())
    left = [s.name for f in REGISTRY.collect() for s in f.samples
            if s.labels.get("namespace") == "led"]
    assert left == []


def test_kooper_leader_says_whether_this_replica_runs_the_rounds():
    # With every replica up and none leading, no per-group series exists and no other
    # alert can fire: the replicas have to say whether they lead.
    import asyncio
    import types

    from kooper.shell import controller, settings

    def leader():
        return REGISTRY.get_sample_value("kooper_leader")

    controller.Shell(settings.Config(identity="alone"))
    assert leader() == 1  # without leader election this process always leads
    shell = controller.Shell(settings.Config(identity="t", leader_election=True))
    assert leader() == 0  # a replica starts as a standby
    shell.index_views = types.SimpleNamespace(groups=lambda: [], every_connector=lambda: [])
    shell.context = types.SimpleNamespace(leader_epoch=0)
    asyncio.run(shell._lead())
    assert leader() == 1
    asyncio.run(shell._step_down())
    assert leader() == 0


def test_every_operator_metric_has_its_row_in_the_docs_table(repo_root):
    # docs/operator.md "Metrics": name, type, labels ("group" = namespace, workergroup).
    section = (repo_root / "docs" / "operator.md").read_text().split("\n## Metrics\n")[1]
    section = section.split("\n## ")[0]
    documented = {}
    for name, kind, labels in re.findall(r"^\| `(kooper_\w+)` \| ([^|]+) \| ([^|]*) \|",
                                         section, re.MULTILINE):
        names = re.findall(r"`(\w+)`", labels)
        if "group" in labels.replace("workergroup", ""):
            names = ["namespace", "workergroup", *names]
        documented[name] = (kind.split()[0], tuple(names))
    exported = {}
    for collector in list(REGISTRY._collector_to_names):
        name = getattr(collector, "_name", "")
        if name.startswith("kooper_"):
            kind = collector._type
            exported[f"{name}_total" if kind == "counter" else name] = (
                kind, tuple(collector._labelnames))
    assert exported == documented
