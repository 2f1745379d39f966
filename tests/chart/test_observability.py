"""The chart's alerts and dashboard: off by default, checked by Prometheus' own promtool.

promtool is fetched once into a cache outside the repository by
``hack/promtool/build.sh`` (Debian's prometheus package, or Prometheus' Go module at
a pinned version where no package can be had; ``make`` runs it before the tests).
``check rules`` parses every alert, and every dashboard query wrapped in a recording
rule, with the real PromQL parser; ``test rules`` evaluates the alerts on synthetic
series: each fires on its condition and stays quiet when the group is healthy.
"""

from __future__ import annotations

import json
import pathlib
import re
import subprocess

import pytest
import yaml
from prometheus_client import REGISTRY
from tests.chart import conftest

from kooper.sdk import metrics as sdk_metrics
from kooper.shell import metrics as operator_metrics

ENABLED = {"metrics": {"prometheusRule": {"enabled": True, "alertLabels": {"team": "ops"}},
                       "dashboard": {"enabled": True}}}
ALERTS = {"KooperUnassignedWork", "KooperRebalanceStuck", "KooperScheduledRebalanceOverdue",
          "KooperMembersFenced", "KooperRoundFailures", "KooperOperatorAbsent",
          "KooperConnectorsRejected", "KooperResourcesFailed", "KooperWorkerFenced",
          "KooperNoLeader"}
METRIC = re.compile(r"\bkooper_[a-z0-9_]+\b")


@pytest.fixture(scope="module")
def promtool() -> pathlib.Path:
    # The script is the one place that knows where promtool lives.
    found = subprocess.run(["bash", str(conftest.ROOT / "hack" / "promtool" / "build.sh"),
                            "--check"], capture_output=True, text=True, check=False)
    if found.returncode != 0:
        pytest.fail(found.stderr.strip(), pytrace=False)
    return pathlib.Path(found.stdout.strip())


def run(promtool, *args, cwd):
    done = subprocess.run([str(promtool), *args], cwd=cwd, capture_output=True, text=True,
                          timeout=120, check=False)
    return done.returncode, done.stdout + done.stderr


@pytest.fixture(scope="module")
def rendered(render):
    return render(ENABLED)


@pytest.fixture(scope="module")
def rule_groups(rendered):
    (rule,) = conftest.find(rendered, "PrometheusRule")
    return rule["spec"]["groups"]


@pytest.fixture(scope="module")
def dashboard(rendered):
    (configmap,) = [o for o in conftest.find(rendered, "ConfigMap")
                    if o["metadata"]["name"].endswith("-dashboard")]
    return configmap, json.loads(configmap["data"]["kooper.json"])


def dashboard_queries(board):
    queries = [t["expr"] for p in board["panels"] for t in p.get("targets", [])]
    queries += [v["definition"] for v in board["templating"]["list"] if v["type"] == "query"]
    return queries


def as_promql(query):
    """A Grafana query as plain PromQL: variables replaced by what Grafana sends."""
    label_values = re.fullmatch(r"label_values\((.+), *[a-z_]+\)", query)
    if label_values:
        query = label_values.group(1)
    return (query.replace("$__rate_interval", "5m").replace('"$namespace"', '".*"')
            .replace('"$workergroup"', '".*"'))


def exported_names():
    """Every series name the operator and the worker SDK can export."""
    families = [(f.name, f.type) for f in REGISTRY.collect() if f.name.startswith("kooper_")]
    families += [(f.name, f.kind) for f in sdk_metrics.WorkerMetrics().families()]
    names = set()
    for name, kind in families:
        if kind == "counter":
            names.add(name if name.endswith("_total") else f"{name}_total")
        elif kind == "histogram":
            names.update(f"{name}_{suffix}" for suffix in ("bucket", "sum", "count"))
        else:
            names.add(name)
    return names


def test_alerts_and_dashboard_are_off_by_default(render):
    kinds = {o["kind"] for o in conftest.objects(render())}
    assert "PrometheusRule" not in kinds
    assert not [o for o in conftest.find(render(), "ConfigMap")
                if o["metadata"]["name"].endswith("-dashboard")]


def test_the_rule_holds_the_ten_alerts_with_severity_and_extra_labels(rule_groups):
    rules = [r for group in rule_groups for r in group["rules"]]
    assert {r["alert"] for r in rules} == ALERTS
    for rule in rules:
        assert rule["labels"] == {"severity": "warning", "team": "ops"}
        assert rule["annotations"]["summary"]
        assert rule["annotations"]["description"]


def test_promtool_check_rules_accepts_the_rendered_alerts(promtool, rule_groups, tmp_path):
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump({"groups": rule_groups}))
    code, output = run(promtool, "check", "rules", "rules.yaml", cwd=tmp_path)
    assert code == 0, output
    assert "SUCCESS: 10 rules found" in output


def test_promtool_rejects_a_broken_expression(promtool, rule_groups, tmp_path):
    # The check above is a real parser: the same file with one typo fails.
    broken = json.loads(json.dumps(rule_groups))
    broken[0]["rules"][0]["expr"] = "kooper_unassigned_resources > > 0"
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump({"groups": broken}))
    code, output = run(promtool, "check", "rules", "rules.yaml", cwd=tmp_path)
    assert code != 0
    assert "parse error" in output


