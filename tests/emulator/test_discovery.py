"""API discovery: what kopf reads before it watches anything."""

import pathlib
import textwrap

from tests.emulator import apiclient

from kooper.emulator import cluster, resources


def names(document):
    return {r["name"]: r for r in document["resources"]}


def test_core_v1_lists_namespaces_pods_configmaps_and_events(api):
    assert api.get("/api") == (200, {"kind": "APIVersions", "versions": ["v1"]})
    status, doc = api.get("/api/v1")
    assert status == 200
    found = names(doc)
    assert {"namespaces", "pods", "configmaps", "events", "pods/status"} <= set(found)
    assert found["namespaces"]["namespaced"] is False
    assert found["pods"]["namespaced"] is True
    assert "watch" in found["pods"]["verbs"]


def test_groups_include_coordination_apps_events_and_kooper(api):
    status, doc = api.get("/apis")
    assert status == 200
    groups = {g["name"]: g for g in doc["groups"]}
    for group in ("coordination.k8s.io", "apps", "events.k8s.io", "kooper.dev"):
        assert group in groups
    assert groups["kooper.dev"]["preferredVersion"]["version"] == "v1alpha1"
    status, doc = api.get("/apis/kooper.dev")
    assert status == 200
    assert doc["name"] == "kooper.dev"


def test_kooper_group_serves_workergroups_and_connectors_with_subresources(api):
    status, doc = api.get("/apis/kooper.dev/v1alpha1")
    assert status == 200
    found = names(doc)
    assert {"workergroups", "workergroups/status", "connectors", "connectors/status",
            "connectors/scale"} == set(found)
    assert found["workergroups"]["kind"] == "WorkerGroup"
    assert found["connectors"]["shortNames"] == ["kconn"]
    assert found["workergroups"]["categories"] == ["kooper"]
    status, doc = api.get("/apis/coordination.k8s.io/v1")
    assert "leases" in names(doc)


def test_unknown_resource_answers_a_404_status(api):
    status, body = api.get("/apis/example.com/v1/widgets")
    assert status == 404
    assert body["kind"] == "Status"
    assert body["reason"] == "NotFound"


CRD = textwrap.dedent("""\
    apiVersion: apiextensions.k8s.io/v1
    kind: CustomResourceDefinition
    metadata: {name: widgets.example.com}
    spec:
      group: example.com
      scope: Cluster
      names: {plural: widgets, singular: widget, kind: Widget, shortNames: [wd]}
      versions:
        - name: v1
          served: true
          storage: true
          subresources:
            status: {}
            scale: {specReplicasPath: .spec.size, statusReplicasPath: .status.size}
          schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
    ---
    apiVersion: v1
    kind: ConfigMap
    metadata: {name: not-a-crd}
    """)


def test_crds_loaded_from_yaml_are_discoverable_and_served(tmp_path):
    path = tmp_path / "widgets.yaml"
    path.write_text(CRD)
    specs = resources.load_crds([path])
    assert specs == [resources.ResourceSpec(
        "example.com", "v1", "widgets", "Widget", namespaced=False, status=True, scale=True,
        spec_replicas_path=".spec.size", status_replicas_path=".status.size",
        short_names=("wd",))]
    with cluster.EmulatedCluster(crds=[path]) as emulated:
        api = apiclient.Api(emulated.url)
        assert "widgets/scale" in names(api.get("/apis/example.com/v1")[1])
        status, obj = api.post("/apis/example.com/v1/widgets",
                               {"metadata": {"name": "w"}, "spec": {"size": 3}})
        assert status == 201
        assert "namespace" not in obj["metadata"]
        assert api.get("/apis/example.com/v1/widgets/w/scale")[1]["spec"]["replicas"] == 3
        # Without the kooper CRD files the built-in contract kinds are not added.
        assert api.get("/apis/kooper.dev/v1alpha1")[0] == 404


def test_a_kind_registered_at_runtime_is_discoverable(emulated, api):
    emulated.register(resources.ResourceSpec("example.com", "v2", "gadgets", "Gadget"))
    assert "gadgets" in names(api.get("/apis/example.com/v2")[1])
    assert api.post("/apis/example.com/v2/namespaces/default/gadgets",
                    {"metadata": {"name": "g"}})[0] == 201


def test_the_project_crds_match_the_contract_kinds_served_without_them():
    root = pathlib.Path(__file__).resolve().parents[2]
    loaded = resources.load_crds(sorted((root / "crds").glob("*.yaml")))
    assert sorted(loaded, key=lambda s: s.plural) == sorted(resources.KOOPER_CRDS,
                                                            key=lambda s: s.plural)
