"""The chart, the operator and the workers on the real control plane.

The chart is rendered by Helm and applied server-side into its own namespace (release
``it``, watching only that namespace); the operator runs as the chart's Deployment and
the examples' workers as the StatefulSet's pods, all as local processes with their
own bound ServiceAccount tokens, so the chart's RBAC and its own-Lease admission
policy are what the API server enforces on them.
"""

from __future__ import annotations

import json

import pytest
from e2e import demo, localcluster
from tests.integration.conftest import ROOT, get_json, refused, wait_for

from kooper.sdk import apierrors
from kooper.sdk import kube as kube_api

pytestmark = pytest.mark.realk8s

NS = "it-chart"
RELEASE = "it"
OPERATOR = "it-kooper"
WORKER_SA = "kooper-worker"
LEADER_LEASE = "it-kooper-operator-leader"
"""The release's own leader Lease (``<fullname>-operator-leader``)."""


@pytest.fixture(scope="module")
def group(k, crds):
    localcluster.install_chart(
        k, namespace=NS, release=RELEASE,
        values={"image": {"repository": "kooper", "tag": "0.1.0"},
                "operator": {"watchNamespace": NS}})
    k.kubectl("apply", "-n", NS, "-f", str(ROOT / "examples"))
    g = demo.Demo(k, NS)
    g.wait_balanced(demo.REPLICAS, timeout_s=300)
    yield g
    # Deleted, not waited for (as the per-test ``namespace`` fixture does): the
    # namespace controller and the kubelet stand-in stop its pods while the next
    # tests run; nothing later uses this namespace.
    k.kubectl("delete", "namespace", NS, "--wait=false")


def token_for(admin, sa: str, pod: str | None = None) -> str:
    """A TokenRequest for ``sa`` in the chart's namespace, bound to ``pod`` if given."""
    spec: dict = {"expirationSeconds": 600}
    if pod is not None:
        uid = admin.get(f"/api/v1/namespaces/{NS}/pods/{pod}")["metadata"]["uid"]
        spec["boundObjectRef"] = {"apiVersion": "v1", "kind": "Pod", "name": pod, "uid": uid}
    answer = admin.create(f"/api/v1/namespaces/{NS}/serviceaccounts/{sa}/token",
                          {"spec": spec})
    return str(answer["status"]["token"])


def client_with(cluster, tmp_path, token: str) -> kube_api.Api:
    path = tmp_path / "token"
    path.write_text(token)
    return kube_api.Api(cluster.server, token_file=path, ca_file=cluster.ca_file)


def test_the_operator_reconciles_the_examples_with_status_columns_and_events(k, group):
    status = group.group_status()
    conditions = {c["type"]: c for c in status.get("conditions", [])}
    assert conditions, status
    assert all(c.get("observedGeneration") for c in conditions.values()), conditions
    row = k.kubectl("get", "-n", NS, "wg", "demo").splitlines()[1].split()
    assert row[:2] == ["demo", "4"], row
    events = get_json(k, "-n", NS, "events", "--field-selector",
                      "involvedObject.kind=WorkerGroup,involvedObject.name=demo")["items"]
    assert events, "the operator recorded no Event on the WorkerGroup"
    assert {e["source"].get("component") or e.get("reportingComponent") for e in events}


def test_a_pod_bound_worker_token_writes_its_own_lease_and_not_another_pods(
        cluster, admin, group, tmp_path):
    me, other = f"{demo.STATEFULSET}-0", f"{demo.STATEFULSET}-1"
    worker = client_with(cluster, tmp_path, token_for(admin, WORKER_SA, me))
    path = f"/apis/coordination.k8s.io/v1/namespaces/{NS}/leases"
    touched = {"metadata": {"annotations": {"it.kooper.dev/touched": "yes"}}}
    worker.merge_patch(f"{path}/kooper-{me}", touched)
    with pytest.raises(apierrors.ApiError) as info:
        worker.merge_patch(f"{path}/kooper-{other}", touched)
    assert info.value.status == 403
    assert f"a kooper worker may only write its own Lease (kooper-<its pod name>), not " \
           f"kooper-{other}" in str(info.value)
    with pytest.raises(apierrors.ApiError) as info:
        worker.create(path, {"metadata": {"name": "kooper-someone-else"}, "spec": {}})
    assert info.value.status == 403


