"""Listing with label and field selectors."""

import urllib.parse

import pytest
from tests.emulator.apiclient import CM

from kooper.emulator import selectors


@pytest.fixture
def labelled(api):
    for name, labels in [("a", {"app": "x", "tier": "1"}), ("b", {"app": "y"}),
                         ("c", {"tier": "2"}), ("d", {})]:
        api.post(CM, {"metadata": {"name": name, "labels": labels}})
    api.post("/api/v1/namespaces", {"metadata": {"name": "other"}})
    api.post("/api/v1/namespaces/other/configmaps",
             {"metadata": {"name": "a", "labels": {"app": "x"}}})
    return api


@pytest.mark.parametrize(("selector", "expected"), [
    ("app=x", ["a"]),
    ("app==x", ["a"]),
    ("app!=x", ["b", "c", "d"]),
    ("app in (x, y)", ["a", "b"]),
    ("app notin (x)", ["b", "c", "d"]),
    ("tier", ["a", "c"]),
    ("!tier", ["b", "d"]),
    ("app=x,tier", ["a"]),
    ("app in (x,y),!tier", ["b"]),
    ("", ["a", "b", "c", "d"]),
])
def test_label_selectors_filter_the_list(labelled, selector, expected):
    query = urllib.parse.urlencode({"labelSelector": selector})
    status, body = labelled.get(f"{CM}?{query}")
    assert status == 200
    assert sorted(item["metadata"]["name"] for item in body["items"]) == expected


def test_field_selectors_on_name_and_namespace(labelled):
    items = labelled.get("/api/v1/configmaps?fieldSelector=metadata.name%3Da")[1]["items"]
    assert sorted(i["metadata"]["namespace"] for i in items) == ["default", "other"]
    items = labelled.get("/api/v1/configmaps?fieldSelector=metadata.namespace%3Dother")[1]["items"]
    assert [i["metadata"]["name"] for i in items] == ["a"]
    query = urllib.parse.urlencode({"fieldSelector": "metadata.name!=a,metadata.namespace=default"})
    items = labelled.get(f"{CM}?{query}")[1]["items"]
    assert sorted(i["metadata"]["name"] for i in items) == ["b", "c", "d"]


def test_namespaced_list_sees_one_namespace_and_cluster_list_sees_all(labelled):
    assert len(labelled.get(CM)[1]["items"]) == 4
    assert len(labelled.get("/api/v1/configmaps")[1]["items"]) == 5
    body = labelled.get("/api/v1/namespaces")[1]
    assert {"default", "kube-system", "other"} <= {i["metadata"]["name"] for i in body["items"]}
    assert body["kind"] == "NamespaceList"


def test_a_selector_that_does_not_parse_answers_400(api):
    query = urllib.parse.urlencode({"labelSelector": "a in (x"})
    assert api.get(f"{CM}?{query}")[0] == 400
    query = urllib.parse.urlencode({"fieldSelector": "metadata.name"})
    assert api.get(f"{CM}?{query}")[0] == 400


def test_not_equal_and_notin_match_objects_without_the_label():
    assert selectors.parse_labels("a!=1")[0].matches({})
    assert selectors.parse_labels("a notin (1)")[0].matches({"b": "1"})
    assert not selectors.parse_labels("a in (1)")[0].matches({})
