"""Work running outside a group's pods: nothing of it starts in the group (~40 s).

Resource names are unique in a namespace, not in a WorkerGroup. A Connector moved to
another group, or a pod relabelled out of its group's selector, leaves work running
on a pod the group's operator does not count as a member; found with these probes,
both ran tasks on two pods (docs/operator.md, "Work running outside the group").
"""

import time

from tests.demo import formed

from kooper.demo import cluster, drill, pods, recorder
from kooper.sim import metrics

# Stops take 1.5 s: long enough for a second start to show as a double run.
SETTINGS = drill.Settings(pods=2, connectors=(("orders-source", 3),), max_delay_s=0,
                          lease_s=5, start_ms=100, stop_ms=1500)


def running(*runners):
    rows = sorted((row for runner in runners for row in drill._worker_rows(runner)),
                  key=lambda row: (row.ts_ms, row.event == "start"))
    return {key[1]: members for key, members in
            metrics.running(rows, at_ms=drill.now_ms()).items() if members}


def overlaps(run, *runners):
    rows = recorder.collect(worker_files=[f for r in runners for f in r.events_files()],
                            audit_file=None, run=run, group="demo", protocol="compatible",
                            policy="kooper")
    return metrics.run_metrics(rows).overlaps


def more_pods(embedded, workdir, name, *, run):
    """A second StatefulSet's two pods (``<name>-0``, ``<name>-1``, labelled
    ``<name>-worker``), not started yet."""
    workdir.mkdir()
    return pods.PodRunner(embedded.api, workdir=workdir, replicas=2, set_name=name,
                          app_label=f"{name}-worker",
                          worker_args=drill.worker_args(SETTINGS, run=run))


def conditions(embedded, group):
    status = (embedded.get("workergroups", group) or {}).get("status") or {}
    return {c["type"]: c for c in status.get("conditions", [])}


def test_a_connector_moved_to_another_group_starts_there_once_it_stopped_here(tmp_path):
    with formed.group(tmp_path / "a", SETTINGS, run="moved") as (embedded, runner):
        other = more_pods(embedded, tmp_path / "b", "others", run="moved")
        try:
            spec = {**embedded.get("workergroups", "demo")["spec"],
                    "selector": {"matchLabels": {pods.WORKER_LABEL: other.app_label}}}
            embedded.create("workergroups", {"apiVersion": "kooper.dev/v1alpha1",
                                             "kind": "WorkerGroup",
                                             "metadata": {"name": "other"}, "spec": spec})
            other.start_all()
            cluster.wait_for(lambda: all(other.has_joined(p) for p in other.pods.values()),
                             timeout_s=30, what="the other group's workers to join")
            embedded.api.patch("connectors", "orders-source",
                               {"spec": {"workerGroup": "other"}}, namespace=embedded.namespace)

            def moved():
                now = running(runner, other)
                return len(now) == SETTINGS.resources and all(
                    len(m) == 1 and next(iter(m)).startswith("others-") for m in now.values())

            cluster.wait_for(moved, timeout_s=60, what="the connector to run in the other group")
        finally:
            other.shutdown()
    assert overlaps("moved", runner, other) == 0


def test_a_pod_relabelled_out_of_its_group_keeps_its_work_while_its_worker_runs(tmp_path):
    with formed.group(tmp_path, SETTINGS, run="relabelled") as (embedded, runner):
        before = running(runner)
        embedded.api.patch("pods", "workers-1",
                           {"metadata": {"labels": {pods.WORKER_LABEL: "elsewhere"}}},
                           namespace=embedded.namespace)
        cluster.wait_for(lambda: "MemberOutsideSelector" in str(conditions(embedded, "demo")),
                         timeout_s=30, what="the status to name the pod outside the selector")
        # Past the fence budget (lease 5 s + skew 1 s) the old rule handed the work out.
        time.sleep(1.5 * (SETTINGS.lease_s + SETTINGS.clock_skew_s))
        assert running(runner) == before
        # Stopping the pod moves its work: the worker says it left, owning nothing.
        runner.stop_pod(1)
        drill.wait_converged(runner, embedded, expected=SETTINGS.resources, settle_s=0.5,
                             timeout_s=60)
        assert set().union(*running(runner).values()) == {"workers-0"}
    assert overlaps("relabelled", runner) == 0


def test_a_second_group_whose_selector_matches_the_first_ones_pods_leaves_them_to_it(tmp_path):
    """Both would hand a pod their own work through its one ConfigMap. Found: the second
    group stayed ``RevokingForBalance`` and nothing said why."""
    with formed.group(tmp_path, SETTINGS, run="overlap") as (embedded, runner):
        before = running(runner)
        spec = dict(embedded.get("workergroups", "demo")["spec"])
        embedded.create("workergroups", {"apiVersion": "kooper.dev/v1alpha1",
                                         "kind": "WorkerGroup",
                                         "metadata": {"name": "second"}, "spec": spec})
        embedded.create("connectors", {
            "apiVersion": "kooper.dev/v1alpha1", "kind": "Connector",
            "metadata": {"name": "payments"},
            "spec": {"workerGroup": "second", "tasksMax": 2, "config": {"type": "counter"}}})
        cluster.wait_for(
            lambda: conditions(embedded, "second").get("Degraded", {}).get("reason")
            == "SelectorOverlap", timeout_s=30, what="the second group to say why")
        assert "WorkerGroup demo" in conditions(embedded, "second")["Degraded"]["message"]
        assert conditions(embedded, "demo")["Ready"]["status"] == "True"
        assert running(runner) == before
    assert overlaps("overlap", runner) == 0


def test_a_selector_switched_to_new_pods_moves_the_work_as_the_old_pods_stop(tmp_path):
    """Blue/green: ``spec.selector`` now names the green pods. The blue ones keep their
    work while they run (they give up what balance asks of them, which green takes), and
    it all moves once they are stopped."""
    with formed.group(tmp_path / "a", SETTINGS, run="switch") as (embedded, blue):
        green = more_pods(embedded, tmp_path / "b", "green", run="switch")
        try:
            green.start_all()
            embedded.api.patch("workergroups", "demo", {"spec": {"selector": {
                "matchLabels": {pods.WORKER_LABEL: green.app_label}}}},
                namespace=embedded.namespace)

            def on(prefix):
                now = running(blue, green)
                return len(now) == SETTINGS.resources and all(len(m) == 1 for m in now.values()) \
                    and any(next(iter(m)).startswith(prefix) for m in now.values())

            cluster.wait_for(lambda: on("green-"), timeout_s=60,
                             what="green to take what blue gave up")
            assert on("workers-")  # blue still runs the rest
            blue.stop_pod(1)
            blue.stop_pod(0)
            cluster.wait_for(lambda: on("green-") and not on("workers-"), timeout_s=60,
                             what="everything to run on green")
        finally:
            green.shutdown()
    assert overlaps("switch", blue, green) == 0
