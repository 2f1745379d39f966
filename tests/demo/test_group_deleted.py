"""A WorkerGroup deleted and created again while its workers run (~10 s).

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


def test_a_deleted_group_runs_on_and_a_new_one_takes_it_over_without_a_double_run(tmp_path):
    with formed.group(tmp_path, SETTINGS, run="wg") as (embedded, runner):
        api, ns = embedded.api, embedded.namespace
        before = running(runner)
        body = embedded.get("workergroups", "demo")
        api.delete("workergroups", "demo", namespace=ns)
        cluster.wait_for(lambda: not api.list("configmaps", namespace=ns), timeout_s=30,
                         what="the group's ConfigMaps to go with it")
        assert running(runner) == before
        for key in ("resourceVersion", "uid", "creationTimestamp", "generation",
                    "managedFields", "finalizers"):
            body["metadata"].pop(key, None)
        body.pop("status", None)
        api.create("workergroups", body, namespace=ns)
        cluster.wait_for(lambda: len(api.list("configmaps", namespace=ns)) == SETTINGS.pods,
                         timeout_s=30, what="the new group's ConfigMaps")
        drill.wait_converged(runner, embedded, expected=SETTINGS.resources, settle_s=1.0,
                             timeout_s=60)
    rows = recorder.collect(worker_files=runner.events_files(), audit_file=None,
                            run="wg", group="demo", protocol="compatible", policy="kooper")
    assert metrics.run_metrics(rows).overlaps == 0
