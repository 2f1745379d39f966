"""examples/: valid Kubernetes, valid against our CRDs, wired to the chart, balanced on paper."""

from __future__ import annotations

import kubernetes_validate
import pytest
from tests.chart import conftest, crdschema


def by_kind(examples, kind):
    return [o for o in examples if o["kind"] == kind]


def test_examples_hold_one_group_one_statefulset_and_three_connectors(examples):
    assert len(by_kind(examples, "WorkerGroup")) == 1
    assert len(by_kind(examples, "StatefulSet")) == 1
    assert sorted(c["spec"]["tasksMax"] for c in by_kind(examples, "Connector")) == [4, 4, 8]


def test_builtin_example_objects_validate_against_the_newest_kubernetes_schemas(examples):
    builtin = [o for o in examples if not o["apiVersion"].startswith("kooper.dev/")]
    assert builtin
    for obj in builtin:
        assert kubernetes_validate.validate(obj, conftest.KUBE_VERSION, strict=True)


def test_example_custom_resources_pass_our_crd_schemas_and_cel_rules(examples, crds):
    custom = [o for o in examples if o["apiVersion"] == "kooper.dev/v1alpha1"]
    assert len(custom) == 4
    for obj in custom:
        _stored, errors = crdschema.admit(crds[obj["kind"]], obj)
        assert errors == [], (obj["metadata"]["name"], errors)


def test_workers_are_selected_by_the_group_and_named_by_the_downward_api(examples):
    (group,) = by_kind(examples, "WorkerGroup")
    (sts,) = by_kind(examples, "StatefulSet")
    pod = sts["spec"]["template"]
    selector = group["spec"]["selector"]["matchLabels"]
    assert selector.items() <= pod["metadata"]["labels"].items()
    (container,) = pod["spec"]["containers"]
    assert container["args"][:2] == ["worker", "--demo"]
    env = {
        e["name"]: e["valueFrom"]["fieldRef"]["fieldPath"]
        for e in container["env"]
        if "valueFrom" in e
    }
    assert env["POD_NAME"] == "metadata.name"
    assert env["POD_NAMESPACE"] == "metadata.namespace"


def test_workers_run_as_the_chart_worker_service_account_with_restricted_security(examples, render):
    (sts,) = by_kind(examples, "StatefulSet")
    spec = sts["spec"]["template"]["spec"]
    (account,) = conftest.find(render(), "ServiceAccount", spec["serviceAccountName"])
    assert account["metadata"]["namespace"] == conftest.NAMESPACE
    (container,) = spec["containers"]
    assert spec["securityContext"]["runAsNonRoot"] is True
    assert container["securityContext"]["allowPrivilegeEscalation"] is False
    assert container["securityContext"]["capabilities"] == {"drop": ["ALL"]}


def test_connectors_name_the_example_group_and_keep_secrets_out_of_config(examples):
    (group,) = by_kind(examples, "WorkerGroup")
    for connector in by_kind(examples, "Connector"):
        assert connector["spec"]["workerGroup"] == group["metadata"]["name"]
        for key in connector["spec"].get("config", {}):
            assert not any(word in key.lower() for word in ("password", "token", "secret.value"))


@pytest.mark.parametrize("members", [4])
def test_example_work_divides_evenly_over_the_example_members(examples, members):
    (sts,) = by_kind(examples, "StatefulSet")
    assert sts["spec"]["replicas"] == members
    tasks = sum(c["spec"]["tasksMax"] for c in by_kind(examples, "Connector"))
    assert tasks % members == 0, "a balanced group: every member gets the same number of tasks"
