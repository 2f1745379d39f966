"""Containment on the real operator: a Connector too large for its member's ConfigMap
fails alone while the group keeps rebalancing; failing rounds back off and say so."""

from __future__ import annotations

import logging
import re

from prometheus_client import REGISTRY
from tests.shell.conftest import (
    NS,
    condition,
    events,
    group_status,
    make_connector,
    make_group,
    wait_for,
)

LABELS = {"namespace": NS, "workergroup": "wg"}


def conditions_of(emulated, name):
    body = emulated.get("connectors", name, namespace=NS) or {}
    return body.get("status") or {}


def test_connectors_that_overflow_a_members_configmap_fail_alone(emulated, fleet, operator):
    errors_before = REGISTRY.get_sample_value("kooper_round_failures_total", LABELS) or 0.0
    make_group(emulated)
    big = [f"big-{n:02}" for n in range(16)]  # 16 x 63,000 characters: over 1,000,000 bytes
    for name in big:
        emulated.create("connectors", {"metadata": {"name": name}, "spec": {
            "workerGroup": "wg", "tasksMax": 0, "config": {"blob": "x" * 63_000}}},
            namespace=NS)
    make_connector(emulated, "ok", 2)
    fleet.add("w-0")

    def rejected():
        return [n for n in big
                if condition(conditions_of(emulated, n), "Degraded").get("reason") == "Rejected"]

    wait_for(lambda: len(rejected()) == 1, what="one connector rejected")
    (name,) = rejected()
    assert name == "big-15"  # the largest config, then the last name
    message = condition(conditions_of(emulated, name), "Ready")["message"]
    assert "over the 1000000-byte ConfigMap budget" in message
    wait_for(lambda: fleet.owned().get("w-0") and fleet.owned()["w-0"].connectors
             == {*big[:15], "ok"} and len(fleet.owned()["w-0"].tasks) == 2,
             what="everything else runs")
    found = wait_for(lambda: [e for e in events(emulated, "ConnectorRejected")], what="Event")
    assert [e["involvedObject"]["name"] for e in found] == ["big-15"]
    wait_for(lambda: condition(group_status(emulated), "Degraded").get("reason")
             == "ConnectorRejected", what="group Degraded")
    assert REGISTRY.get_sample_value("kooper_rejected_resources", LABELS) == 1
    # The group is not frozen: a new connector is placed.
    make_connector(emulated, "late", 1)
    wait_for(lambda: "late" in fleet.owned()["w-0"].connectors, what="late placed")
    assert (REGISTRY.get_sample_value("kooper_round_failures_total", LABELS) or 0.0) \
        == errors_before
    # A second member: the rejection is tried again, and now everything fits.
    fleet.add("w-1")
    wait_for(lambda: not rejected() and sum(
        len(o.connectors) for o in fleet.owned().values()) == 18, what="all placed")


def test_failing_rounds_back_off_exponentially_and_degrade_the_group(
        emulated, fleet, operator, caplog):
    caplog.set_level(logging.ERROR, logger="kooper.shell")
    make_group(emulated)
    make_connector(emulated, "A", 2)
    fleet.add("w-0")
    fleet.add("w-1")
    wait_for(lambda: emulated.get("configmaps", "kooper-w-1", namespace=NS),
             what="w-1's ConfigMap")
    wait_for(lambda: condition(group_status(emulated), "Ready").get("status") == "True",
             what="ready")
    emulated.fail_next_writes("configmaps", 3, code=500, verbs={"delete"})
    fleet.kill("w-1")  # its ConfigMap must go first, and cannot, three times
    wait_for(lambda: condition(group_status(emulated), "Degraded").get("reason")
             == "RoundFailed", what="RoundFailed")
    wait_for(lambda: emulated.get("configmaps", "kooper-w-1", namespace=NS) is None,
             timeout=30, what="the deletion finally went through")
    delays = [float(m.group(2)) for r in caplog.records
              if (m := re.search(r"round failed \((\d+) in a row\); retrying in ([\d.]+)s",
                                 r.getMessage()))]
    assert delays[:3] == [0.3, 0.6, 1.2]
    wait_for(lambda: condition(group_status(emulated), "Degraded").get("reason")
             != "RoundFailed", what="recovered")
    # The count is reset once the round that wrote the status has returned: an event
    # of its own (the status is visible in the API a moment before).
    wait_for(lambda: operator.shell.runners[(NS, "wg")].round_failures == 0,
             what="the failure count reset by the round that succeeded")
