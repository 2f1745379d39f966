"""Deletion: finalizers, cascading garbage collection, preconditions, collections."""

import pytest
from tests.emulator.apiclient import CM, LEASES, PODS, WG


def owner_ref(obj, kind):
    return {"apiVersion": obj["apiVersion"], "kind": kind, "name": obj["metadata"]["name"],
            "uid": obj["metadata"]["uid"]}


def test_finalizers_hold_the_object_with_a_deletion_timestamp_until_removed(api):
    api.post(WG, {"metadata": {"name": "g", "finalizers": ["kooper.dev/finalizer"]}, "spec": {}})
    status, marked = api.delete(f"{WG}/g")
    assert status == 200
    assert marked["metadata"]["deletionTimestamp"]
    assert marked["metadata"]["generation"] == 2
    assert api.get(f"{WG}/g")[1]["metadata"]["deletionTimestamp"]
    # A second delete changes nothing while finalizers remain.
    again = api.delete(f"{WG}/g")[1]
    assert again["metadata"]["resourceVersion"] == marked["metadata"]["resourceVersion"]
    status, _ = api.merge(f"{WG}/g", {"metadata": {"finalizers": None}})
    assert status == 200
    assert api.get(f"{WG}/g")[0] == 404


def test_no_new_finalizers_while_deleting(api):
    api.post(CM, {"metadata": {"name": "a", "finalizers": ["x"]}})
    api.delete(f"{CM}/a")
    status, body = api.merge(f"{CM}/a", {"metadata": {"finalizers": ["x", "y"]}})
    assert status == 422
    assert body["reason"] == "Invalid"


def test_deleting_a_pod_deletes_the_leases_it_owns(api):
    pod = api.post(PODS, {"metadata": {"name": "w-0"}, "spec": {}})[1]
    api.post(LEASES, {"metadata": {"name": "kooper-w-0", "ownerReferences": [
        owner_ref(pod, "Pod")]}, "spec": {"holderIdentity": "w-0/1"}})
    api.post(LEASES, {"metadata": {"name": "unrelated"}, "spec": {}})
    api.delete(f"{PODS}/w-0")
    assert api.get(f"{LEASES}/kooper-w-0")[0] == 404
    assert api.get(f"{LEASES}/unrelated")[0] == 200


def test_deleting_a_worker_group_deletes_its_config_maps_and_their_dependents(api):
    group = api.post(WG, {"metadata": {"name": "g"}, "spec": {}})[1]
    for pod in ("w-0", "w-1"):
        cm = api.post(CM, {"metadata": {"name": f"kooper-{pod}", "ownerReferences": [
            owner_ref(group, "WorkerGroup")]}})[1]
    api.post(CM, {"metadata": {"name": "grandchild", "ownerReferences": [
        owner_ref(cm, "ConfigMap")]}})
    api.delete(f"{WG}/g")
    names = [i["metadata"]["name"] for i in api.get(CM)[1]["items"]]
    assert names == []


def test_a_dependent_with_another_live_owner_survives_and_loses_the_dead_reference(api):
    a = api.post(CM, {"metadata": {"name": "a"}})[1]
    b = api.post(CM, {"metadata": {"name": "b"}})[1]
    api.post(CM, {"metadata": {"name": "child", "ownerReferences": [
        owner_ref(a, "ConfigMap"), owner_ref(b, "ConfigMap")]}})
    api.delete(f"{CM}/a")
    child = api.get(f"{CM}/child")[1]
    assert [r["name"] for r in child["metadata"]["ownerReferences"]] == ["b"]
    api.delete(f"{CM}/b")
    assert api.get(f"{CM}/child")[0] == 404


def test_a_dependent_with_finalizers_is_only_marked_by_the_collector(api):
    owner = api.post(CM, {"metadata": {"name": "owner"}})[1]
    api.post(CM, {"metadata": {"name": "child", "finalizers": ["f"], "ownerReferences": [
        owner_ref(owner, "ConfigMap")]}})
    api.delete(f"{CM}/owner")
    assert api.get(f"{CM}/child")[1]["metadata"]["deletionTimestamp"]
    api.merge(f"{CM}/child", {"metadata": {"finalizers": []}})
    assert api.get(f"{CM}/child")[0] == 404


def test_finalized_owner_collects_dependents_only_when_finally_removed(api):
    owner = api.post(WG, {"metadata": {"name": "g", "finalizers": ["f"]}, "spec": {}})[1]
    api.post(CM, {"metadata": {"name": "child", "ownerReferences": [
        owner_ref(owner, "WorkerGroup")]}})
    api.delete(f"{WG}/g")
    assert api.get(f"{CM}/child")[0] == 200
    api.json_patch(f"{WG}/g", [{"op": "remove", "path": "/metadata/finalizers"}])
    assert api.get(f"{CM}/child")[0] == 404


def test_orphan_propagation_keeps_dependents(api):
    owner = api.post(CM, {"metadata": {"name": "owner"}})[1]
    api.post(CM, {"metadata": {"name": "child", "ownerReferences": [
        owner_ref(owner, "ConfigMap")]}})
    api.delete(f"{CM}/owner", {"propagationPolicy": "Orphan"})
    assert "ownerReferences" not in api.get(f"{CM}/child")[1]["metadata"]


@pytest.mark.parametrize("field", ["uid", "resourceVersion"])
def test_delete_preconditions_that_do_not_hold_conflict(api, field):
    api.post(CM, {"metadata": {"name": "a"}})
    status, _ = api.delete(f"{CM}/a", {"preconditions": {field: "999"}})
    assert status == 409
    assert api.get(f"{CM}/a")[0] == 200


def test_deleting_a_namespace_deletes_its_objects(api):
    api.post("/api/v1/namespaces", {"metadata": {"name": "gone"}})
    api.post("/api/v1/namespaces/gone/configmaps", {"metadata": {"name": "a"}})
    api.post(CM, {"metadata": {"name": "kept"}})
    api.delete("/api/v1/namespaces/gone")
    assert api.get("/api/v1/namespaces/gone/configmaps/a")[0] == 404
    assert api.get("/api/v1/namespaces/gone")[0] == 404
    assert api.get(f"{CM}/kept")[0] == 200


def test_delete_collection_with_a_label_selector(api):
    api.post(CM, {"metadata": {"name": "a", "labels": {"x": "1"}}})
    api.post(CM, {"metadata": {"name": "b", "labels": {"x": "1"}}})
    api.post(CM, {"metadata": {"name": "c"}})
    status, body = api.delete(f"{CM}?labelSelector=x%3D1")
    assert status == 200
    assert sorted(i["metadata"]["name"] for i in body["items"]) == ["a", "b"]
    assert [i["metadata"]["name"] for i in api.get(CM)[1]["items"]] == ["c"]
