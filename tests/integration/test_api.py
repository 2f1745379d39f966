"""The CRDs and the API machinery, as the real kube-apiserver enforces them."""

from __future__ import annotations

import json
import urllib.request

import pytest
import yaml
from tests.integration.conftest import ROOT, get_json, refused

from kooper.sdk import apierrors

pytestmark = [pytest.mark.realk8s, pytest.mark.usefixtures("crds")]


def group(**spec):
    base = {"selector": {"matchLabels": {"app": "w"}}}
    return yaml.safe_dump({"apiVersion": "kooper.dev/v1alpha1", "kind": "WorkerGroup",
                           "metadata": {"name": "g"}, "spec": {**base, **spec}})


def test_the_examples_are_valid_for_the_real_server(k, namespace):
    out = k.kubectl("apply", "-n", namespace, "--dry-run=server", "-f", str(ROOT / "examples"))
    assert "workergroup.kooper.dev/demo created (server dry run)" in out
    assert "statefulset.apps/kooper-demo-worker created (server dry run)" in out


def test_a_policy_outside_the_enum_is_refused_with_the_servers_message(k, namespace):
    err = refused(k, "apply", "-n", namespace, "-f", "-", input_text=group(policy="kip-415"))
    assert 'spec.policy: Unsupported value: "kip-415": supported values: "kooper", "kip415"' in err


def test_a_negative_delay_is_refused(k, namespace):
    err = refused(k, "apply", "-n", namespace, "-f", "-",
                  input_text=group(scheduledRebalanceMaxDelay="-5s"))
    assert "spec.scheduledRebalanceMaxDelay" in err
    assert "should match" in err or "at least 0s" in err


@pytest.mark.parametrize("delay", ["100ns", "500us", "0", "5"])
def test_a_delay_outside_the_one_duration_language_is_refused(k, namespace, delay):
    err = refused(k, "apply", "-n", namespace, "-f", "-",
                  input_text=group(scheduledRebalanceMaxDelay=delay))
    assert "spec.scheduledRebalanceMaxDelay" in err


def test_a_workergroup_name_longer_than_a_label_value_is_refused(k, namespace):
    # The name is the kooper.dev/group label on its members' ConfigMaps.
    text = group().replace("name: g\n", f"name: {'g' * 64}\n")
    err = refused(k, "apply", "-n", namespace, "-f", "-", input_text=text)
    assert "a WorkerGroup name must be at most 63 characters" in err
    k.kubectl("apply", "-n", namespace, "--dry-run=server", "-f", "-",
              input_text=text.replace("g" * 64, "g" * 63))


@pytest.mark.parametrize(("selector", "field"), [
    ({"matchLabels": {"bad key!": "w"}}, "spec.selector.matchLabels"),
    ({"matchExpressions": [{"key": "app", "operator": "In"}]},
     "spec.selector.matchExpressions[0]"),
])
def test_a_selector_kubernetes_would_refuse_is_refused(k, namespace, selector, field):
    err = refused(k, "apply", "-n", namespace, "-f", "-", input_text=group(selector=selector))
    assert f"{field}: Invalid value" in err


def _status(k, namespace, document):
    k.kubectl("apply", "-n", namespace, "-f", "-", input_text=group())
    return k.kubectl("patch", "-n", namespace, "workergroup", "g", "--subresource=status",
                     "--type=merge", "-p", json.dumps({"status": document}), "-o", "json")


def test_the_operators_status_is_kept_and_anything_else_pruned(k, namespace):
    from tests.chart.test_status_schema import group_documents

    document = group_documents()[1]
    stored = json.loads(_status(k, namespace, {**document, "futureField": 1}))["status"]
    assert "futureField" not in stored
    assert stored == document


def test_a_condition_without_a_reason_or_with_a_bad_one_is_refused(k, namespace):
    good = {"type": "Ready", "status": "True", "reason": "Balanced", "message": "",
            "lastTransitionTime": "2030-01-01T00:00:00Z"}
    _status(k, namespace, {"conditions": [good]})
    for bad in ({k: v for k, v in good.items() if k != "reason"}, {**good, "reason": "not ok"},
                {**good, "type": "not ok"}):
        err = refused(k, "patch", "-n", namespace, "workergroup", "g", "--subresource=status",
                      "--type=merge", "-p", json.dumps({"status": {"conditions": [bad]}}))
        assert "status.conditions[0]" in err


def test_defaults_are_filled_in_and_printer_columns_shown(k, namespace):
    k.kubectl("apply", "-n", namespace, "-f", "-", input_text=group())
    spec = get_json(k, "-n", namespace, "workergroup", "g")["spec"]
    assert (spec["protocol"], spec["policy"], spec["scheduledRebalanceMaxDelay"]) == (
        "compatible", "kooper", "300s")
    header = k.kubectl("get", "-n", namespace, "wg").splitlines()[0].split()
    assert header[:3] == ["NAME", "MEMBERS", "TASKS"]
    assert "PROTOCOL" in header


def connector(**spec):
    return yaml.safe_dump({"apiVersion": "kooper.dev/v1alpha1", "kind": "Connector",
                           "metadata": {"name": "c"}, "spec": {"workerGroup": "g", **spec}})