def _series(name, values, **labels):
    labels = {"namespace": "team-a", "workergroup": "orders", **labels}
    text = ", ".join(f'{key}="{value}"' for key, value in sorted(labels.items()))
    return {"series": f"{name}{{{text}}}", "values": values}


def _firing(name, summary, *, at, **about):
    """A promtool expectation: ``name`` fires at ``at`` with ``summary``, labelled for
    WorkerGroup team-a/orders unless ``about`` names other labels (a group, a pod)."""
    labels = {"severity": "warning", "team": "ops", "namespace": "team-a",
              **(about or {"workergroup": "orders"})}
    return {"eval_time": at, "alertname": name,
            "exp_alerts": [{"exp_labels": labels, "exp_annotations": {"summary": summary}}]}


def test_each_alert_fires_on_its_condition_and_not_when_healthy(promtool, rule_groups,
                                                                tmp_path):
    # promtool compares annotations exactly: keep the descriptions out of the unit test.
    groups = json.loads(json.dumps(rule_groups))
    for rule in groups[0]["rules"]:
        del rule["annotations"]["description"]
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump({"groups": groups}))
    where = "WorkerGroup team-a/orders"
    sick = {
        "interval": "1m",
        "input_series": [
            # 3 resources run nowhere, no rebalance scheduled.
            _series("kooper_unassigned_resources", "3x40"),
            _series("kooper_delay_deadline_timestamp_seconds", "0x40"),
            _series("kooper_pending_members", "2x40"),
            _series("kooper_fenced_members", "1x40"),
            _series("kooper_round_failures_total", "0+1x40"),  # one failure a minute
            # Another group's scheduled rebalance was due at t=60s and never ran.
            _series("kooper_delay_deadline_timestamp_seconds", "60x40", workergroup="late"),
            _series("kooper_unassigned_resources", "4x40", workergroup="late"),
            # A third group: a connector (its instance and 2 tasks) too large for any
            # member's ConfigMap is left out of the plan, so not counted as unassigned.
            _series("kooper_rejected_resources", "3x40", workergroup="big"),
            _series("kooper_unassigned_resources", "0x40", workergroup="big"),
            _series("kooper_delay_deadline_timestamp_seconds", "0x40", workergroup="big"),
            # 2 tasks failed on their member (restarts exhausted): assigned, so no other
            # alert sees them.
            _series("kooper_failed_resources", "2x40"),
            # A worker that cannot reach the API server fences itself; its Lease expires
            # with it, so the operator counts it departed (kooper_fenced_members counts
            # only live members: 0). Only the worker's own metric, scraped by a PodMonitor
            # (namespace and pod labels), still says so.
            {"series": 'kooper_worker_fenced{namespace="team-a", pod="w-1"}',
             "values": "0x2 1x40"},
            {"series": 'kooper_worker_fenced{namespace="team-a", pod="w-0"}',
             "values": "0x40"},
        ],
        "alert_rule_test": [
            _firing("KooperUnassignedWork", f"{where}: 3 resources run nowhere", at="15m"),
            _firing("KooperRebalanceStuck",
                    f"{where}: 2 members have not applied their assignment", at="15m"),
            _firing("KooperMembersFenced", f"{where}: 1 members fenced themselves", at="15m"),
            _firing("KooperRoundFailures", f"{where}: 10 rounds failed in 10 minutes",
                    at="30m"),
            _firing("KooperScheduledRebalanceOverdue", "WorkerGroup team-a/late: the "
                    "scheduled rebalance is 9m 0s overdue", at="10m", workergroup="late"),
            _firing("KooperConnectorsRejected", "WorkerGroup team-a/big: 3 resources of "
                    "rejected connectors run nowhere", at="15m", workergroup="big"),
            _firing("KooperResourcesFailed", f"{where}: 2 connector instances or tasks "
                    "failed", at="20m"),
            _firing("KooperWorkerFenced", "Worker team-a/w-1 fenced itself: it runs nothing",
                    at="15m", pod="w-1"),
            # Not yet: each condition has to hold for its `for`.
            {"eval_time": "5m", "alertname": "KooperUnassignedWork", "exp_alerts": []},
        ],
    }
    healthy = {
        "interval": "1m",
        "input_series": [
            _series("kooper_build_info", "1x40", version="1.0.0", python="3.12.0"),
            # Two replicas: one leads, the other stands by.
            {"series": 'kooper_leader{pod="kooper-a"}', "values": "1x40"},
            {"series": 'kooper_leader{pod="kooper-b"}', "values": "0x40"},
            _series("kooper_unassigned_resources", "0x40"),
            _series("kooper_pending_members", "0x40"),
            _series("kooper_fenced_members", "0x40"),
            _series("kooper_rejected_resources", "0x40"),
            _series("kooper_failed_resources", "0x40"),
            {"series": 'kooper_worker_fenced{namespace="team-a", pod="w-0"}',
             "values": "0x40"},
            _series("kooper_round_failures_total", "5x40"),  # old failures, none new
            # Lost work waits for a rebalance due far in the future: no alert either.
            _series("kooper_unassigned_resources", "2x40", workergroup="waiting"),
            _series("kooper_delay_deadline_timestamp_seconds", "100000x40",
                    workergroup="waiting"),
        ],
        "alert_rule_test": [
            {"eval_time": "30m", "alertname": name, "exp_alerts": []} for name in sorted(ALERTS)
        ],
    }
    # The operator gone (every replica down, or never scraped): every per-group series goes
    # stale with it, so only an alert on the operator's absence can say so.
    gone = {
        "interval": "1m",
        "input_series": [_series("kooper_build_info", "1x5 stale", version="1.0.0",
                                 python="3.12.0")],
        "alert_rule_test": [
            {"eval_time": "30m", "alertname": "KooperOperatorAbsent",
             "exp_alerts": [{"exp_labels": {"severity": "warning", "team": "ops"},
                             "exp_annotations": {"summary": "No kooper operator replica "
                                                            "is scraped"}}]},
            {"eval_time": "30m", "alertname": "KooperScheduledRebalanceOverdue",
             "exp_alerts": []},
        ],
    }
    # Both replicas up, neither leading (say, neither can write the leader Lease): no
    # round runs and no per-group series exists.
    leaderless = {
        "interval": "1m",
        "input_series": [
            _series("kooper_build_info", "1x40", version="1.0.0", python="3.12.0"),
            {"series": 'kooper_leader{pod="kooper-a"}', "values": "1x2 0x40"},
            {"series": 'kooper_leader{pod="kooper-b"}', "values": "0x40"},
        ],
        "alert_rule_test": [
            {"eval_time": "20m", "alertname": "KooperNoLeader",
             "exp_alerts": [{"exp_labels": {"severity": "warning", "team": "ops"},
                             "exp_annotations": {"summary": "No kooper operator replica "
                                                            "leads: no group rebalances"}}]},
            {"eval_time": "20m", "alertname": "KooperOperatorAbsent", "exp_alerts": []},
        ],
    }
    tests = {"rule_files": ["rules.yaml"], "evaluation_interval": "1m",
             "tests": [sick, healthy, gone, leaderless]}
    (tmp_path / "tests.yaml").write_text(yaml.safe_dump(tests, sort_keys=False))
    code, output = run(promtool, "test", "rules", "tests.yaml", cwd=tmp_path)
    assert code == 0, output


