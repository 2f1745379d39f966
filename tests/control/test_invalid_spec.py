"""A WorkerGroup spec admitted by an older CRD but unusable (``GroupView.invalid``): bad
input like the others, reported once per bad value; nothing planned, nothing written."""

from __future__ import annotations

import dataclasses

from kooper.control import modelled, status, views
from kooper.control import step as control
from kooper.core import ids, model

NAME = "g"
WHY = views.parse_group({"metadata": {"name": NAME},
                         "spec": {"scheduledRebalanceMaxDelay": "100ns"}}).invalid


def inputs(*, invalid: str = WHY, group_status: dict[str, object] | None = None
           ) -> control.Inputs:
    members = {ids.WorkerId("w-0"): model.Member(ids.WorkerId("w-0"), incarnation="i0")}
    pods, leases = modelled.Members(NAME).views(members)
    group = dataclasses.replace(modelled.group(NAME, model.Settings(), status=group_status),
                                invalid=invalid)
    return control.Inputs(group=group, pods=pods, leases=leases,
                          connectors=modelled.connectors(NAME, {"A": 2}))


def test_the_view_names_the_field_and_the_value():
    assert WHY.startswith("spec.scheduledRebalanceMaxDelay: '100ns' is not a duration")


def test_an_invalid_spec_plans_nothing_and_writes_only_its_conditions():
    decided = control.step(inputs(), control.Memory(), now_ms=0)
    assert (decided.plan, decided.writes, decided.wake_at_ms) == (None, (), None)
    assert [(c.type, c.status, c.reason) for c in decided.refused] == [
        ("Ready", False, "InvalidSpec"), ("Degraded", True, "InvalidSpec")]
    assert all(c.message.startswith(WHY) for c in decided.refused)
    (event,) = decided.events
    assert (event.reason, event.warning, event.connector) == ("InvalidSpec", True, "")
    assert decided.metrics.bad_input == ("InvalidSpec",)


def test_the_same_bad_value_is_reported_once_then_each_new_one_once():
    first = control.step(inputs(), control.Memory(), now_ms=0)
    again = control.step(inputs(), first.memory, now_ms=1_000)
    assert again.refused == first.refused
    assert (again.events, again.metrics.bad_input) == ((), ())
    other = WHY.replace("100ns", "500us")
    changed = control.step(inputs(invalid=other), again.memory, now_ms=2_000)
    assert [e.reason for e in changed.events] == ["InvalidSpec"]
    assert "'500us'" in changed.events[0].message


def test_a_restarted_operator_does_not_report_a_condition_already_persisted():
    first = control.step(inputs(), control.Memory(), now_ms=0)
    persisted = status.conditions(first.refused, previous=(), generation=1,
                                  now=views.format_time(0))
    restarted = control.step(inputs(group_status={"conditions": persisted}),
                             control.Memory(), now_ms=5_000)
    assert restarted.refused == first.refused
    assert (restarted.events, restarted.metrics.bad_input) == ((), ())


def test_fixing_the_spec_plans_and_forgets_the_report():
    refused = control.step(inputs(), control.Memory(), now_ms=0)
    fixed = control.step(inputs(invalid=""), refused.memory, now_ms=1_000)
    assert fixed.plan is not None
    assert not fixed.refused
    assert not any(e[0] == "InvalidSpec" for e in fixed.memory.volatile.reported.entries)
    broken_again = control.step(inputs(), fixed.memory, now_ms=2_000)
    assert [e.reason for e in broken_again.events] == ["InvalidSpec"]
