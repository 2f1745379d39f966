"""Bad input gets a condition and/or an Event in plain English; the operator keeps serving."""

from __future__ import annotations

import json
import logging
import time

import prometheus_client
from tests.shell.conftest import (
    condition,
    events,
    group_status,
    make_connector,
    make_group,
    settled,
    wait_for,
)

from kooper.core import model


def _connector_condition(emulated, name, kind):
    body = emulated.get("connectors", name, namespace="default") or {}
    return condition(body.get("status") or {}, kind)


def _bad_input_count(reason):
    return prometheus_client.REGISTRY.get_sample_value(
        "kooper_bad_inputs_total", {"reason": reason}) or 0.0


def test_connector_naming_a_missing_group_is_flagged_and_others_keep_running(
        emulated, fleet, operator):
    counted = _bad_input_count("WorkerGroupNotFound")
    make_group(emulated)
    make_connector(emulated, "A", 2)
    make_connector(emulated, "lost", 3, group="nope")
    fleet.add("w-0")
    wait_for(lambda: settled(fleet, emulated, resources=3, members=1), what="settle")
    ready = wait_for(lambda: _connector_condition(emulated, "lost", "Ready"), what="condition")
    assert ready["status"] == "False"
    assert ready["reason"] == "WorkerGroupNotFound"
    assert "'nope'" in ready["message"]
    event = wait_for(lambda: events(emulated, "WorkerGroupNotFound"), what="event")[0]
    assert event["involvedObject"]["kind"] == "Connector"
    assert event["type"] == "Warning"
    # Counted like every other bad input, once per Connector and missing group.
    wait_for(lambda: _bad_input_count("WorkerGroupNotFound") == counted + 1, what="the count")
    emulated.patch("connectors", "lost", {"spec": {"tasksMax": 4}}, namespace="default")
    time.sleep(0.5)
    assert _bad_input_count("WorkerGroupNotFound") == counted + 1


def test_selector_matching_no_pod_degrades_the_group(emulated, fleet, operator):
    make_group(emulated, "empty", labels={"app": "nobody"})
    make_connector(emulated, "A", 2, group="empty")
    status = wait_for(lambda: (s := group_status(emulated, "empty")).get("conditions") and s,
                      what="status")
    degraded = condition(status, "Degraded")
    assert degraded["status"] == "True"
    assert degraded["reason"] == "SelectorMatchesNoPods"
    assert condition(status, "Ready")["status"] == "False"
    assert status["unassigned"] == 3
    wait_for(lambda: events(emulated, "SelectorMatchesNoPods"), what="event")


def test_malformed_and_oversized_reports_are_ignored_with_an_event(emulated, fleet, operator):
    make_group(emulated)
    make_connector(emulated, "A", 4)
    fleet.add("w-0")
    fleet.add("w-1")
    wait_for(lambda: settled(fleet, emulated, resources=5, members=2), what="settle")
    before = fleet.owned()
    fleet.members["w-1"].applying = False
    fleet.set_annotation("w-1", "{not json")
    wait_for(lambda: events(emulated, "MalformedReport"), what="malformed event")
    fleet.set_annotation("w-1", json.dumps({"version": 1, "pad": "x" * 300_000}))
    wait_for(lambda: len(events(emulated, "MalformedReport")) >= 2, what="oversized event")
    # The member keeps its work (its last good report still stands) and the group is served.
    status = group_status(emulated)
    assert status["members"]["count"] == 2
    assert condition(status, "Degraded")["reason"] == "MalformedReport"
    assert fleet.owned() == before
    fleet.members["w-1"].applying = True
    fleet.push_report("w-1")
    wait_for(lambda: condition(group_status(emulated), "Degraded")["status"] == "False",
             what="recovered")


def test_configmap_edited_by_hand_is_rewritten(emulated, fleet, operator):
    make_group(emulated)
    make_connector(emulated, "A", 2)
    fleet.add("w-0")
    wait_for(lambda: settled(fleet, emulated, resources=3, members=1), what="settle")
    def document() -> dict[str, object] | None:
        """w-0's document as written, without its generation (which a rewrite bumps: the
        worker may have accepted whatever was there, and ignores a generation not newer
        than one it accepted); None while it is not one of the operator's."""
        body = emulated.get("configmaps", "kooper-w-0", namespace="default") or {}
        found = json.loads((body.get("data") or {}).get("assignment.json", "{}"))
        generations.append(found.pop("generation", -1))
        return found or None

    generations: list[object] = []
    original = document()
    emulated.patch("configmaps", "kooper-w-0", {"data": {"assignment.json": "{}"}},
                   namespace="default")
    wait_for(lambda: document() == original, what="rewritten")
    wait_for(lambda: events(emulated, "ConfigMapEdited"), what="event")
    emulated.delete("configmaps", "kooper-w-0", namespace="default")
    wait_for(lambda: document() == original, what="recreated")
    assert generations[-1] > generations[0]


