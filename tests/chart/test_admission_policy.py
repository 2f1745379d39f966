"""The own-Lease admission policy, evaluated offline with a CEL interpreter."""

from __future__ import annotations

import pytest
from tests.chart import conftest, crdschema

POD_NAME_KEY = "authentication.kubernetes.io/pod-name"
POD_UID_KEY = "authentication.kubernetes.io/pod-uid"


@pytest.fixture(scope="module")
def policy(render):
    (vap,) = conftest.find(
        render({"workers": {"namespaces": ["team-a", "team-b"]}}), "ValidatingAdmissionPolicy",
        "kooper-kooper-system-worker-own-lease",
    )
    return vap


def lease(pod, *, uid=None, holder=None, member=None, owners=None):
    """A member Lease as the SDK writes it (``sdk.lease.LeaseKeeper.acquire``)."""
    return {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {
            "name": f"kooper-{pod}",
            "namespace": "team-a",
            "labels": {"kooper.dev/member": member or pod},
            "annotations": {"kooper.dev/report": "{}"},
            "ownerReferences": owners
            if owners is not None
            else [{"apiVersion": "v1", "kind": "Pod", "name": pod, "uid": uid or f"uid-{pod}"}],
        },
        "spec": {"holderIdentity": holder or f"{pod}/5c1e0a77", "leaseDurationSeconds": 30},
    }


def request(
    name,
    *,
    user="system:serviceaccount:team-a:kooper-worker",
    pod="kooper-demo-worker-1",
    operation="UPDATE",
    obj=None,
    uid=None,
):
    extra = {POD_NAME_KEY: [pod]} if pod else {}
    if uid:
        extra[POD_UID_KEY] = [uid]
    if obj is None and operation != "DELETE" and name.startswith("kooper-"):
        obj = lease(name.removeprefix("kooper-"))
    return {
        "name": name,
        "namespace": "team-a",
        "operation": operation,
        "userInfo": {"username": user, "extra": extra},
        "object": obj,
    }


def activation(policy, req):
    """What the API server binds: request, object, oldObject and the policy's variables."""
    bound = {"request": req, "object": req["object"], "oldObject": None}
    variables = {}
    for variable in policy["spec"].get("variables", []):
        value = crdschema.evaluate_cel(variable["expression"], {**bound, "variables": variables})
        variables[variable["name"]] = value
    return {**bound, "variables": variables}


def matches(policy, req):
    return all(
        crdschema.eval_cel(c["expression"], {"request": req})
        for c in policy["spec"]["matchConditions"]
    )


def refusals(policy, req):
    """The messages of the validations that refuse ``req`` (empty: admitted)."""
    if not matches(policy, req):
        return []
    bound = activation(policy, req)
    return [
        str(crdschema.evaluate_cel(v["messageExpression"], bound))
        for v in policy["spec"]["validations"]
        if not crdschema.eval_cel(v["expression"], bound)
    ]


def allowed(policy, req):
    return not refusals(policy, req)


def test_policy_covers_lease_writes_and_denies(policy, render):
    rules = policy["spec"]["matchConstraints"]["resourceRules"]
    assert rules == [
        {
            "apiGroups": ["coordination.k8s.io"],
            "apiVersions": ["*"],
            "operations": ["CREATE", "UPDATE", "DELETE"],
            "resources": ["leases"],
        }
    ]
    assert policy["spec"]["failurePolicy"] == "Fail"
    (binding,) = conftest.find(render(), "ValidatingAdmissionPolicyBinding",
                               "kooper-kooper-system-worker-own-lease")
    assert binding["spec"]["validationActions"] == ["Deny"]
    assert binding["spec"]["policyName"] == policy["metadata"]["name"]


@pytest.mark.parametrize("operation", ["CREATE", "UPDATE", "DELETE"])
def test_a_worker_may_write_its_own_lease(policy, operation):
    assert allowed(policy, request("kooper-kooper-demo-worker-1", operation=operation))


@pytest.mark.parametrize("operation", ["CREATE", "UPDATE", "DELETE"])
def test_a_worker_may_not_write_another_members_lease(policy, operation):
    assert not allowed(policy, request("kooper-kooper-demo-worker-2", operation=operation))


def test_a_worker_may_not_delete_a_collection_of_leases(policy):
    assert not allowed(policy, request(""))


def test_a_token_without_the_pod_name_claim_is_refused(policy):
    assert not allowed(policy, request("kooper-kooper-demo-worker-1", pod=None))


def test_a_worker_may_not_write_a_lease_that_is_not_a_member_lease(policy):
    assert not allowed(policy, request("kube-controller-manager", pod="kube-controller-manager"))


