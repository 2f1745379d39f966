"""The CRDs: Kubernetes accepts them, they follow the contract, and their rules bite."""

from __future__ import annotations

import copy

import kubernetes_validate
import pytest
from tests.chart import conftest, crdschema

from kooper.control import status, views


def wg(**spec):
    base = {"selector": {"matchLabels": {"app": "w"}}}
    base.update(spec)
    return {
        "apiVersion": "kooper.dev/v1alpha1",
        "kind": "WorkerGroup",
        "metadata": {"name": "g", "namespace": "n"},
        "spec": base,
    }


def conn(**spec):
    base = {"workerGroup": "g"}
    base.update(spec)
    return {
        "apiVersion": "kooper.dev/v1alpha1",
        "kind": "Connector",
        "metadata": {"name": "c", "namespace": "n"},
        "spec": base,
    }


@pytest.mark.parametrize("kind", ["WorkerGroup", "Connector"])
def test_crd_is_a_valid_apiextensions_v1_object_for_the_newest_kubernetes(crds, kind):
    assert kubernetes_validate.validate(crds[kind], conftest.KUBE_VERSION, strict=True)


def test_workergroup_names_printer_columns_and_subresources_follow_the_contract(crds):
    crd = crds["WorkerGroup"]
    names = crd["spec"]["names"]
    assert (crd["metadata"]["name"], names["plural"], names["shortNames"], names["categories"]) == (
        "workergroups.kooper.dev",
        "workergroups",
        ["wg"],
        ["kooper"],
    )
    assert crd["spec"]["scope"] == "Namespaced"
    (version,) = crd["spec"]["versions"]
    assert version["subresources"] == {"status": {}}
    columns = {c["name"]: c["jsonPath"] for c in version["additionalPrinterColumns"]}
    assert columns == {
        "Members": ".status.members.count",
        "Tasks": ".status.tasks",
        "Unassigned": ".status.unassigned",
        "Protocol": ".status.protocol",
        "Generation": ".status.rebalanceGeneration",
        "Delay": ".status.delay.remainingSeconds",
        "Ready": '.status.conditions[?(@.type=="Ready")].status',
        "Age": ".metadata.creationTimestamp",
    }
    status = version["schema"]["openAPIV3Schema"]["properties"]["status"]
    assert "x-kubernetes-preserve-unknown-fields" not in status  # pruned: see test_status_schema
    assert status["properties"]["state"]["x-kubernetes-preserve-unknown-fields"] is True
    assert {
        "observedGeneration",
        "rebalanceGeneration",
        "protocol",
        "members",
        "connectors",
        "tasks",
        "assigned",
        "unassigned",
        "lost",
        "imbalance",
        "delay",
        "state",
        "conditions",
    } <= set(status["properties"])


def test_connector_names_scale_subresource_and_printer_columns_follow_the_contract(crds):
    crd = crds["Connector"]
    names = crd["spec"]["names"]
    assert (names["plural"], names["shortNames"], names["categories"]) == (
        "connectors",
        ["kconn"],
        ["kooper"],
    )
    (version,) = crd["spec"]["versions"]
    assert version["subresources"] == {
        "status": {},
        "scale": {"specReplicasPath": ".spec.tasksMax", "statusReplicasPath": ".status.taskCount"},
    }
    columns = [c["name"] for c in version["additionalPrinterColumns"]]
    assert columns == ["Group", "Tasks", "Running", "State", "Ready", "Age"]


def test_workergroup_defaults_fill_every_setting(crds):
    stored, errors = crdschema.admit(crds["WorkerGroup"], wg())
    assert errors == []
    assert stored["spec"] == {
        "selector": {"matchLabels": {"app": "w"}},
        "protocol": "compatible",
        "policy": "kooper",
        "scheduledRebalanceMaxDelay": "300s",
        "leaseDurationSeconds": 30,
        "clockSkewSeconds": 5,
    }


def test_connector_defaults_to_one_running_task(crds):
    stored, errors = crdschema.admit(crds["Connector"], conn())
    assert errors == []
    assert stored["spec"] == {"workerGroup": "g", "tasksMax": 1, "state": "Running"}


@pytest.mark.parametrize("state", ["Running", "Paused", "Stopped", "running", "paused",
                                   "stopped"])
