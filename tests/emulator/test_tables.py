"""Table output, discovery documents and field validation, as pure functions."""

import datetime

import pytest

from kooper.emulator import discovery, resources, tables, validation

NOW = datetime.datetime(2026, 11, 25, 12, 0, tzinfo=datetime.UTC).timestamp()
REGISTRY = resources.Registry([*resources.BUILTINS, *resources.KOOPER_CRDS])


@pytest.mark.parametrize(("seconds", "shown"), [
    (-5, "<invalid>"), (-1, "0s"), (0, "0s"), (119, "119s"), (200, "3m20s"), (240, "4m"),
    (15 * 60, "15m"), (5 * 3600 + 600, "5h10m"), (30 * 3600, "30h"), (76 * 3600, "3d4h"),
    (400 * 86400, "400d"), (3 * 365 * 86400, "3y"),
])
def test_ages_read_as_kubectl_prints_them(seconds, shown):
    assert tables.human_duration(seconds) == shown


def test_jsonpath_follows_keys_indexes_and_filters():
    obj = {"status": {"conditions": [{"type": "Progressing", "status": "False"},
                                     {"type": "Ready", "status": "True"}]},
           "spec": {"ports": [{"port": 80}]}}
    assert tables.jsonpath(obj, '.status.conditions[?(@.type=="Ready")].status') == "True"
    assert tables.jsonpath(obj, ".spec.ports[0].port") == 80
    assert tables.jsonpath(obj, ".spec.ports[3].port") is None
    assert tables.jsonpath(obj, ".status.missing.deeper") is None


def test_a_crd_table_has_name_then_the_printer_columns_typed():
    spec = resources.ResourceSpec(
        "kooper.dev", "v1alpha1", "workergroups", "WorkerGroup", columns=(
            resources.PrinterColumn("Members", "integer", ".status.members.count"),
            resources.PrinterColumn("Ready", "string",
                                    '.status.conditions[?(@.type=="Ready")].status'),
            resources.PrinterColumn("Age", "date", ".metadata.creationTimestamp")))
    obj = {"metadata": {"name": "demo", "creationTimestamp": "2026-11-25T11:55:00Z"},
           "status": {"members": {"count": 4.0},
                      "conditions": [{"type": "Ready", "status": "True"}]}}
    table = tables.table(spec, [obj], now=NOW, resource_version="7")
    assert [c["name"] for c in table["columnDefinitions"]] == ["Name", "Members", "Ready", "Age"]
    assert table["rows"][0]["cells"] == ["demo", 4, "True", "5m"]
    assert table["rows"][0]["object"]["kind"] == "PartialObjectMetadata"
    assert table["metadata"]["resourceVersion"] == "7"
    bare = tables.table(spec, [{"metadata": {"name": "new"}}], now=NOW, include_object="None",
                        headers=False)
    assert bare["rows"] == [{"cells": ["new", None, None, None]}]  # missing: empty, as real
    assert "columnDefinitions" not in bare


def test_a_terminating_pod_shows_terminating_and_its_restarts():
    pod = {"metadata": {"name": "w-0", "deletionTimestamp": "2026-11-25T11:59:00Z"},
           "spec": {"containers": [{"name": "w"}]},
           "status": {"phase": "Running", "containerStatuses": [
               {"ready": True, "restartCount": 3, "state": {"running": {}}}]}}
    row = tables.table(REGISTRY.resolve("v1/pods"), [pod], now=NOW)["rows"][0]["cells"]
    assert row == ["w-0", "1/1", "Terminating", 3, "<unknown>"]


def test_the_accept_header_kubectl_sends_asks_for_a_table():
    assert tables.wants_table("application/json;as=Table;v=v1;g=meta.k8s.io,application/json")
    assert not tables.wants_table("application/json")


def test_core_discovery_names_its_group_version_v1_and_lists_subresources_plainly():
    document = discovery.resource_list(REGISTRY, "", "v1")
    assert document is not None
    assert document["groupVersion"] == "v1"
    found = {r["name"]: r for r in document["resources"]}
    assert found["pods/status"] == {"name": "pods/status", "singularName": "",
                                    "namespaced": True, "kind": "Pod",
                                    "verbs": ["get", "patch", "update"]}
    assert found["configmaps"]["shortNames"] == ["cm"]
    kooper = discovery.resource_list(REGISTRY, "kooper.dev", "v1alpha1")
    assert kooper is not None
    scale = next(r for r in kooper["resources"] if r["name"] == "connectors/scale")
    assert (scale["group"], scale["version"], scale["kind"]) == ("autoscaling", "v1", "Scale")
    assert discovery.resource_list(REGISTRY, "example.com", "v1") is None


def test_openapi_v3_offers_field_validation_on_every_patch():
    index = discovery.openapi_index(REGISTRY)
    assert {"api/v1", "apis/apps/v1", "apis/kooper.dev/v1alpha1"} <= set(index["paths"])
    assert index["paths"]["api/v1"]["serverRelativeURL"].startswith("/openapi/v3/api/v1?hash=")
    document = discovery.openapi_document(REGISTRY, "apis/kooper.dev/v1alpha1")
    assert document is not None
    patches = [op["patch"] for op in document["paths"].values() if "patch" in op]
    assert {p["x-kubernetes-group-version-kind"]["kind"] for p in patches} == {
        "WorkerGroup", "Connector"}
    for patch in patches:
        assert {"name": "fieldValidation", "in": "query"}.items() <= patch["parameters"][0].items()
        assert "application/strategic-merge-patch+json" not in patch["requestBody"]["content"]
    assert discovery.openapi_document(REGISTRY, "apis/example.com/v1") is None


SCHEMA = {"type": "object", "properties": {
    "spec": {"type": "object", "properties": {
        "tasksMax": {"type": "integer"},
        "config": {"type": "object", "additionalProperties": {"type": "string"}},
        "extra": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
        "items": {"type": "array", "items": {"type": "object",
                                             "properties": {"name": {"type": "string"}}}},
    }},
}}


def test_unknown_fields_are_named_by_their_path():
    obj = {"apiVersion": "kooper.dev/v1alpha1", "kind": "Connector", "metadata": {"x": 1},
           "spec": {"tasksMax": 3, "tasksmax": 4, "config": {"any": "thing"},
                    "extra": {"free": {"form": 1}}, "items": [{"name": "a", "nmae": "b"}]},
           "sattus": {}}
    assert validation.unknown_fields(SCHEMA, obj) == [
        "spec.tasksmax", "spec.items[0].nmae", "sattus"]
    assert validation.unknown_fields(None, obj) == []
    assert validation.strict_error("Connector", "v1alpha1", ["spec.a"]) == (
        'Connector in version "v1alpha1" cannot be handled as a Connector: '
        'strict decoding error: unknown field "spec.a"')
