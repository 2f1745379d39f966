"""A member's Lease deleted by someone else while its worker runs (~15 s).

An admin's ``kubectl delete lease``, a cleanup script: the worker does not know and
runs on; its next renewal creates the Lease again. A Lease gone while its pod is there
proves nothing by itself, so the operator must not hand the member's work to anyone
meanwhile: nothing may run on two pods.
"""

import threading
import time

from tests.demo import formed

from kooper.demo import cluster, drill, recorder
from kooper.sim import metrics

SETTINGS = drill.Settings(pods=2, connectors=(("orders-source", 2),), max_delay_s=0,
                          lease_s=6, start_ms=100, stop_ms=200)


def test_a_deleted_lease_of_a_running_worker_moves_none_of_its_work(tmp_path):
    with formed.group(tmp_path, SETTINGS, run="lease") as (embedded, runner):
        name = "kooper-workers-1"
        assert embedded.get("leases", name) is not None
        # The worker renews every lease_s / 3 s and then creates the Lease again. A
        # renewal right after the deletion would leave the operator no round without
        # the Lease (its debounce is 50 ms): delete again until one gap lasts 0.5 s.
        for _ in range(5):
            deleted = time.monotonic()
            embedded.api.delete("leases", name, namespace=embedded.namespace)
            cluster.wait_for(lambda: embedded.get("leases", name) is not None,
                             timeout_s=30, what="the worker to create its Lease again")
            if time.monotonic() - deleted >= 0.5:
                break
        else:
            raise AssertionError("the worker recreated its Lease within 0.5 s 5 times")
        drill.wait_converged(runner, embedded, expected=SETTINGS.resources, settle_s=0.5,
                             timeout_s=60)
    # The workers' own rows alone: the operator's audit log says when it thought a
    # member left, which is what is being tested.
    rows = recorder.collect(worker_files=runner.events_files(), audit_file=None,
                            run="lease", group="demo", protocol="compatible", policy="kooper")
    assert metrics.run_metrics(rows).overlaps == 0


LEAVING = drill.Settings(pods=2, connectors=(("orders-source", 2),), max_delay_s=0,
                         lease_s=6, start_ms=100, stop_ms=1500)


def test_a_deleted_lease_of_a_worker_still_stopping_moves_none_of_its_work(tmp_path):
    # The pod is terminating and its worker takes 1.5 s to stop each task (a flush and
    # commit). Someone deletes its Lease meanwhile: the pod stopping proves nothing
    # about the process, which still runs what it held until its own last report.
    with formed.group(tmp_path, LEAVING, run="leaving") as (embedded, runner):
        name = "kooper-workers-1"
        stopping = threading.Thread(target=runner.stop_pod, args=(1,))
        stopping.start()
        cluster.wait_for(
            lambda: (embedded.get("pods", "workers-1") or {}).get("metadata", {}).get(
                "deletionTimestamp"), timeout_s=10, what="workers-1 to be terminating")
        embedded.api.delete("leases", name, namespace=embedded.namespace)
        stopping.join(timeout=60)
        assert not stopping.is_alive()
        drill.wait_converged(runner, embedded, expected=LEAVING.resources, settle_s=0.5,
                             timeout_s=60)
    rows = recorder.collect(worker_files=runner.events_files(), audit_file=None,
                            run="leaving", group="demo", protocol="compatible", policy="kooper")
    assert metrics.run_metrics(rows).overlaps == 0
