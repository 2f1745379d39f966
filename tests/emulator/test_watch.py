"""Watch streams: replay, resumption from a resourceVersion, selectors, timeouts."""

import threading
import time
import urllib.parse

from tests.emulator import apiclient
from tests.emulator.apiclient import CM

from kooper.emulator import cluster


def test_watch_without_resource_version_starts_with_added_for_existing_objects(api):
    api.post(CM, {"metadata": {"name": "a"}})
    api.post(CM, {"metadata": {"name": "b"}})
    events = api.watch(f"{CM}?watch=true&timeoutSeconds=1")
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [
        ("ADDED", "a"), ("ADDED", "b")]


def test_watch_from_a_list_resource_version_sends_only_newer_events(api):
    api.post(CM, {"metadata": {"name": "old"}})
    listed_rv = api.get(CM)[1]["metadata"]["resourceVersion"]
    created = api.post(CM, {"metadata": {"name": "new"}})[1]
    modified = api.merge(f"{CM}/new", {"data": {"k": "v"}})[1]
    deleted = api.delete(f"{CM}/new")[1]
    events = api.watch(f"{CM}?watch=true&resourceVersion={listed_rv}", count=3)
    assert [e["type"] for e in events] == ["ADDED", "MODIFIED", "DELETED"]
    assert [e["object"]["metadata"]["resourceVersion"] for e in events] == [
        created["metadata"]["resourceVersion"], modified["metadata"]["resourceVersion"],
        deleted["metadata"]["resourceVersion"]]
    assert int(events[2]["object"]["metadata"]["resourceVersion"]) > int(
        events[1]["object"]["metadata"]["resourceVersion"])


def test_live_watch_receives_changes_made_while_it_is_open(emulated, api):
    rv = api.get(CM)[1]["metadata"]["resourceVersion"]
    received = []

    def reader():
        received.extend(api.watch(f"{CM}?watch=true&resourceVersion={rv}", count=2))

    thread = threading.Thread(target=reader)
    thread.start()
    deadline = time.monotonic() + 5
    while emulated.open_watches("configmaps") == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    api.post(CM, {"metadata": {"name": "live"}})
    emulated.patch("configmaps", "live", {"data": {"via": "direct store access"}},
                   namespace="default")
    thread.join(5)
    assert [e["type"] for e in received] == ["ADDED", "MODIFIED"]
    assert received[1]["object"]["data"] == {"via": "direct store access"}


def test_watch_with_a_label_selector_turns_label_changes_into_added_and_deleted(api):
    rv = api.get(CM)[1]["metadata"]["resourceVersion"]
    api.post(CM, {"metadata": {"name": "a"}})
    api.merge(f"{CM}/a", {"metadata": {"labels": {"app": "x"}}})
    api.merge(f"{CM}/a", {"data": {"k": "v"}})
    api.merge(f"{CM}/a", {"metadata": {"labels": {"app": "y"}}})
    api.post(CM, {"metadata": {"name": "b", "labels": {"app": "y"}}})
    query = urllib.parse.urlencode({"watch": "true", "resourceVersion": rv,
                                    "labelSelector": "app=x", "timeoutSeconds": "1"})
    events = api.watch(f"{CM}?{query}")
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [
        ("ADDED", "a"), ("MODIFIED", "a"), ("DELETED", "a")]


def test_watch_of_one_namespace_ignores_others(api):
    api.post("/api/v1/namespaces", {"metadata": {"name": "other"}})
    rv = api.get(CM)[1]["metadata"]["resourceVersion"]
    api.post("/api/v1/namespaces/other/configmaps", {"metadata": {"name": "x"}})
    api.post(CM, {"metadata": {"name": "y"}})
    events = api.watch(f"{CM}?watch=true&resourceVersion={rv}&timeoutSeconds=1")
    assert [e["object"]["metadata"]["name"] for e in events] == ["y"]
    all_events = api.watch(f"/api/v1/configmaps?watch=true&resourceVersion={rv}&timeoutSeconds=1")
    assert [e["object"]["metadata"]["name"] for e in all_events] == ["x", "y"]


def test_watch_ends_after_timeout_seconds(api):
    started = time.monotonic()
    assert api.watch(f"{CM}?watch=true&timeoutSeconds=1") == []
    # The server ended it (the client would wait 5 s): at least the second it was given.
    assert time.monotonic() - started >= 0.9


def test_watch_from_a_compacted_resource_version_answers_410_gone():
    with cluster.EmulatedCluster(history_limit=3) as small:
        api = apiclient.Api(small.url)
        for i in range(6):
            api.post(CM, {"metadata": {"name": f"cm{i}"}})
        events = api.watch(f"{CM}?watch=true&resourceVersion=1", count=2)
        assert len(events) == 1
        assert events[0]["type"] == "ERROR"
        assert events[0]["object"]["code"] == 410


def test_send_initial_events_ends_with_a_bookmark(api):
    api.post(CM, {"metadata": {"name": "a"}})
    events = api.watch(f"{CM}?watch=true&sendInitialEvents=true&timeoutSeconds=1")
    assert [e["type"] for e in events] == ["ADDED", "BOOKMARK"]
    annotations = events[1]["object"]["metadata"]["annotations"]
    assert annotations == {"k8s.io/initial-events-end": "true"}


def test_watching_one_named_object(api):
    rv = api.get(CM)[1]["metadata"]["resourceVersion"]
    api.post(CM, {"metadata": {"name": "a"}})
    api.post(CM, {"metadata": {"name": "b"}})
    events = api.watch(f"{CM}/b?watch=true&resourceVersion={rv}&timeoutSeconds=1")
    assert [e["object"]["metadata"]["name"] for e in events] == ["b"]
