"""The operator reads the pods' rollout (``control.rollout``) from the API it already uses:
a StatefulSet's ``status.updateRevision`` against its pods' ``controller-revision-hash``,
a Deployment's newest ReplicaSet's ``pod-template-hash`` against its pods'."""

from __future__ import annotations

from tests.shell import doubles
from tests.shell.conftest import Operator, make_connector, make_group, settled, wait_for


def test_statefulset_rollout_sends_new_work_only_to_updated_pods(emulated):
    sts = emulated.create("statefulsets", {"metadata": {"name": "w"}, "spec": {
        "replicas": 3, "updateStrategy": {"type": "RollingUpdate"}}}, namespace="default")
    emulated.patch("statefulsets", "w", {"status": {"updateRevision": "w-new"}},
                   namespace="default", subresource="status")
    op = Operator(emulated).start()
    try:
        with doubles.Fleet(emulated, labels={"app": "workers"}, lease_seconds=3,
                           owner=("StatefulSet", "w", sts["metadata"]["uid"])) as fleet:
            make_group(emulated, delay="60s")
            make_connector(emulated, "A", 6)
            for n, revision in enumerate(("w-old", "w-old", "w-new")):
                fleet.labels = {"app": "workers", "controller-revision-hash": revision}
                fleet.add(f"w-{n}")
            wait_for(lambda: settled(fleet, emulated, resources=7, members=3), what="settle")
            runner = next(iter(op.shell.runners.values()))
            runner.steps = []
            make_connector(emulated, "B", 3)
            wait_for(lambda: settled(fleet, emulated, resources=11, members=3),
                     what="B placed")
            # B's instance and tasks went to the one pod on the update revision.
            owned = {m: set(r.sorted()) for m, r in fleet.owned().items()}
            assert {"B", "B-0", "B-1", "B-2"} <= owned["w-2"]
            assert not any(r.startswith("B") for m in ("w-0", "w-1") for r in owned[m])
            inputs, _, _, decided = runner.steps[0]
            assert inputs.rollouts[("StatefulSet", "w")].update_revision == "w-new"
            assert decided.snapshot.outdated == {"w-0", "w-1"}
            assert decided.snapshot.updated == {"w-2"}
            assert not fleet.violations
    finally:
        op.stop()


def test_deployment_pods_are_judged_by_the_newest_replicaset(emulated):
    deployment = emulated.create("deployments", {"metadata": {"name": "web"}, "spec": {}},
                                 namespace="default")
    owner = [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web",
              "uid": deployment["metadata"]["uid"], "controller": True}]
    uids = {}
    for name, template, revision in (("web-aaa", "aaa", "1"), ("web-bbb", "bbb", "2")):
        body = emulated.create("replicasets", {"metadata": {
            "name": name, "labels": {"pod-template-hash": template},
            "annotations": {"deployment.kubernetes.io/revision": revision},
            "ownerReferences": owner}, "spec": {"replicas": 1}}, namespace="default")
        uids[name] = body["metadata"]["uid"]
    op = Operator(emulated).start()
    try:
        fleets = [doubles.Fleet(emulated, labels={"app": "workers", "pod-template-hash": t},
                                lease_seconds=3, owner=("ReplicaSet", rs, uids[rs]))
                  for rs, t in (("web-aaa", "aaa"), ("web-bbb", "bbb"))]
        with fleets[0] as old, fleets[1] as new:
            make_group(emulated, delay="60s")
            make_connector(emulated, "A", 4)
            old.add("web-aaa-1")
            new.add("web-bbb-1")
            wait_for(lambda: sum(len(r) for f in (old, new) for r in f.owned().values()) == 5,
                     what="settle")
            runner = next(iter(op.shell.runners.values()))
            runner.steps = []
            make_connector(emulated, "B", 2)
            wait_for(lambda: runner.steps and runner.steps[-1][3].snapshot is not None,
                     what="a round")
            inputs, _, _, decided = runner.steps[-1]
            assert inputs.rollouts[("ReplicaSet", "web-aaa")].update_revision == "bbb"
            assert decided.snapshot.outdated == {"web-aaa-1"}
            assert decided.snapshot.updated == {"web-bbb-1"}
    finally:
        op.stop()