def test_a_worker_token_not_bound_to_a_pod_may_write_no_lease(cluster, admin, group, tmp_path):
    unbound = client_with(cluster, tmp_path, token_for(admin, WORKER_SA))
    me = f"{demo.STATEFULSET}-0"
    with pytest.raises(apierrors.ApiError) as info:
        unbound.merge_patch(f"/apis/coordination.k8s.io/v1/namespaces/{NS}/leases/kooper-{me}",
                            {"metadata": {"annotations": {"it.kooper.dev/touched": "no"}}})
    assert info.value.status == 403


def test_the_operators_rbac_is_what_it_needs_and_no_more(k, admin, group):
    token = token_for(admin, OPERATOR)

    def can(*args: str) -> bool:
        out = refused_or(k, "auth", "can-i", *args, "-n", NS, "--token", token)
        return out.strip() == "yes"

    assert can("patch", "workergroups.kooper.dev/status")
    assert can("delete", "configmaps")
    assert can("watch", "pods")
    assert not can("get", "secrets")
    assert not can("delete", "pods")
    assert not can("update", "leases")


def refused_or(k, *args: str) -> str:
    """kubectl auth can-i exits 1 for "no": its stdout either way."""
    try:
        return k.kubectl(*args)
    except Exception as exc:  # CalledProcessError carries the output
        return str(getattr(exc, "stdout", "") or "")


def test_an_operator_restart_keeps_the_group_balanced_and_its_generation(k, group):
    before = group.group_status().get("generation", 0)
    k.kubectl("-n", NS, "rollout", "restart", f"deployment/{OPERATOR}")
    group.rollout_status("deployment", OPERATOR)
    group.wait_balanced(demo.REPLICAS)
    assert group.group_status().get("generation", 0) >= before
    pods = get_json(k, "-n", NS, "pods", "-l", "app.kubernetes.io/component=operator")["items"]
    # The chart's default: a leader and a hot standby (replicaCount 2, leader election).
    assert len([p for p in pods if not p["metadata"].get("deletionTimestamp")]) == 2
    # The old leader gave the Lease up on its clean stop; one of the new pods takes it.
    wait_for("a leader", lambda: get_json(k, "-n", NS, "leases.coordination.k8s.io",
                                          LEADER_LEASE)["spec"].get("holderIdentity"))
    # The new term fenced the group: its epoch on the status and on every ConfigMap.
    def fenced() -> bool:
        epoch = group.group_status().get("leaderEpoch", 0)
        cms = get_json(k, "-n", NS, "configmaps", "-l", "kooper.dev/group=demo")["items"]
        marks = {(cm["metadata"].get("annotations") or {}).get("kooper.dev/leader-epoch")
                 for cm in cms}
        return epoch >= 2 and marks == {str(epoch)}

    wait_for("the new leader's epoch on the status and every ConfigMap", fenced)


def test_a_worker_killed_hard_is_replaced_by_the_statefulset_and_rejoins(k, group):
    victim = f"{demo.STATEFULSET}-3"
    old = get_json(k, "-n", NS, "pod", victim)["metadata"]["uid"]
    k.kubectl("-n", NS, "delete", "pod", victim, "--grace-period=0", "--force")
    wait_for("the StatefulSet to recreate the pod",
             lambda: get_json(k, "-n", NS, "pod", victim)["metadata"]["uid"] != old)
    group.wait_balanced(demo.REPLICAS, timeout_s=180)


def test_an_invalid_connector_change_is_refused_by_the_server(k, group):
    err = refused(k, "-n", NS, "patch", "connector",
                  get_json(k, "-n", NS, "connectors")["items"][0]["metadata"]["name"],
                  "--type", "merge", "-p", json.dumps({"spec": {"state": "exploded"}}))
    assert 'Unsupported value: "exploded"' in err