def test_member_claiming_work_it_was_never_given_is_flagged_and_revoked(
        emulated, fleet, operator):
    make_group(emulated)
    make_connector(emulated, "A", 4)
    fleet.add("w-0")
    fleet.add("w-1")
    wait_for(lambda: settled(fleet, emulated, resources=5, members=2), what="settle")
    theirs = next(iter(fleet.owned()["w-0"].tasks))
    before = fleet.members["w-1"].history[-1].generation
    fleet.members["w-1"].extra_claims = model.ConnectorsAndTasks.of(tasks=[theirs])
    fleet.push_report("w-1")
    event = wait_for(lambda: events(emulated, "UnknownClaim"), what="event")[0]
    assert theirs in event["message"]
    # The claim is revoked from the claimant only (a newer document without it: the
    # assigned set is a full replacement); the task's owner keeps it.
    wait_for(lambda: any(doc.generation > before and theirs not in doc.assigned
                         for doc in fleet.members["w-1"].history),
             what="revoked from the claimant")
    assert not any(theirs in doc.revoked for doc in fleet.members["w-0"].history)
    fleet.members["w-1"].extra_claims = model.EMPTY
    fleet.push_report("w-1")
    wait_for(lambda: settled(fleet, emulated, resources=5, members=2), what="settled again")


def _invalid_spec_count():
    return prometheus_client.REGISTRY.get_sample_value(
        "kooper_bad_inputs_total", {"reason": "InvalidSpec"}) or 0.0


def _odd_configmaps(emulated):
    return [cm for cm in emulated.list("configmaps", namespace="default")
            if (cm["metadata"].get("labels") or {}).get("kooper.dev/group") == "odd"]


def test_a_max_delay_an_older_crd_admitted_fails_that_group_alone_until_it_is_fixed(
        emulated, fleet, operator, caplog):
    caplog.set_level(logging.WARNING, logger="kooper.shell")
    counted = _invalid_spec_count()
    # The emulator checks no patterns: like a CRD from before durations.PATTERN, it stores it.
    make_group(emulated, "odd", delay="100ns")
    make_connector(emulated, "B", 2, group="odd")
    make_group(emulated)
    make_connector(emulated, "A", 2)
    fleet.add("w-0")
    wait_for(lambda: settled(fleet, emulated, resources=3, members=1), what="the good group")
    degraded = wait_for(lambda: condition(group_status(emulated, "odd"), "Degraded"),
                        what="the odd group's condition")
    assert (degraded["status"], degraded["reason"]) == ("True", "InvalidSpec")
    assert "spec.scheduledRebalanceMaxDelay: '100ns' is not a duration" in degraded["message"]
    assert condition(group_status(emulated, "odd"), "Ready")["reason"] == "InvalidSpec"
    assert "delay" not in group_status(emulated, "odd")  # nothing planned from a guess
    # More rounds of the same bad spec: no second Event, no second count, no retries.
    runner = operator.shell.runners[("default", "odd")]
    steps = runner.steps_run
    for tasks in (3, 4, 5):  # a Connector spec change pokes its group's runner
        emulated.patch("connectors", "B", {"spec": {"tasksMax": tasks}}, namespace="default")
        time.sleep(0.2)
    wait_for(lambda: runner.steps_run >= steps + 2, what="more steps of the odd group")
    (event,) = wait_for(lambda: events(emulated, "InvalidSpec"), what="the Event")
    assert event["type"] == "Warning"
    assert (event["involvedObject"]["kind"], event["involvedObject"]["name"]) == (
        "WorkerGroup", "odd")
    assert "'100ns'" in event["message"]
    assert _invalid_spec_count() == counted + 1
    assert runner.round_failures == 0
    assert _odd_configmaps(emulated) == []
    assert not [r for r in caplog.records if r.exc_info or "round failed" in r.getMessage()]
    # Another bad value is another bad input: reported once more.
    emulated.patch("workergroups", "odd", {"spec": {"scheduledRebalanceMaxDelay": "500us"}},
                   namespace="default")
    wait_for(lambda: len(events(emulated, "InvalidSpec")) == 2, what="the second Event")
    wait_for(lambda: "'500us'" in condition(group_status(emulated, "odd"), "Degraded")
             ["message"], what="the condition names the new value")
    assert _invalid_spec_count() == counted + 2
    emulated.patch("workergroups", "odd", {"spec": {"scheduledRebalanceMaxDelay": "0s"}},
                   namespace="default")
    wait_for(lambda: condition(group_status(emulated, "odd"), "Degraded").get("status")
             == "False", what="the fixed group converges")
    assert group_status(emulated, "odd")["conditions"]
    assert len(events(emulated, "InvalidSpec")) == 2


def test_a_warning_of_a_round_whose_status_write_failed_is_posted_by_its_retry(
        emulated, fleet, operator):
    # The round that first sees the malformed report fails at its status write (409 on
    # each of the writer's five tries), so it posts none of its Events; the report is
    # still malformed when the round is retried, and the retry posts the warning.
    make_group(emulated)
    make_connector(emulated, "A", 4)
    fleet.add("w-0")
    fleet.add("w-1")
    wait_for(lambda: settled(fleet, emulated, resources=5, members=2), what="settle")
    fleet.members["w-1"].applying = False
    emulated.fail_next_writes("workergroups", 5, code=409)
    fleet.set_annotation("w-1", "{not json")
    wait_for(lambda: emulated.pending_failures("workergroups") == 0, what="the failed writes")
    wait_for(lambda: events(emulated, "MalformedReport"), what="malformed event")