def test_connector_state_is_camel_case_and_the_older_lowercase_still_admitted(crds, state):
    assert crdschema.admit(crds["Connector"], conn(state=state))[1] == []


def test_the_crds_state_enums_are_the_ones_the_operator_reads_and_writes(crds):
    schema = crdschema.version_schema(crds["Connector"])["properties"]
    spec_enum = schema["spec"]["properties"]["state"]["enum"]
    assert spec_enum == [*views.CONNECTOR_STATES, *views.CONNECTOR_STATES.values()]
    task_enum = schema["status"]["properties"]["tasks"]["items"]["properties"]["state"]["enum"]
    assert task_enum == [*status.TASK_STATES, *(s.upper() for s in status.TASK_STATES)]


@pytest.mark.parametrize("delay", ["0s", "300s", "5m", "1h30m", "1.5s", "250ms"])
def test_workergroup_accepts_non_negative_durations(crds, delay):
    assert crdschema.admit(crds["WorkerGroup"], wg(scheduledRebalanceMaxDelay=delay))[1] == []


BAD_WORKERGROUPS = [
    ({"selector": {}}, "selector must not be empty"),
    ({"selector": {"matchLabels": {}}}, "selector must not be empty"),
    ({"selector": {"matchExpressions": []}}, "selector must not be empty"),
    (
        {"scheduledRebalanceMaxDelay": "-5s"},
        "scheduledRebalanceMaxDelay must be a duration of at least 0s",
    ),
    (
        {"scheduledRebalanceMaxDelay": "soon"},
        "scheduledRebalanceMaxDelay must be a duration of at least 0s",
    ),
    ({"scheduledRebalanceMaxDelay": "300"}, "does not match"),
    ({"scheduledRebalanceMaxDelay": "0"}, "does not match"),
    ({"protocol": "cooperative"}, "is not one of"),
    ({"policy": "sticky"}, "is not one of"),
    ({"leaseDurationSeconds": 4}, "less than the minimum"),
    ({"leaseDurationSeconds": 3601}, "greater than the maximum"),
    ({"clockSkewSeconds": -1}, "less than the minimum"),
    ({"clockSkewSeconds": 301}, "greater than the maximum"),
]


@pytest.mark.parametrize(("spec", "message"), BAD_WORKERGROUPS)
def test_workergroup_rejects_bad_specs_with_a_clear_message(crds, spec, message):
    errors = crdschema.admit(crds["WorkerGroup"], wg(**spec))[1]
    assert any(message in e for e in errors), errors


def test_workergroup_name_must_fit_the_label_on_its_members_configmaps(crds):
    # The name is the kooper.dev/group label value on every member's ConfigMap (at most
    # 63 characters): a longer one would be admitted and then no ConfigMap written.
    obj = wg()
    obj["metadata"]["name"] = "g" * 63
    assert crdschema.admit(crds["WorkerGroup"], obj)[1] == []
    obj["metadata"]["name"] = "g" * 64
    errors = crdschema.admit(crds["WorkerGroup"], obj)[1]
    assert any("WorkerGroup name must be at most 63 characters" in e for e in errors), errors


@pytest.mark.parametrize(
    "selector",
    [
        {"matchLabels": {"app.kubernetes.io/name": "w", "tier": ""}},
        {"matchLabels": {"A_b.c-9": "v_1.x-Y"}},
        {"matchExpressions": [{"key": "app", "operator": "In", "values": ["a", "b"]}]},
        {"matchExpressions": [{"key": "example.com/role", "operator": "NotIn",
                               "values": ["x"]}]},
        {"matchExpressions": [{"key": "app", "operator": "Exists"}]},
        {"matchExpressions": [{"key": "app", "operator": "DoesNotExist", "values": []}]},
    ],
)
def test_workergroup_accepts_label_selectors_kubernetes_accepts(crds, selector):
    assert crdschema.admit(crds["WorkerGroup"], wg(selector=selector))[1] == []


LABEL_KEY = "selector label keys must be label keys"
EXPRESSION_VALUES = "In and NotIn need values; Exists and DoesNotExist take none"