def test_connector_state_is_camel_case_by_default_and_the_older_lowercase_still_stored(
        k, namespace):
    k.kubectl("apply", "-n", namespace, "-f", "-", input_text=connector())
    assert get_json(k, "-n", namespace, "connector", "c")["spec"]["state"] == "Running"
    header, row = k.kubectl("get", "-n", namespace, "kconn", "c").splitlines()
    assert "STATE" in header.split()
    assert "Running" in row.split()  # the printer column (no status yet: empty columns)
    for state in ("Paused", "stopped"):  # stopped: as a Connector stored by an earlier kooper
        k.kubectl("apply", "-n", namespace, "-f", "-", input_text=connector(state=state))
        assert get_json(k, "-n", namespace, "connector", "c")["spec"]["state"] == state
    err = refused(k, "apply", "-n", namespace, "-f", "-", input_text=connector(state="PAUSED"))
    assert 'spec.state: Unsupported value: "PAUSED"' in err


def test_a_connector_status_an_earlier_kooper_wrote_stays_valid_next_to_the_new_states(
        k, namespace):
    k.kubectl("apply", "-n", namespace, "-f", "-", input_text=connector(tasksMax=2))
    older = {"tasks": [{"id": "c-0", "state": "RUNNING"}, {"id": "c-1", "state": "FAILED"}]}
    newer = {"tasks": [{"id": "c-0", "state": "Running"}, {"id": "c-1", "state": "Failed"}]}
    for document in (older, newer):
        stored = json.loads(k.kubectl(
            "patch", "-n", namespace, "connector", "c", "--subresource=status",
            "--type=merge", "-p", json.dumps({"status": document}), "-o", "json"))["status"]
        assert stored["tasks"] == document["tasks"]
    # An older status stays updatable: a later patch of another field is admitted.
    k.kubectl("patch", "-n", namespace, "connector", "c", "--subresource=status",
              "--type=merge", "-p", json.dumps({"status": older}))
    k.kubectl("patch", "-n", namespace, "connector", "c", "--subresource=status",
              "--type=merge", "-p", json.dumps({"status": {"running": 1}}))
    err = refused(k, "patch", "-n", namespace, "connector", "c", "--subresource=status",
                  "--type=merge", "-p",
                  json.dumps({"status": {"tasks": [{"id": "c-0", "state": "failed"}]}}))
    assert "status.tasks[0].state" in err


def test_kubectl_explain_reads_the_published_schema(k):
    out = k.kubectl("explain", "workergroup.spec.scheduledRebalanceMaxDelay")
    assert "scheduled.rebalance.max.delay.ms" in out


def test_a_watch_from_a_compacted_version_ends_with_410_gone(cluster, admin, namespace):
    # PodTemplates are not in the API server's watch cache here: the watch goes to etcd.
    path = f"/api/v1/namespaces/{namespace}/podtemplates"
    template = {"template": {"spec": {"containers": [{"name": "c", "image": "kooper"}]}}}
    old = admin.create(path, {"metadata": {"name": "old"}, **template})
    old_version = old["metadata"]["resourceVersion"]
    admin.merge_patch(f"{path}/old", {"metadata": {"labels": {"a": "1"}}})
    # etcd compacts its history past that version, as the API server does every 5 minutes.
    latest = admin.create(path, {"metadata": {"name": "new"}, **template})
    latest = latest["metadata"]["resourceVersion"]
    compact = urllib.request.Request(
        f"{cluster.etcd_url}/v3/kv/compaction", method="POST",
        data=json.dumps({"revision": latest, "physical": True}).encode())
    with urllib.request.urlopen(compact, timeout=30) as answer:
        assert answer.status == 200
    stream = admin.watch(path, query={"resourceVersion": old_version}, read_timeout_s=60)
    events = list(stream)
    assert events, "the server sent nothing"
    assert events[0]["type"] == "ERROR"
    assert events[0]["object"]["code"] == 410


def test_a_watch_with_bookmarks_marks_the_end_of_the_initial_events(admin, namespace):
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    admin.create(path, {"metadata": {"name": "one"}, "data": {"a": "1"}})
    query = {"allowWatchBookmarks": "true", "sendInitialEvents": "true",
             "resourceVersionMatch": "NotOlderThan", "resourceVersion": "",
             "timeoutSeconds": "20"}
    stream = admin.watch(path, query=query, read_timeout_s=30)
    seen = []
    for event in stream:
        seen.append(event["type"])
        annotations = event["object"]["metadata"].get("annotations") or {}
        if event["type"] == "BOOKMARK" and annotations.get("k8s.io/initial-events-end"):
            stream.close()
            break
    assert "ADDED" in seen
    assert seen[-1] == "BOOKMARK"


def test_a_stale_update_is_a_409_conflict(admin, namespace):
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    created = admin.create(path, {"metadata": {"name": "c"}, "data": {"a": "1"}})
    admin.merge_patch(f"{path}/c", {"data": {"a": "2"}})
    with pytest.raises(apierrors.ApiError) as info:
        admin.request("PUT", f"{path}/c", body=created)
    assert info.value.status == 409

