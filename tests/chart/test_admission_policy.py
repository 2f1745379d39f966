"""The own-Lease admission policy, evaluated offline with a CEL interpreter."""

from __future__ import annotations

import pytest
from tests.chart import conftest, crdschema

POD_NAME_KEY = "authentication.kubernetes.io/pod-name"


@pytest.fixture(scope="module")
def policy(render):
    (vap,) = conftest.find(
        render({"workers": {"namespaces": ["team-a", "team-b"]}}), "ValidatingAdmissionPolicy"
    )
    return vap


def request(
    name,
    *,
    user="system:serviceaccount:team-a:kooper-worker",
    pod="kooper-demo-worker-1",
    operation="UPDATE",
):
    extra = {POD_NAME_KEY: [pod]} if pod else {}
    return {
        "name": name,
        "namespace": "team-a",
        "operation": operation,
        "userInfo": {"username": user, "extra": extra},
    }


def matches(policy, req):
    return all(
        crdschema.eval_cel(c["expression"], {"request": req})
        for c in policy["spec"]["matchConditions"]
    )


def allowed(policy, req):
    if not matches(policy, req):
        return True
    return all(
        crdschema.eval_cel(v["expression"], {"request": req}) for v in policy["spec"]["validations"]
    )


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
    (binding,) = conftest.find(render(), "ValidatingAdmissionPolicyBinding")
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
    (validation,) = policy["spec"]["validations"]
    message = crdschema._ENV.program(
        crdschema._ENV.compile(validation["messageExpression"])
    ).evaluate({"request": crdschema.celpy.json_to_cel(request("kooper-w-9"))})
    assert (
        str(message)
        == "a kooper worker may only write its own Lease (kooper-<its pod name>), not kooper-w-9"
    )
    assert validation["reason"] == "Forbidden"


def test_policy_can_be_switched_off(render):
    assert (
        conftest.find(
            render({"workers": {"leasePolicy": {"enabled": False}}}), "ValidatingAdmissionPolicy"
        )
        == []
    )
