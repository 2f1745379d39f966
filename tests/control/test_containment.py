"""One Connector too large for a member's ConfigMap fails alone (``control.containment``)."""

from __future__ import annotations

import dataclasses

from kooper.control import connector_status, modelled, status, views
from kooper.control import step as control
from kooper.core import ids, model
from kooper.protocol import codec

W = ids.WorkerId
GROUP = "g"
SETTINGS = model.Settings(model.Protocol.COMPATIBLE, model.Policy.KOOPER, max_delay_ms=60_000)
BIG = {"blob": "x" * 600_000}


def connector(name: str, config: dict[str, str], generation: int = 1) -> views.ConnectorView:
    return views.ConnectorView(
        namespace=modelled.NAMESPACE, name=name, uid=f"uid-{name}", generation=generation,
        group=GROUP, tasks_max=1, config=config, state="running", restart="", status={})


def inputs(names: list[str], connectors: list[views.ConnectorView]) -> control.Inputs:
    members = {W(n): model.Member(W(n), incarnation="1") for n in names}
    pods, leases = modelled.Members(GROUP).views(members)
    return control.Inputs(group=modelled.group(GROUP, SETTINGS), pods=pods, leases=leases,
                          connectors=connectors)


def test_the_largest_connector_that_does_not_fit_is_rejected_and_the_rest_is_written():
    connectors = [connector("big-a", BIG), connector("big-b", BIG), connector("small", {})]
    decided = control.step(inputs(["w-0"], connectors), control.Memory(), now_ms=0)
    (doc,) = decided.configmap_writes
    codec.encode_assignment(doc)  # fits now
    assert doc.assigned.connectors == {"big-a", "small"}
    assert set(decided.memory.volatile.rejected) == {"big-b"}
    (event,) = [e for e in decided.events if e.reason == "ConnectorRejected"]
    assert (event.connector, event.warning) == ("big-b", True)
    assert "over the 1000000-byte ConfigMap budget" in event.message
    assert decided.metrics.rejected_resources == 2  # its instance and task
    assert decided.status is not None
    degraded = status.group_conditions(decided.status.facts)[2]
    assert (degraded.status, degraded.reason) == (True, "ConnectorRejected")
    assert decided.connectors is not None
    assert "big-b" in decided.connectors.rejected
    assert [c.name for c in decided.connectors.connectors] == ["big-a", "big-b", "small"]
    found = connector_status.connector_status(connectors[1], holders={}, owned={}, epochs={},
                                    group_exists=True,
                                    rejected=decided.connectors.rejected["big-b"])
    assert [(c.type, c.status, c.reason) for c in found["conditions"]] == [
        ("Ready", False, "Rejected"), ("Degraded", True, "Rejected")]
    # The next round keeps it out without trying again, and posts no second Event.
    again = control.step(inputs(["w-0"], connectors), decided.memory, now_ms=10)
    assert not [e for e in again.events if e.reason == "ConnectorRejected"]
    assert set(again.memory.volatile.rejected) == {"big-b"}


def test_a_rejection_is_tried_again_when_members_or_the_spec_change():
    connectors = [connector("big-a", BIG), connector("big-b", BIG)]
    first = control.step(inputs(["w-0"], connectors), control.Memory(), now_ms=0)
    assert set(first.memory.volatile.rejected) == {"big-b"}
    grown = control.step(inputs(["w-0", "w-1"], connectors), first.memory, now_ms=10)
    assert grown.memory.volatile.rejected == {}  # two members: one big connector each fits
    assert {c for w in grown.configmap_writes for c in w.assigned.connectors} >= {"big-b"}
    shrunk = [connectors[0], connector("big-b", {"blob": "small"}, generation=2)]
    fixed = control.step(inputs(["w-0"], shrunk), first.memory, now_ms=10)
    assert fixed.memory.volatile.rejected == {}


def test_a_write_failure_keeps_the_rejection_in_the_revised_step():
    connectors = [connector("big-a", BIG), connector("big-b", BIG)]
    decided = control.step(inputs(["w-0"], connectors), control.Memory(), now_ms=0)
    revised = decided.failed(frozenset({W("w-0")}))
    assert set(revised.memory.volatile.rejected) == {"big-b"}
    assert dataclasses.replace(revised, decision=None).metrics.rejected_resources == 2
