"""A Connector's config or state change reaches the members that run it (a document
is applied only when its generation is newer, and an unchanged assignment writes
nothing: found by the drills, where a patched ``stop.ms`` never reached a worker)."""

from __future__ import annotations

import dataclasses

from tests.control.test_control_step import inputs, member, settle

from kooper.control import restore
from kooper.control import step as control
from kooper.core import model
from kooper.protocol import codec


def with_connectors(members: list[model.Member], **changes: object) -> control.Inputs:
    base = inputs(members, connectors={"A": 2, "B": 2})
    found = [dataclasses.replace(c, **changes) if c.name == "A" else c for c in base.connectors]
    return dataclasses.replace(base, connectors=found)


def settled() -> tuple[control.Step, list[model.Member]]:
    members = [member("a"), member("b")]
    memory = control.Memory()
    for now in (0, 10, 20):
        decided = control.step(with_connectors(members), memory, now_ms=now)
        members, memory = settle(decided, members), decided.memory
    return decided, members


def runs(resources: model.ConnectorsAndTasks, connector: str) -> bool:
    return connector in resources.connectors or any(
        model.task_connector(t) == connector for t in resources.tasks)


def test_a_changed_config_rewrites_exactly_the_members_running_the_connector():
    last, members = settled()
    decided = control.step(with_connectors(members, config={"stop.ms": "3000"}), last.memory,
                           now_ms=30)
    running_a = sorted(m.id for m in members if runs(m.owned, "A"))
    assert running_a
    assert sorted(w.member for w in decided.configmap_writes) == running_a
    for write in decided.configmap_writes:
        assert write.configs["A"] == {"stop.ms": "3000"}
        assert write.generation > last.memory.persisted.state.generation  # the worker applies it
    again = control.step(with_connectors(settle(decided, members), config={"stop.ms": "3000"}),
                         decided.memory, now_ms=40)
    assert again.configmap_writes == ()  # once written, not again


def test_pausing_a_connector_reaches_its_members():
    last, members = settled()
    decided = control.step(with_connectors(members, state="paused"), last.memory, now_ms=30)
    assert decided.configmap_writes
    assert all(w.states.get("A") == "paused" for w in decided.configmap_writes)


def test_a_restarted_operator_sends_a_config_changed_while_it_was_away():
    members = [member("a"), member("b")]
    memory, documents = control.Memory(), {}
    for now in (0, 10, 20):
        decided = control.step(with_connectors(members), memory, now_ms=now)
        documents.update({w.member: codec.encode_assignment(w) for w in decided.configmap_writes})
        members, memory = settle(decided, members), decided.memory
    # A new leader knows only what the members' ConfigMaps carry: the old config.
    restored = restore.restore(None, documents.items(), group="g")
    assert restored.settings["A"] == ({}, None)  # running: no state entry
    fresh = control.Memory.of(state=restored.state, settings_written=restored.settings)
    decided = control.step(with_connectors(members, config={"k": "v"}), fresh, now_ms=30)
    assert decided.configmap_writes
    assert all(w.configs["A"] == {"k": "v"} for w in decided.configmap_writes)
