"""Object semantics: identity, resourceVersion, generation, conflicts."""

from tests.emulator.apiclient import CM, CONN, WG


def test_create_stamps_uid_timestamp_generation_and_resource_version(api):
    status, obj = api.post(CM, {"metadata": {"name": "a"}, "data": {"k": "v"}})
    assert status == 201
    meta = obj["metadata"]
    assert meta["namespace"] == "default"
    assert len(meta["uid"]) == 36
    assert meta["creationTimestamp"].endswith("Z")
    assert meta["generation"] == 1
    assert int(meta["resourceVersion"]) > 0
    assert obj["apiVersion"] == "v1"
    assert obj["kind"] == "ConfigMap"
    assert api.get(f"{CM}/a") == (200, obj)


def test_resource_version_grows_on_every_write_across_kinds(api):
    versions = [int(api.post(CM, {"metadata": {"name": "a"}})[1]["metadata"]["resourceVersion"])]
    versions.append(int(api.post(WG, {"metadata": {"name": "g"}, "spec": {}})[1]
                        ["metadata"]["resourceVersion"]))
    versions.append(int(api.merge(f"{CM}/a", {"data": {"x": "1"}})[1]
                        ["metadata"]["resourceVersion"]))
    versions.append(int(api.delete(f"{WG}/g")[1]["metadata"]["resourceVersion"]))
    assert versions == sorted(versions)
    assert len(set(versions)) == 4
    assert int(api.get(CM)[1]["metadata"]["resourceVersion"]) == versions[-1]


def test_creating_an_existing_name_answers_409_already_exists(api):
    api.post(CM, {"metadata": {"name": "a"}})
    status, body = api.post(CM, {"metadata": {"name": "a"}})
    assert status == 409
    assert (body["kind"], body["reason"], body["details"]["name"]) == ("Status", "AlreadyExists",
                                                                        "a")


def test_missing_objects_answer_404_status_on_every_verb(api):
    for status, body in (api.get(f"{CM}/nope"), api.merge(f"{CM}/nope", {}),
                         api.put(f"{CM}/nope", {"metadata": {"name": "nope"}}),
                         api.delete(f"{CM}/nope")):
        assert status == 404
        assert body["reason"] == "NotFound"
        assert body["code"] == 404


def test_generate_name_gets_a_random_suffix(api):
    status, obj = api.post(CM, {"metadata": {"generateName": "cm-"}})
    assert status == 201
    assert obj["metadata"]["name"].startswith("cm-")
    assert len(obj["metadata"]["name"]) == 8
    assert api.post(CM, {"metadata": {}})[0] == 422


def test_generation_bumps_on_spec_changes_only(api):
    api.post(WG, {"metadata": {"name": "g"}, "spec": {"protocol": "eager"}})
    obj = api.merge(f"{WG}/g", {"metadata": {"labels": {"a": "b"}}})[1]
    assert obj["metadata"]["generation"] == 1
    obj = api.merge(f"{WG}/g/status", {"status": {"protocol": "eager"}})[1]
    assert obj["metadata"]["generation"] == 1
    obj = api.merge(f"{WG}/g", {"spec": {"protocol": "compatible"}})[1]
    assert obj["metadata"]["generation"] == 2


def test_a_write_that_changes_nothing_keeps_the_resource_version(api):
    created = api.post(CM, {"metadata": {"name": "a"}, "data": {"k": "v"}})[1]
    same = api.merge(f"{CM}/a", {"data": {"k": "v"}})[1]
    assert same["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]


def test_put_with_a_stale_resource_version_answers_409_conflict(api):
    created = api.post(CM, {"metadata": {"name": "a"}, "data": {"k": "1"}})[1]
    api.merge(f"{CM}/a", {"data": {"k": "2"}})
    stale = dict(created, data={"k": "3"})
    status, body = api.put(f"{CM}/a", stale)
    assert status == 409
    assert body["reason"] == "Conflict"
    fresh = api.get(f"{CM}/a")[1]
    status, obj = api.put(f"{CM}/a", dict(fresh, data={"k": "3"}))
    assert status == 200
    assert obj["data"] == {"k": "3"}
    assert obj["metadata"]["uid"] == created["metadata"]["uid"]


def test_patch_with_a_stale_resource_version_answers_409_conflict(api):
    created = api.post(CONN, {"metadata": {"name": "c"}, "spec": {"tasksMax": 1}})[1]
    api.merge(f"{CONN}/c", {"spec": {"tasksMax": 2}})
    rv = created["metadata"]["resourceVersion"]
    status, body = api.merge(f"{CONN}/c", {"metadata": {"resourceVersion": rv},
                                          "spec": {"tasksMax": 5}})
    assert status == 409
    assert body["reason"] == "Conflict"
    assert api.get(f"{CONN}/c")[1]["spec"]["tasksMax"] == 2


def test_put_cannot_change_server_owned_metadata(api):
    created = api.post(CM, {"metadata": {"name": "a"}})[1]
    body = {"metadata": {"name": "a", "uid": "forged", "creationTimestamp": "2000-01-01T00:00:00Z",
                         "generation": 99}, "data": {"k": "v"}}
    obj = api.put(f"{CM}/a", body)[1]
    assert obj["metadata"]["uid"] == created["metadata"]["uid"]
    assert obj["metadata"]["creationTimestamp"] == created["metadata"]["creationTimestamp"]
    assert obj["metadata"]["generation"] == 2
    assert api.put(f"{CM}/a", {"metadata": {"name": "other"}})[0] == 400


def test_namespace_in_body_must_match_the_url(api):
    status, body = api.post(CM, {"metadata": {"name": "a", "namespace": "other"}})
    assert status == 400
    assert body["reason"] == "BadRequest"
