import pathlib
import sys

import pytest

from kooper.demo import cluster, pods, recorder
from kooper.emulator import cluster as emulated

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


@pytest.fixture
def changes(api):
    """Every change to Pods and Leases from now on: (type, kind, name, terminating)."""
    seen = []

    def listen(_rv, spec, kind, obj, _old):
        if spec.plural in ("pods", "leases"):
            meta = obj["metadata"]
            seen.append((kind, spec.plural, meta["name"], bool(meta.get("deletionTimestamp"))))

    api.store.subscribe(listen)
    yield seen
    api.store.unsubscribe(listen)


def wait_joined(runner):
    for pod in runner.pods.values():
        cluster.wait_for(lambda pod=pod: runner.has_joined(pod), timeout_s=10, what=pod.name)


def rows_of(runner, member):
    rows = recorder.collect(worker_files=runner.events_files(), audit_file=None, run="r",
                            group="demo", protocol="compatible", policy="kooper")
    return [r for r in rows if r.member == member]


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


def test_stopping_a_pod_marks_it_terminating_sigterms_the_worker_then_removes_the_pod(
        api, runner, changes):
    runner.start_all()
    wait_joined(runner)
    changes.clear()
    stopped = runner.stop_pod(2)
    assert stopped == pods.Stopped(name="workers-2", returncode=0, graceful=True)
    # The kubelet's order: the Pod is terminating, the worker stops its work and
    # releases its own Lease, and only then does the Pod object go.
    assert changes == [
        ("MODIFIED", "pods", "workers-2", True),
        ("DELETED", "leases", "kooper-workers-2", False),
        ("DELETED", "pods", "workers-2", True),
    ]
    (stop,) = [r for r in rows_of(runner, "workers-2") if r.event == "stop"]
    assert stop.epoch == 1  # the fake worker saw its Pod terminating when SIGTERM came
    assert api.get("pods", "workers-2", namespace="default") is None
    assert api.get("leases", "kooper-workers-1", namespace="default") is not None


def test_a_worker_that_ignores_sigterm_is_killed_after_the_grace_period_and_its_lease_collected(
        api, tmp_path, changes):
    stuck = pods.PodRunner(api, workdir=tmp_path, replicas=1, command=FAKE, worker_args=(),
                           worker_env={"FAKE_IGNORE_SIGTERM": "1"}, grace_s=0.3)
    try:
        stuck.start_all()
        wait_joined(stuck)
        changes.clear()
        stopped = stuck.stop_pod(0)
    finally:
        stuck.shutdown()
    assert stopped == pods.Stopped(name="workers-0", returncode=-9, graceful=False)
    # Terminating for the whole grace period; then the Pod goes and its Lease with it.
    assert changes == [
        ("MODIFIED", "pods", "workers-0", True),
        ("DELETED", "pods", "workers-0", True),
        ("DELETED", "leases", "kooper-workers-0", False),
    ]


def test_killing_a_pod_sigkills_the_worker_and_removes_pod_and_lease_at_once(
        api, runner, changes):
    runner.start_all()
    wait_joined(runner)
    changes.clear()
    stopped = runner.kill_pod(1)
    assert stopped == pods.Stopped(name="workers-1", returncode=-9, graceful=False)
    assert [c for c in changes if c[0] == "DELETED"] == [
        ("DELETED", "pods", "workers-1", False),
        ("DELETED", "leases", "kooper-workers-1", False),
    ]
    # No chance to stop: the runner's rows say when the process began and was reaped.
    assert [r.event for r in rows_of(runner, "workers-1")] == ["join", "start", "leave"]
    assert sorted(runner.pods) == ["workers-0", "workers-2"]


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
    # pod's old incarnation stopped, and was reaped, before its new one began.
    assert len([r for r in rows if r.event in ("start", "stop")]) == 12
    mine = [r for r in rows if r.member == "workers-0"]
    assert [str(r.event) for r in mine] == ["join", "start", "stop", "leave", "join", "start",
                                            "stop"]  # (shutdown is after the run: no row)
    assert [r.ts_ms for r in mine] == sorted(r.ts_ms for r in mine)


def test_a_worker_that_dies_fails_the_rolling_restart(api, tmp_path):
    broken = pods.PodRunner(api, workdir=tmp_path, replicas=1,
                            command=(sys.executable, "-c", "raise SystemExit(3)"), worker_args=())
    broken.create_statefulset()
    pod = broken.start_pod(0)
    pod.process.wait(10)  # dead before the restart begins: no race with the check
    with pytest.raises(pods.DemoError, match="exited with 3"):
        broken.rolling_restart(restart_s=0, joined=broken.has_joined)
    broken.shutdown()


def _lease_reporting(generation):
    from kooper.core import model
    from kooper.protocol import codec, messages

    report = messages.Report(member="workers-0", incarnation="a",
                             protocols=frozenset({model.Protocol.COMPATIBLE}),
                             generation=generation)
    return {"metadata": {"annotations": {messages.REPORT_ANNOTATION: codec.encode_report(report)}}}


def test_the_demo_roll_goes_on_once_the_operator_took_the_restarted_pod_back():
    # A new process reports generation -1 until it applies a document written for it:
    # only then is the next pod restarted, so two pods are never out at once however far
    # behind the operator is (a loaded machine once had all three out: cooperative then
    # paused as much as eager).
    assert not pods.acts_on_a_document(None)
    assert not pods.acts_on_a_document({"metadata": {}})
    assert not pods.acts_on_a_document(_lease_reporting(-1))
    assert pods.acts_on_a_document(_lease_reporting(0))
    assert pods.acts_on_a_document(_lease_reporting(7))
    assert not pods.acts_on_a_document(
        {"metadata": {"annotations": {"kooper.dev/report": "{not json"}}})
