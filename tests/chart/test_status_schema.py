"""Every status field the operator writes has a schema, so the API server prunes nothing of
it and prunes everything else (only ``WorkerGroup.status.state`` is free-form)."""

from __future__ import annotations

import dataclasses
import re
from typing import Any

import pytest
from tests.chart import crdschema
from tests.control.test_grace import DELAY, T0, formed

from kooper.control import connector_status, failures, status, views
from kooper.core import ids, model

FREE_FORM = {"WorkerGroup": {"status.state"}, "Connector": set()}
REASON = re.compile(r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$")


def pruned(schema: dict[str, Any], value: Any, path: str) -> list[str]:
    """The paths the API server would prune from ``value`` (structural schema pruning)."""
    if schema.get("x-kubernetes-preserve-unknown-fields"):
        return []
    if isinstance(value, dict):
        found = []
        for key, sub in value.items():
            if key in schema.get("properties", {}):
                found += pruned(schema["properties"][key], sub, f"{path}.{key}")
            else:
                found.append(f"{path}.{key}")
        return found
    if isinstance(value, list):
        return [p for item in value for p in pruned(schema.get("items", {}), item, f"{path}[]")]
    return []


def preserved(schema: dict[str, Any], path: str = "") -> set[str]:
    found = {path} if schema.get("x-kubernetes-preserve-unknown-fields") else set()
    for key, sub in schema.get("properties", {}).items():
        found |= preserved(sub, f"{path}.{key}" if path else key)
    if "items" in schema:
        found |= preserved(schema["items"], f"{path}[]")
    return found


@pytest.mark.parametrize("kind", ["WorkerGroup", "Connector"])
def test_only_the_planner_state_is_free_form(crds, kind):
    assert preserved(crdschema.version_schema(crds[kind])) == FREE_FORM[kind]


def group_documents() -> list[dict[str, Any]]:
    """WorkerGroup statuses through every optional branch of ``status.group_status``."""
    group, _, _ = formed(model.Policy.KOOPER)
    del group.members[ids.WorkerId("w2")]
    first = group.settle(T0)
    assert first.status is not None
    assert first.status.state.delay is not None
    write = first.status
    plan = write.facts.plan
    held = dataclasses.replace(plan, state=dataclasses.replace(
        plan.state, backoff=model.RevocationBackoff(True, 3, T0 + DELAY)))
    busy = dataclasses.replace(write, facts=dataclasses.replace(
        write.facts, plan=held, paced=4, max_moves=2, problems=(("UnknownClaim", "x"),)),
        adaptive_status={"mode": "learning", "graceSeconds": 300.0, "returnsObserved": 1,
                         "handoffsObserved": 0, "expectedReturnSeconds": 12.5,
                         "expectedHandoffSeconds": 0.5})
    documents = [w.document(encoded={"any": {"thing": [1]}}, previous={})
                 for w in (write, busy)]
    assert {"delay", "balancing", "revocationBackoff", "adaptive"} <= set(documents[1])
    assert documents[0]["delay"]["departures"]
    return documents


def connector_documents() -> list[dict[str, Any]]:
    """Connector statuses through every optional branch of ``status.connector_status``."""
    connector = views.parse_connector({"metadata": {"name": "c", "namespace": "n"},
                                       "spec": {"workerGroup": "g", "tasksMax": 3}})
    record = failures.Record(connector="c", member="w0", error="boom", restarts=2,
                             next_at_ms=T0)
    failed = {"c": failures.entry(record, worker="w0"), "c-1": failures.entry(record,
                                                                           worker="w0")}
    assert failed["c"]["state"] == "Failed"
    built = [
        connector_status.connector_status(
            connector, holders={"c-0": "w0", "c-1": "w0"}, owned={"c-0": "w0"},
            epochs={"c": 1, "c-0": 2}, group_exists=True, instances={"c": "w0"},
            failed=failed, restart=connector_status.restart_record("r1", now_ms=T0, generation=3),
            task_restart="0,1"),
        connector_status.connector_status(connector, holders={}, owned={}, epochs={},
                                group_exists=False),
        connector_status.connector_status(connector, holders={}, owned={}, epochs={},
                                group_exists=True, rejected="too large"),
    ]
    assert "instance" in built[0]
    assert "restart" in built[0]
    assert "taskRestart" in built[0]
    return [connector_status.settle_connector_status(s, previous={}, generation=1, now_ms=T0)
            for s in built]


@pytest.mark.parametrize(("kind", "documents"), [("WorkerGroup", group_documents),
                                                 ("Connector", connector_documents)])
def test_every_status_field_the_operator_writes_survives_pruning_and_validates(
        crds, kind, documents):
    schema = crdschema.version_schema(crds[kind])
    for document in documents():
        assert pruned(schema["properties"]["status"], document, "status") == []
        spec = {"workerGroup": "g"} if kind == "Connector" else {
            "selector": {"matchLabels": {"a": "b"}}}
        obj = {"apiVersion": "kooper.dev/v1alpha1", "kind": kind, "metadata": {"name": "x"},
               "spec": spec, "status": document}
        assert crdschema.admit(crds[kind], obj)[1] == []
        for condition in document["conditions"]:
            assert REASON.fullmatch(condition["reason"]), condition


def test_an_unknown_status_field_is_pruned(crds):
    schema = crdschema.version_schema(crds["WorkerGroup"])["properties"]["status"]
    assert pruned(schema, {"members": {"count": 1, "extra": 1}, "futureField": 1},
                  "status") == ["status.members.extra", "status.futureField"]


def test_a_condition_the_crd_would_refuse_is_a_bug_caught_where_it_is_made():
    with pytest.raises(ValueError, match="not CamelCase"):
        status.Condition("Ready", True, "not ok", "")
    (long,) = status.conditions([status.Condition("Ready", True, "Fine", "x" * 40_000)],
                                previous=(), generation=1, now="2030-01-01T00:00:00Z")
    assert len(long["message"]) == status.MESSAGE_MAX
    assert set(long) == {"type", "status", "reason", "message", "lastTransitionTime",
                         "observedGeneration"}