@pytest.mark.parametrize(
    "user",
    [
        "system:serviceaccount:team-b:kooper-worker",
    ],
)
def test_every_worker_namespace_is_covered(policy, user):
    assert matches(policy, request("x", user=user))


@pytest.mark.parametrize(
    "user",
    [
        "system:serviceaccount:kooper-system:kooper",  # the operator deletes departed Leases
        "system:serviceaccount:team-c:kooper-worker",  # not a worker namespace of this release
        "system:kube-controller-manager",
        "system:serviceaccount:team-a:default",
    ],
)
def test_other_users_are_not_matched(policy, user):
    assert not matches(policy, request("kooper-kooper-demo-worker-2", user=user))
    assert allowed(policy, request("kooper-kooper-demo-worker-2", user=user))


def test_denial_message_names_the_lease(policy):
    assert refusals(policy, request("kooper-w-9", pod="w-1", obj=lease("w-1"))) == [
        "a kooper worker may only write its own Lease (kooper-<its pod name>), not kooper-w-9"
    ]
    assert {v["reason"] for v in policy["spec"]["validations"]} == {"Forbidden"}


# --- identity: a member is its Lease's name, and what the Lease says must agree -----


@pytest.mark.parametrize("operation", ["CREATE", "UPDATE"])
def test_a_worker_may_write_its_own_lease_as_the_sdk_writes_it(policy, operation):
    assert allowed(
        policy,
        request("kooper-w-1", pod="w-1", uid="uid-w-1", obj=lease("w-1"), operation=operation),
    )


def test_a_worker_may_not_rewrite_its_lease_as_a_copy_of_another_members(policy):
    # w-1 copies w-0's Lease into its own (label, owner, holder): a member is its Lease's
    # name, so the copy would make the operator read w-0's work as w-1's (issue 12).
    forged = lease("w-0")
    forged["metadata"]["name"] = "kooper-w-1"
    assert sorted(refusals(policy, request("kooper-w-1", pod="w-1", obj=forged))) == [
        "Lease kooper-w-1 must have exactly one owner reference: its pod w-1",
        "the holderIdentity of Lease kooper-w-1 must be w-1/<incarnation>",
        "the kooper.dev/member label of Lease kooper-w-1 must name its pod w-1",
    ]


W0_OWNER = [{"apiVersion": "v1", "kind": "Pod", "name": "w-0", "uid": "uid-w-0"}]
FORGERIES = {
    "label": lease("w-1", member="w-0"),
    "holder": lease("w-1", holder="w-0/5c1e0a77"),
    "holder without incarnation": lease("w-1", holder="w-1"),
    "holder that only starts like the pod": lease("w-1", holder="w-10/5c1e0a77"),
    "owner": lease("w-1", owners=W0_OWNER),
    "a second owner": lease(
        "w-1", owners=[*lease("w-1")["metadata"]["ownerReferences"], *W0_OWNER]
    ),
    "no owner": lease("w-1", owners=[]),
    "an owner of another kind": lease(
        "w-1", owners=[{"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "w-1", "uid": "u"}]
    ),
    "the pod's name with another pod's uid": lease("w-1", uid="uid-w-0"),
}


@pytest.mark.parametrize("forged", FORGERIES.values(), ids=FORGERIES.keys())
@pytest.mark.parametrize("operation", ["CREATE", "UPDATE"])
def test_each_forged_identity_field_alone_is_refused(policy, forged, operation):
    assert not allowed(
        policy, request("kooper-w-1", pod="w-1", uid="uid-w-1", obj=forged, operation=operation)
    )


def test_a_token_without_the_pod_uid_claim_still_needs_the_pods_name_as_owner(policy):
    assert allowed(policy, request("kooper-w-1", pod="w-1", obj=lease("w-1", uid="any")))
    assert not allowed(policy, request("kooper-w-1", pod="w-1", obj=lease("w-1", owners=W0_OWNER)))


def test_a_lease_without_labels_or_holder_is_refused(policy):
    bare = lease("w-1")
    del bare["metadata"]["labels"]
    del bare["spec"]["holderIdentity"]
    assert len(refusals(policy, request("kooper-w-1", pod="w-1", obj=bare))) == 2


def test_a_worker_may_still_delete_its_own_lease_which_carries_no_object(policy):
    assert allowed(policy, request("kooper-w-1", pod="w-1", operation="DELETE"))
    assert not allowed(policy, request("kooper-w-0", pod="w-1", operation="DELETE"))


def test_policy_can_be_switched_off(render):
    assert (
        conftest.find(
            render({"workers": {"leasePolicy": {"enabled": False}}}), "ValidatingAdmissionPolicy",
            "kooper-kooper-system-worker-own-lease",
        )
        == []
    )
