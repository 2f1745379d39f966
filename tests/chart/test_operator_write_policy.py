"""The operator's write policy, evaluated offline with a CEL interpreter: the operator's
service account writes only kooper member ConfigMaps and Leases named kooper-*."""

from __future__ import annotations

import pytest
from tests.chart import conftest, crdschema

OPERATOR = f"system:serviceaccount:{conftest.NAMESPACE}:kooper"


@pytest.fixture(scope="module")
def policy(render):
    (vap,) = conftest.find(render({"operator": {"watchAllNamespaces": True}}),
                           "ValidatingAdmissionPolicy", "kooper-kooper-system-operator-writes")
    return vap


def configmap(name, labels):
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": "team-a", "labels": labels},
            "data": {"assignment.json": "{}"}}


MEMBER_CM = configmap("kooper-w-0", {"kooper.dev/group": "wg", "kooper.dev/member": "w-0"})


def refusals(policy, *, resource, name, operation="UPDATE", obj=None, user=OPERATOR):
    req = {"name": name, "namespace": "team-a", "operation": operation,
           "resource": {"group": "", "version": "v1", "resource": resource},
           "userInfo": {"username": user}}
    bound = {"request": req, "object": None if operation == "DELETE" else obj,
             "oldObject": obj if operation == "DELETE" else None}
    if not all(crdschema.eval_cel(c["expression"], {"request": req})
               for c in policy["spec"]["matchConditions"]):
        return []
    variables = {}
    for variable in policy["spec"]["variables"]:
        variables[variable["name"]] = crdschema.evaluate_cel(
            variable["expression"], {**bound, "variables": variables})
    bound = {**bound, "variables": variables}
    return [str(crdschema.evaluate_cel(v["messageExpression"], bound))
            for v in policy["spec"]["validations"]
            if not crdschema.eval_cel(v["expression"], bound)]


def test_the_policy_covers_configmap_and_lease_writes_of_the_operator_only(policy, render):
    resources = [r["resources"] for r in policy["spec"]["matchConstraints"]["resourceRules"]]
    assert resources == [["configmaps"], ["leases"]]
    assert policy["spec"]["failurePolicy"] == "Fail"
    (binding,) = conftest.find(render(), "ValidatingAdmissionPolicyBinding",
                               "kooper-kooper-system-operator-writes")
    assert binding["spec"]["validationActions"] == ["Deny"]
    # Anyone else is not matched (the worker policy covers the workers).
    assert refusals(policy, resource="configmaps", name="kube-root-ca.crt",
                    obj=configmap("kube-root-ca.crt", {}),
                    user="system:serviceaccount:team-a:kooper-worker") == []


@pytest.mark.parametrize("operation", ["CREATE", "UPDATE", "DELETE"])
def test_the_operator_may_write_and_delete_member_configmaps(policy, operation):
    assert refusals(policy, resource="configmaps", name="kooper-w-0", operation=operation,
                    obj=MEMBER_CM) == []


@pytest.mark.parametrize("operation", ["CREATE", "UPDATE", "DELETE"])
def test_the_operator_may_not_touch_other_configmaps(policy, operation):
    assert refusals(policy, resource="configmaps", name="kube-root-ca.crt",
                    operation=operation, obj=configmap("kube-root-ca.crt", {}))
    # Named like a member's, but not labelled as one (someone else's ConfigMap).
    assert refusals(policy, resource="configmaps", name="kooper-settings",
                    operation=operation, obj=configmap("kooper-settings", {}))
    # Labelled for another member than its name says.
    assert refusals(policy, resource="configmaps", name="kooper-w-1", operation=operation,
                    obj=MEMBER_CM)


@pytest.mark.parametrize(("name", "allowed"), [
    ("kooper-w-0", True),  # a departed member's Lease
    ("kooper-operator-leader", True),  # leader election
    ("kube-controller-manager", False),
    ("", False),  # a collection
])
def test_the_operator_writes_only_leases_named_kooper(policy, name, allowed):
    lease = {"metadata": {"name": name}}
    for operation in ("CREATE", "UPDATE", "DELETE"):
        assert (refusals(policy, resource="leases", name=name, operation=operation,
                         obj=lease) == []) is allowed


def test_the_policy_can_be_switched_off(render):
    assert conftest.find(render({"operator": {"writePolicy": {"enabled": False}}}),
                         "ValidatingAdmissionPolicy", "kooper-kooper-system-operator-writes") == []