@pytest.mark.parametrize(
    ("selector", "message"),
    [
        ({"matchLabels": {"bad key!": "w"}}, LABEL_KEY),
        ({"matchLabels": {"/app": "w"}}, LABEL_KEY),
        ({"matchLabels": {"Example.com/app": "w"}}, LABEL_KEY),
        ({"matchLabels": {"a" * 64: "w"}}, LABEL_KEY),
        ({"matchLabels": {"a" * 254 + "/app": "w"}}, LABEL_KEY),
        ({"matchLabels": {"app": "bad value!"}}, "does not match"),
        ({"matchLabels": {"app": "-w"}}, "does not match"),
        ({"matchExpressions": [{"key": "bad key", "operator": "Exists"}]}, LABEL_KEY),
        ({"matchExpressions": [{"key": "app", "operator": "In"}]}, EXPRESSION_VALUES),
        ({"matchExpressions": [{"key": "app", "operator": "NotIn", "values": []}]},
         EXPRESSION_VALUES),
        ({"matchExpressions": [{"key": "app", "operator": "Exists", "values": ["w"]}]},
         EXPRESSION_VALUES),
        ({"matchExpressions": [{"key": "app", "operator": "In", "values": ["w x"]}]},
         "does not match"),
    ],
)
def test_workergroup_rejects_a_selector_kubernetes_would_reject(crds, selector, message):
    # The operator matches pods itself: an invalid selector would not fail anywhere, it
    # would only match no pod.
    errors = crdschema.admit(crds["WorkerGroup"], wg(selector=selector))[1]
    assert any(message in e for e in errors), errors


def test_workergroup_without_selector_is_rejected(crds):
    obj = wg()
    del obj["spec"]["selector"]
    assert any(
        "'selector' is a required property" in e
        for e in crdschema.admit(crds["WorkerGroup"], obj)[1]
    )


BAD_CONNECTORS = [
    ({"workerGroup": ""}, "workerGroup must name a WorkerGroup"),
    ({"workerGroup": "Not_A_Name"}, "does not match"),
    ({"workerGroup": "g" * 64}, "is too long"),  # no WorkerGroup has such a name
    ({"tasksMax": -1}, "tasksMax must be between 0 and 10000"),
    ({"tasksMax": 10001}, "tasksMax must be between 0 and 10000"),
    ({"state": "deleted"}, "is not one of"),
    ({"state": "RUNNING"}, "is not one of"),
    ({"config": {"retries": 3}}, "is not of type 'string'"),
]


@pytest.mark.parametrize(("spec", "message"), BAD_CONNECTORS)
def test_connector_rejects_bad_specs_with_a_clear_message(crds, spec, message):
    errors = crdschema.admit(crds["Connector"], conn(**spec))[1]
    assert any(message in e for e in errors), errors


@pytest.mark.parametrize("tasks", [0, 1, 10000])
def test_connector_accepts_tasks_max_at_the_bounds(crds, tasks):
    assert crdschema.admit(crds["Connector"], conn(tasksMax=tasks))[1] == []


def test_every_cel_rule_has_a_message_and_compiles(crds):
    found = {}
    for kind, crd in crds.items():
        for path, rule in crdschema.rules(crdschema.version_schema(crd)):
            assert rule.get("message"), f"{kind} {path}: a CEL rule without a message"
            crdschema._ENV.compile(rule["rule"])  # raises on a syntax error
            found[f"{kind}:{path}"] = rule["message"]
    assert set(found) == {
        "WorkerGroup:<root>",
        "WorkerGroup:spec",
        "WorkerGroup:spec.selector",
        "WorkerGroup:spec.selector.matchLabels",
        "WorkerGroup:spec.selector.matchExpressions[]",
        "WorkerGroup:spec.selector.matchExpressions[].key",
        "WorkerGroup:spec.scheduledRebalanceMaxDelay",
        "WorkerGroup:spec.balancing.maxMovesPerRound",
        "Connector:spec.workerGroup",
        "Connector:spec.tasksMax",
        "Connector:spec.config",
    }


# --- the timing budget (docs/protocol.md): renew + stop timeout + margin < lease ---------

BUDGET = "the timing budget needs renewIntervalSeconds + stopTimeoutSeconds"