def test_a_deleted_groups_connectors_say_their_group_is_gone(emulated, fleet, operator):
    make_group(emulated)
    make_connector(emulated, "A", 2)
    fleet.add("w-0")
    wait_for(lambda: settled(fleet, emulated, resources=3, members=1), what="settle")
    wait_for(lambda: _connector_condition(emulated, "A", "Ready").get("status") == "True",
             what="ready")
    emulated.delete("workergroups", "wg", namespace="default")
    ready = wait_for(lambda: (found := _connector_condition(emulated, "A", "Ready"))
                     .get("reason") == "WorkerGroupNotFound" and found, what="not found")
    assert ready["status"] == "False"
    wait_for(lambda: events(emulated, "WorkerGroupNotFound"), what="event")


def test_a_missing_group_is_flagged_on_its_connector_after_a_failed_write(emulated, operator):
    """The API fails the Connector status write that says its WorkerGroup does not exist
    (a 503 of an API server restarting). Nothing else happens to the Connector, so no
    event ever called ``connector_seen`` again: the condition was never written. The
    write is now retried (backing off) until it lands."""
    emulated.fail_next_writes("connectors", 1, code=503)
    make_connector(emulated, "lost", 3, group="nope")
    wait_for(lambda: emulated.pending_failures("connectors") == 0, what="the failed write")
    ready = wait_for(lambda: _connector_condition(emulated, "lost", "Ready"), what="condition")
    assert ready["reason"] == "WorkerGroupNotFound"
    wait_for(lambda: events(emulated, "WorkerGroupNotFound"), what="event")


def test_an_invalid_spec_is_reported_on_the_group_after_a_failed_write(emulated, operator):
    """The API fails the status write that says the spec is invalid (a 503). The round
    had nothing else to do, asked for no wake-up, and nothing else pokes a group with no
    pods: the condition was never written. It is now retried, backing off, until it
    lands."""
    emulated.fail_next_writes("workergroups", 1, code=503)
    make_group(emulated, "odd", delay="100ns")
    wait_for(lambda: emulated.pending_failures("workergroups") == 0, what="the failed write")
    degraded = wait_for(lambda: condition(group_status(emulated, "odd"), "Degraded"),
                        what="the condition")
    assert (degraded["status"], degraded["reason"]) == ("True", "InvalidSpec")


def test_a_configmap_whose_group_label_was_removed_is_relabelled(emulated, fleet, operator):
    """Someone removes ``kooper.dev/group`` from a member's ConfigMap: the operator's
    index no longer lists it, so every round read it again by name, found the text its
    own, and left the label off (an operator restarted then found no document there)."""
    make_group(emulated)
    make_connector(emulated, "A", 2)
    fleet.add("w-0")
    wait_for(lambda: settled(fleet, emulated, resources=3, members=1), what="settle")
    body = emulated.get("configmaps", "kooper-w-0", namespace="default")
    del body["metadata"]["labels"]["kooper.dev/group"]
    emulated.replace("configmaps", "kooper-w-0", body, namespace="default")
    runner = operator.quiet_after(1)
    steps = runner.steps_run
    make_connector(emulated, "Z", 1, group="elsewhere")  # a round that moves nothing
    wait_for(lambda: runner.steps_run > steps, what="a round")
    wait_for(lambda: emulated.get("configmaps", "kooper-w-0", namespace="default")
             ["metadata"]["labels"].get("kooper.dev/group") == "wg", what="relabelled")
    wait_for(lambda: settled(fleet, emulated, resources=3, members=1), what="settled again")


def _dropped_events():
    return prometheus_client.REGISTRY.get_sample_value("kooper_events_dropped_total") or 0.0


def test_an_event_the_api_server_failed_to_post_is_posted_again(emulated, operator):
    """Two 503s (an API server restarting) on the InvalidSpec Event: it is tried again,
    backing off, and lands; nothing is counted as dropped."""
    dropped = _dropped_events()
    emulated.fail_next_writes("events", 2, code=503)
    make_group(emulated, "odd", delay="100ns")
    wait_for(lambda: emulated.pending_failures("events") == 0, what="the failed posts")
    wait_for(lambda: events(emulated, "InvalidSpec"), what="the Event")
    assert _dropped_events() == dropped


def test_an_event_the_api_server_refused_is_counted_as_dropped(emulated, operator):
    """A 403 (the operator's role lost ``events/create``) will not change on a retry: the
    Event is dropped, logged and counted; the group's condition is still written."""
    dropped = _dropped_events()
    emulated.fail_next_writes("events", 1, code=403)
    make_group(emulated, "odd", delay="100ns")
    wait_for(lambda: _dropped_events() == dropped + 1, what="the dropped Event")
    degraded = wait_for(lambda: condition(group_status(emulated, "odd"), "Degraded"),
                        what="the condition")
    assert degraded["reason"] == "InvalidSpec"
    assert not events(emulated, "InvalidSpec")
