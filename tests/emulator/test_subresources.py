"""The status and scale subresources."""

from tests.emulator.apiclient import CONN, WG


def test_create_drops_status_for_kinds_with_a_status_subresource(api):
    obj = api.post(WG, {"metadata": {"name": "g"}, "spec": {}, "status": {"members": 3}})[1]
    assert "status" not in obj


def test_main_endpoint_ignores_status_changes(api):
    api.post(WG, {"metadata": {"name": "g"}, "spec": {}})
    api.merge(f"{WG}/g/status", {"status": {"protocol": "eager"}})
    obj = api.merge(f"{WG}/g", {"spec": {"protocol": "eager"}, "status": {"protocol": "x"}})[1]
    assert obj["status"] == {"protocol": "eager"}
    assert obj["spec"] == {"protocol": "eager"}
    full = api.get(f"{WG}/g")[1]
    assert api.put(f"{WG}/g", dict(full, status={"forged": True}))[1]["status"] == {
        "protocol": "eager"}


def test_status_endpoint_writes_status_only(api):
    api.post(WG, {"metadata": {"name": "g"}, "spec": {"protocol": "eager"}})
    obj = api.merge(f"{WG}/g/status", {"spec": {"protocol": "compatible"},
                                       "metadata": {"labels": {"x": "y"}},
                                       "status": {"rebalanceGeneration": 4}})[1]
    assert obj["spec"] == {"protocol": "eager"}
    assert "labels" not in obj["metadata"]
    assert obj["status"] == {"rebalanceGeneration": 4}
    assert api.get(f"{WG}/g/status")[1]["status"] == {"rebalanceGeneration": 4}


def test_status_put_with_a_stale_resource_version_conflicts(api):
    created = api.post(WG, {"metadata": {"name": "g"}, "spec": {}})[1]
    api.merge(f"{WG}/g", {"spec": {"protocol": "eager"}})
    status, _ = api.put(f"{WG}/g/status", dict(created, status={"x": 1}))
    assert status == 409


def test_scale_subresource_maps_replicas_to_tasks_max(api):
    api.post(CONN, {"metadata": {"name": "c"}, "spec": {"workerGroup": "g", "tasksMax": 3}})
    api.merge(f"{CONN}/c/status", {"status": {"taskCount": 2}})
    status, scale = api.get(f"{CONN}/c/scale")
    assert status == 200
    assert scale["kind"] == "Scale"
    assert scale["apiVersion"] == "autoscaling/v1"
    assert scale["spec"] == {"replicas": 3}
    assert scale["status"] == {"replicas": 2}
    status, scale = api.merge(f"{CONN}/c/scale", {"spec": {"replicas": 7}})
    assert status == 200
    assert scale["spec"]["replicas"] == 7
    obj = api.get(f"{CONN}/c")[1]
    assert obj["spec"]["tasksMax"] == 7
    assert obj["metadata"]["generation"] == 2


def test_scale_put_checks_the_resource_version_and_replicas(api):
    api.post(CONN, {"metadata": {"name": "c"}, "spec": {"tasksMax": 1}})
    scale = api.get(f"{CONN}/c/scale")[1]
    assert api.put(f"{CONN}/c/scale", dict(scale, spec={"replicas": 4}))[0] == 200
    assert api.put(f"{CONN}/c/scale", dict(scale, spec={"replicas": 5}))[0] == 409
    assert api.merge(f"{CONN}/c/scale", {"spec": {"replicas": -1}})[0] == 422


def test_kinds_without_a_scale_subresource_answer_404_on_scale(api):
    api.post(WG, {"metadata": {"name": "g"}, "spec": {}})
    assert api.get(f"{WG}/g/scale")[0] == 404