@pytest.mark.parametrize(
    "timing",
    [
        {},  # every part scales with the default 30 s lease: 10 + 10 + 2 < 30
        {"leaseDurationSeconds": 5},  # the CRD's shortest lease, the drills' setting
        {"leaseDurationSeconds": 15, "renewIntervalSeconds": 5},  # the examples'
        {"renewIntervalSeconds": 10, "stopTimeoutSeconds": 10, "fenceMarginSeconds": 2},
        {"renewIntervalSeconds": 10, "stopTimeoutSeconds": 17, "fenceMarginSeconds": 2},
        {"leaseDurationSeconds": 60, "stopTimeoutSeconds": 30},
    ],
)
def test_workergroup_accepts_a_sound_timing_budget(crds, timing):
    assert crdschema.admit(crds["WorkerGroup"], wg(**timing))[1] == []


@pytest.mark.parametrize(
    "timing",
    [
        # The stops of a member fenced at 30 - 30 - 2 < 0 s could never end in time.
        {"stopTimeoutSeconds": 30},
        # Exactly the lease: the member would fence the moment one renewal is late.
        {"renewIntervalSeconds": 10, "stopTimeoutSeconds": 18, "fenceMarginSeconds": 2},
        # Renewing every 10 s, fencing 15 - 5 - 1 = 9 s after a renewal: always fenced.
        {"leaseDurationSeconds": 15, "renewIntervalSeconds": 10},
        {"leaseDurationSeconds": 5, "fenceMarginSeconds": 4},
    ],
)
def test_workergroup_rejects_a_timing_budget_that_cannot_hold(crds, timing):
    errors = crdschema.admit(crds["WorkerGroup"], wg(**timing))[1]
    assert any(BUDGET in e for e in errors), errors


@pytest.mark.parametrize(
    "field", ["renewIntervalSeconds", "stopTimeoutSeconds", "fenceMarginSeconds"]
)
def test_workergroup_timing_parts_are_whole_positive_seconds(crds, field):
    errors = crdschema.admit(crds["WorkerGroup"], wg(**{field: 0}))[1]
    assert any("less than the minimum" in e for e in errors), errors


# --- the config bound: an assignment carries it and must fit one ConfigMap ---------------


def test_connector_config_may_total_64_kib_of_keys_and_values(crds):
    config = {f"k{i:02d}": "v" * (4096 - 3) for i in range(16)}
    assert sum(len(k) + len(v) for k, v in config.items()) == 65536
    assert crdschema.admit(crds["Connector"], conn(config=config))[1] == []


def test_connector_config_over_64_kib_in_total_is_rejected(crds):
    config = {f"k{i:02d}": "v" * (4096 - 3) for i in range(16)}
    config["k00"] += "v"
    errors = crdschema.admit(crds["Connector"], conn(config=config))[1]
    assert any("config must total at most 65536 characters" in e for e in errors), errors


def test_one_config_value_over_the_bound_is_rejected_by_the_schema(crds):
    errors = crdschema.admit(crds["Connector"], conn(config={"blob": "x" * 65537}))[1]
    assert any("is too long" in e for e in errors), errors


def test_status_written_by_the_operator_validates(crds):
    obj = copy.deepcopy(wg())
    obj["status"] = {
        "observedGeneration": 2,
        "rebalanceGeneration": 7,
        "protocol": "compatible",
        "members": {
            "count": 2,
            "byProtocol": {"eager": 0, "compatible": 2},
            "names": ["w-0", "w-1"],
        },
        "connectors": 1,
        "tasks": 2,
        "assigned": 3,
        "unassigned": 0,
        "lost": 0,
        "imbalance": 1,
        "delay": {
            "deadline": "2030-01-01T00:00:00Z",
            "remainingSeconds": 12,
            "lost": 1,
            "candidates": [],
        },
        "state": {"anything": {"the": "operator keeps"}},
        "conditions": [
            {
                "type": "Ready",
                "status": "True",
                "reason": "Balanced",
                "message": "",
                "lastTransitionTime": "2030-01-01T00:00:00Z",
                "observedGeneration": 2,
            }
        ],
    }
    assert crdschema.admit(crds["WorkerGroup"], obj)[1] == []
    obj["status"]["conditions"][0]["status"] = "Yes"
    assert crdschema.admit(crds["WorkerGroup"], obj)[1]
