"""Patch formats: JSON patch (with kopf's resourceVersion test), merge and strategic merge."""

import pytest
from tests.emulator.apiclient import CM, WG

from kooper.emulator import patches


def test_json_patch_with_a_failed_test_op_answers_422(api):
    obj = api.post(WG, {"metadata": {"name": "g"}, "spec": {}})[1]
    api.merge(f"{WG}/g", {"metadata": {"labels": {"bump": "1"}}})
    ops = [{"op": "test", "path": "/metadata/resourceVersion",
            "value": obj["metadata"]["resourceVersion"]},
           {"op": "add", "path": "/metadata/finalizers", "value": ["kooper.dev/finalizer"]}]
    status, body = api.json_patch(f"{WG}/g", ops)
    assert status == 422
    assert body["reason"] == "Invalid"
    assert "finalizers" not in api.get(f"{WG}/g")[1]["metadata"]


def test_json_patch_with_a_passing_test_op_applies_every_op(api):
    obj = api.post(CM, {"metadata": {"name": "a"}, "data": {"k": "v", "gone": "x"}})[1]
    ops = [{"op": "test", "path": "/metadata/resourceVersion",
            "value": obj["metadata"]["resourceVersion"]},
           {"op": "add", "path": "/data/new", "value": "n"},
           {"op": "remove", "path": "/data/gone"},
           {"op": "replace", "path": "/data/k", "value": "w"}]
    status, patched = api.json_patch(f"{CM}/a", ops)
    assert status == 200
    assert patched["data"] == {"k": "w", "new": "n"}


def test_merge_patch_removes_keys_set_to_null_and_replaces_lists(api):
    api.post(CM, {"metadata": {"name": "a", "finalizers": ["x", "y"]}, "data": {"k": "v"}})
    patched = api.merge(f"{CM}/a", {"data": {"k": None, "n": "1"},
                                    "metadata": {"finalizers": ["y"]}})[1]
    assert patched["data"] == {"n": "1"}
    assert patched["metadata"]["finalizers"] == ["y"]


def test_strategic_merge_patch_is_applied_like_a_merge_patch(api):
    api.post(CM, {"metadata": {"name": "a"}, "data": {"k": "v"}})
    status, patched = api.call("PATCH", f"{CM}/a", {"data": {"s": "1"}},
                               "application/strategic-merge-patch+json")
    assert status == 200
    assert patched["data"] == {"k": "v", "s": "1"}


def test_apply_patch_creates_then_merges(api):
    status, created = api.call("PATCH", f"{CM}/applied", {"data": {"a": "1"}},
                               "application/apply-patch+yaml")
    assert status == 200
    assert created["metadata"]["name"] == "applied"
    patched = api.call("PATCH", f"{CM}/applied", {"data": {"b": "2"}},
                       "application/apply-patch+yaml")[1]
    assert patched["data"] == {"a": "1", "b": "2"}


def test_patch_with_an_unknown_content_type_answers_415(api):
    api.post(CM, {"metadata": {"name": "a"}})
    assert api.call("PATCH", f"{CM}/a", {"data": {}}, "application/json")[0] == 415


def test_malformed_json_patch_answers_400(api):
    api.post(CM, {"metadata": {"name": "a"}})
    assert api.json_patch(f"{CM}/a", {"op": "add"})[0] == 400
    assert api.json_patch(f"{CM}/a", [{"op": "frobnicate", "path": "/x"}])[0] == 400


def test_json_patch_move_copy_and_list_indexes():
    doc = {"a": [1, 2, 3], "b": {"c": "d"}}
    result = patches.json_patch(doc, [
        {"op": "add", "path": "/a/-", "value": 4},
        {"op": "add", "path": "/a/0", "value": 0},
        {"op": "remove", "path": "/a/1"},
        {"op": "copy", "from": "/b/c", "path": "/e"},
        {"op": "move", "from": "/b", "path": "/f"},
        {"op": "add", "path": "/g~1h", "value": "escaped"},
    ])
    assert result == {"a": [0, 2, 3, 4], "e": "d", "f": {"c": "d"}, "g/h": "escaped"}
    assert doc == {"a": [1, 2, 3], "b": {"c": "d"}}


@pytest.mark.parametrize("ops", [
    [{"op": "remove", "path": "/missing"}],
    [{"op": "replace", "path": "/missing", "value": 1}],
    [{"op": "add", "path": "/a/9", "value": 1}],
    [{"op": "test", "path": "/a/0", "value": 2}],
])
def test_json_patch_failures_are_not_malformed(ops):
    with pytest.raises(patches.PatchError) as info:
        patches.json_patch({"a": [1]}, ops)
    assert not info.value.malformed
