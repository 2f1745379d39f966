"""A WorkerGroup deleted and created again while its workers run (~10 s each).

Deleting it stops the management, not the work: its ConfigMaps go with it and every
worker runs on what its last document gave it. Created again, the group starts from
the members' reports, and nothing runs on two pods (docs/operator.md).
"""

from tests.demo import formed

from kooper.demo import cluster, drill, recorder
from kooper.sim import metrics

SETTINGS = drill.Settings(pods=2, connectors=(("orders-source", 3),), max_delay_s=0,
                          lease_s=6, start_ms=100, stop_ms=200)


def running(runner):
    rows = drill._worker_rows(runner)
    return {key: members for key, members in
            metrics.running(rows, at_ms=drill.now_ms()).items() if members}


def _recreate(embedded, body, *, while_gone=lambda: True):
    """Delete the group, wait for its ConfigMaps to go (``while_gone`` must hold then),
    and create ``body`` again under its name."""
    api, ns = embedded.api, embedded.namespace
    api.delete("workergroups", "demo", namespace=ns)
    cluster.wait_for(lambda: not api.list("configmaps", namespace=ns), timeout_s=30,
                     what="the group's ConfigMaps to go with it")
    assert while_gone()
    for key in ("resourceVersion", "uid", "creationTimestamp", "generation",
                "managedFields", "finalizers"):
        body["metadata"].pop(key, None)
    body.pop("status", None)
    api.create("workergroups", body, namespace=ns)


def test_a_deleted_group_runs_on_and_a_new_one_takes_it_over_without_a_double_run(tmp_path):
    with formed.group(tmp_path, SETTINGS, run="wg") as (embedded, runner):
        api, ns = embedded.api, embedded.namespace
        before = running(runner)
        _recreate(embedded, embedded.get("workergroups", "demo"),
                  while_gone=lambda: running(runner) == before)
        cluster.wait_for(lambda: len(api.list("configmaps", namespace=ns)) == SETTINGS.pods,
                         timeout_s=30, what="the new group's ConfigMaps")
        drill.wait_converged(runner, embedded, expected=SETTINGS.resources, settle_s=1.0,
                             timeout_s=60)
    rows = recorder.collect(worker_files=runner.events_files(), audit_file=None,
                            run="wg", group="demo", protocol="compatible", policy="kooper")
    assert metrics.run_metrics(rows).overlaps == 0


def test_a_group_created_again_plans_generations_newer_than_its_members_hold(tmp_path):
    """The old group reached generation 5; the new one starts with no status and no
    ConfigMaps. Its documents started again at generation 1, and every worker ignored
    them (a worker applies only a generation newer than any it accepted): a connector
    scaled up after the re-creation did not start its new tasks until the new group's
    generation passed the old one's (in the probe, 4 of 7 resources ran after 20 s)."""
    with formed.group(tmp_path, SETTINGS, run="wg") as (embedded, runner):
        api, ns = embedded.api, embedded.namespace

        def scale(tasks):
            api.patch("connectors", "orders-source", {"spec": {"tasksMax": tasks}},
                      namespace=ns)

        for tasks in (5, 3, 5, 3):
            scale(tasks)
            drill.wait_converged(runner, embedded, expected=1 + tasks, settle_s=0.5,
                                 timeout_s=60)
        body = embedded.get("workergroups", "demo")
        old = body["status"]["rebalanceGeneration"]
        assert old >= 4
        _recreate(embedded, body)
        cluster.wait_for(lambda: len(api.list("configmaps", namespace=ns)) == SETTINGS.pods,
                         timeout_s=30, what="the new group's ConfigMaps")
        scale(6)
        drill.wait_converged(runner, embedded, expected=7, settle_s=1.0, timeout_s=60)
        new = embedded.get("workergroups", "demo")["status"]["rebalanceGeneration"]
        assert new > old
    rows = recorder.collect(worker_files=runner.events_files(), audit_file=None,
                            run="wg", group="demo", protocol="compatible", policy="kooper")
    assert metrics.run_metrics(rows).overlaps == 0
