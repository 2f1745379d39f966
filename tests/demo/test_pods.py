import pathlib
import sys
import time

import pytest

from kooper.demo import cluster, pods, recorder
from kooper.testing import cluster as emulated

FAKE = (sys.executable, str(pathlib.Path(__file__).with_name("fake_worker.py")))


@pytest.fixture
def api():
    with emulated.EmulatedCluster() as running:
        yield running


@pytest.fixture
def runner(api, tmp_path):
    made = pods.PodRunner(api, workdir=tmp_path, replicas=3, command=FAKE, worker_args=(),
                          grace_s=5)
    yield made
    made.shutdown()


def wait_joined(runner):
    for pod in runner.pods.values():
        cluster.wait_for(lambda pod=pod: runner.has_joined(pod), timeout_s=10, what=pod.name)


def test_pods_get_statefulset_names_labels_and_owner(api, runner):
    runner.start_all()
    names = sorted(p["metadata"]["name"] for p in api.list("pods", namespace="default"))
    assert names == ["workers-0", "workers-1", "workers-2"]
    sts = api.get("statefulsets", "workers", namespace="default")
    assert sts["spec"]["replicas"] == 3
    pod = api.get("pods", "workers-1", namespace="default")
    assert pod["metadata"]["labels"][pods.WORKER_LABEL] == "kooper-demo-worker"
    owner = pod["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["name"], owner["uid"]) == (
        "StatefulSet", "workers", sts["metadata"]["uid"])
    wait_joined(runner)
    assert len(api.list("leases", namespace="default")) == 3


def test_stopping_a_pod_removes_its_lease_and_terminates_its_worker(api, runner):
    runner.start_all()
    wait_joined(runner)
    process = runner.pods["workers-2"].process
    runner.stop_pod(2)
    assert process.returncode == 0  # it handled SIGTERM itself
    assert api.get("pods", "workers-2", namespace="default") is None
    cluster.wait_for(lambda: api.get("leases", "kooper-workers-2", namespace="default") is None,
                     timeout_s=5, what="the Lease's garbage collection")
    assert api.get("leases", "kooper-workers-1", namespace="default") is not None


def test_rolling_restart_goes_from_the_highest_ordinal_and_waits_for_each_rejoin(
        api, runner, tmp_path):
    runner.start_all()
    wait_joined(runner)
    old_uids = {name: pod.uid for name, pod in runner.pods.items()}
    order = []
    runner.rolling_restart(restart_s=0.1, joined=runner.has_joined, progress=order.append)
    assert order == ["restarting workers-2", "restarting workers-1", "restarting workers-0"]
    for name, pod in runner.pods.items():
        assert pod.uid != old_uids[name]
        lease = api.get("leases", f"kooper-{name}", namespace="default")
        assert lease["metadata"]["ownerReferences"][0]["uid"] == pod.uid
    runner.shutdown()
    rows = recorder.collect(worker_files=runner.events_files(), audit_file=None, run="r",
                            group="demo", protocol="eager", policy="kooper")
    # Two incarnations per pod, each a start and (on SIGTERM) a stop; the restarted
    # pod's old incarnation stopped before its new one started.
    assert len(rows) == 12
    starts = [r.ts_ms for r in rows if r.member == "workers-0" and r.event == "start"]
    stops = [r.ts_ms for r in rows if r.member == "workers-0" and r.event == "stop"]
    assert stops[0] <= starts[1]


def test_a_worker_that_dies_fails_the_rolling_restart(api, tmp_path):
    broken = pods.PodRunner(api, workdir=tmp_path, replicas=1,
                            command=(sys.executable, "-c", "raise SystemExit(3)"), worker_args=())
    broken.create_statefulset()
    broken.start_pod(0)
    time.sleep(0.2)
    with pytest.raises(pods.DemoError, match="exited with 3"):
        broken.rolling_restart(restart_s=0, joined=broken.has_joined)
    broken.shutdown()