def test_every_dashboard_query_parses_with_promtool(promtool, dashboard, tmp_path):
    _, board = dashboard
    queries = dashboard_queries(board)
    assert len(queries) >= 20
    rules = [{"record": f"dashboard:query_{n}:check", "expr": as_promql(query)}
             for n, query in enumerate(queries)]
    (tmp_path / "queries.yaml").write_text(
        yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}))
    code, output = run(promtool, "check", "rules", "queries.yaml", cwd=tmp_path)
    assert code == 0, output


def test_every_metric_in_the_alerts_and_dashboard_is_exported(rule_groups, dashboard):
    _, board = dashboard
    used = {name for group in rule_groups for rule in group["rules"]
            for name in METRIC.findall(rule["expr"])}
    used |= {name for query in dashboard_queries(board) for name in METRIC.findall(query)}
    assert operator_metrics.UNITLESS  # the registry is the one the operator serves
    exported = exported_names()
    assert used - exported == set()
    # The dashboard shows both sides: the operator's and the workers' metrics.
    assert {n for n in used if n.startswith("kooper_worker_")}
    assert {"kooper_unassigned_resources", "kooper_pending_members",
            "kooper_fenced_members", "kooper_round_failures_total"} <= used


def test_every_metric_an_alert_is_on_has_a_dashboard_panel(rule_groups, dashboard):
    # Paged on an alert, the dashboard shows what fired and since when.
    _, board = dashboard
    alerted = {name for group in rule_groups for rule in group["rules"]
               for name in METRIC.findall(rule["expr"])} - {"kooper_build_info"}
    shown = {name for query in dashboard_queries(board) for name in METRIC.findall(query)}
    assert alerted - shown == set()


def test_dashboard_configmap_is_labelled_for_the_grafana_sidecar(dashboard):
    configmap, board = dashboard
    assert configmap["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert board["uid"] == "kooper"
    names = [v["name"] for v in board["templating"]["list"]]
    assert names == ["datasource", "namespace", "workergroup"]
    panels = [p for p in board["panels"] if p["type"] != "row"]
    assert all(p["targets"] and p["title"] and p["description"] for p in panels)
    assert all(t["datasource"]["uid"] == "${datasource}" for p in panels for t in p["targets"])
    ids = [p["id"] for p in board["panels"]]
    assert len(ids) == len(set(ids))


def test_service_monitor_keeps_the_workergroup_namespace_label(render):
    (monitor,) = conftest.find(render(conftest.NON_DEFAULT_VALUES), "ServiceMonitor")
    assert monitor["spec"]["endpoints"][0]["honorLabels"] is True
