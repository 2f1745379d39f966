"""Issue 12, mechanism 3 on the real control plane: a worker dressing its Lease up as another's.

Pod ``w-1`` (``kooper-demo-worker-1``) holds a pod-bound ServiceAccount token, as the
kubelet mounts it. With it, it tries to make the operator believe ``w-0`` is alive
forever: it rewrites its own Lease as a copy of ``w-0``'s (the ``kooper.dev/member``
label, ``w-0``'s owner reference, holder and report, ``renewTime`` in 2099), and it
tries to write that copy over ``w-0``'s Lease itself. kube-apiserver refuses both with
the chart's own-Lease ValidatingAdmissionPolicy (the CEL of that policy has its own
table of cases in tests/chart/test_admission_policy.py; here the real server evaluates
it with the real token's claims). Someone the policy does not cover (here the cluster's
admin) can still write such a copy: the operator then ignores it and says so with a
``LeaseIdentityMismatch`` Warning Event (the metric beside it is covered in
tests/control/test_step_liveness.py and tests/shell).
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from e2e import demo, localcluster
from tests.integration.conftest import ROOT, get_json, wait_for

from kooper.sdk import apierrors
from kooper.sdk import kube as kube_api

pytestmark = pytest.mark.realk8s

NS = "it-forge"
RELEASE = "itf"
WORKER_SA = "kooper-worker"
LEASES = f"/apis/coordination.k8s.io/v1/namespaces/{NS}/leases"
W0, W1 = f"{demo.STATEFULSET}-0", f"{demo.STATEFULSET}-1"
POLICY = f"{RELEASE}-kooper-{NS}-worker-own-lease"


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


@pytest.fixture(scope="module")
def w1(cluster, admin, group, tmp_path_factory) -> kube_api.Api:
    """The API as pod w-1: a worker ServiceAccount token bound to that pod."""
    uid = admin.get(f"/api/v1/namespaces/{NS}/pods/{W1}")["metadata"]["uid"]
    answer = admin.create(
        f"/api/v1/namespaces/{NS}/serviceaccounts/{WORKER_SA}/token",
        {"spec": {"expirationSeconds": 600,
                  "boundObjectRef": {"apiVersion": "v1", "kind": "Pod", "name": W1, "uid": uid}}})
    path = tmp_path_factory.mktemp("forge") / "token"
    path.write_text(str(answer["status"]["token"]))
    return kube_api.Api(cluster.server, token_file=path, ca_file=cluster.ca_file)


def forged_copy(original: dict[str, Any], *, name: str, resource_version: str) -> dict[str, Any]:
    """``original`` (w-0's Lease) renamed to ``name``, renewed until 2099."""
    body = copy.deepcopy(original)
    metadata = body["metadata"]
    for generated in ("uid", "creationTimestamp", "managedFields", "generation"):
        metadata.pop(generated, None)
    metadata["name"] = name
    metadata["resourceVersion"] = resource_version
    body["spec"]["renewTime"] = "2099-01-01T00:00:00.000000Z"
    return body


def denial(path: str, body: dict[str, Any], api: kube_api.Api) -> str:
    """The server's refusal of a PUT of ``body`` (fails the test when it is accepted)."""
    with pytest.raises(apierrors.ApiError) as info:
        api.request("PUT", path, body=body)
    assert info.value.status == 403, info.value
    return str(info.value)


def test_w1_may_not_rewrite_its_own_lease_as_a_copy_of_w0s(w1):
    w0_lease = w1.get(f"{LEASES}/kooper-{W0}")
    mine = w1.get(f"{LEASES}/kooper-{W1}")
    forged = forged_copy(w0_lease, name=f"kooper-{W1}",
                         resource_version=mine["metadata"]["resourceVersion"])
    assert forged["metadata"]["labels"]["kooper.dev/member"] == W0
    assert forged["metadata"]["ownerReferences"][0]["name"] == W0
    assert forged["spec"]["holderIdentity"].startswith(f"{W0}/")
    message = denial(f"{LEASES}/kooper-{W1}", forged, w1)
    # Kubernetes' wording around the policy's own message (the first rule that fails).
    assert f'leases.coordination.k8s.io "kooper-{W1}" is forbidden: ' \
           f"ValidatingAdmissionPolicy '{POLICY}' with binding '{POLICY}' denied request: " \
           f"the kooper.dev/member label of Lease kooper-{W1} must name its pod {W1}" in message
    after = w1.get(f"{LEASES}/kooper-{W1}")
    assert after["metadata"]["labels"]["kooper.dev/member"] == W1
    assert after["spec"]["renewTime"] != forged["spec"]["renewTime"]


def test_w1_may_not_write_the_forged_renewal_over_w0s_lease(w1):
    w0_lease = w1.get(f"{LEASES}/kooper-{W0}")
    forged = forged_copy(w0_lease, name=f"kooper-{W0}",
                         resource_version=w0_lease["metadata"]["resourceVersion"])
    message = denial(f"{LEASES}/kooper-{W0}", forged, w1)
    assert f"ValidatingAdmissionPolicy '{POLICY}' with binding '{POLICY}' denied request: " \
           f"a kooper worker may only write its own Lease (kooper-<its pod name>), not " \
           f"kooper-{W0}" in message
    assert w1.get(f"{LEASES}/kooper-{W0}")["spec"]["renewTime"] != forged["spec"]["renewTime"]


def test_a_forged_copy_written_past_admission_is_ignored_by_the_operator(k, admin, group):
    before = group.reports()[W0].owned.sorted()
    w0_lease = admin.get(f"{LEASES}/kooper-{W0}")
    name = "kooper-forged-w-0"
    forged = forged_copy(w0_lease, name=name, resource_version="")
    del forged["metadata"]["resourceVersion"]
    admin.create(LEASES, forged)  # the admin is not a worker: the policy does not apply

    def mismatch_event() -> list[dict[str, Any]]:
        return [e for e in get_json(k, "-n", NS, "events")["items"]
                if e.get("reason") == "LeaseIdentityMismatch" and name in e.get("message", "")]

    events = wait_for("a LeaseIdentityMismatch Event", mismatch_event)
    assert events[0]["type"] == "Warning"
    assert f"labelled for member {W0!r}" in events[0]["message"]
    # Ignored: w-0 keeps what it ran (the forged copy neither added nor took anything).
    assert group.reports()[W0].owned.sorted() == before
    group.wait_balanced(demo.REPLICAS, timeout_s=60)
