"""The simulator and the operator run the same controller step.

Rounds recorded from simulator runs are replayed through the operator's own
``GroupRunner.round`` (its views and API client replaced by the recorded inputs and
a recording client): the ConfigMaps it writes, the planner state it persists and the
ConfigMaps it deletes are exactly the simulator's, round by round.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any

import pytest

from kooper.control import state, views
from kooper.control import step as control
from kooper.protocol import codec, messages
from kooper.shell import audit, rounds
from kooper.sim import chaos, runner, scenarios


class RecordedViews:
    """``rounds.Views`` answering with one recorded round's inputs."""

    def __init__(self, inputs: control.Inputs) -> None:
        self.inputs = inputs

    def group(self, namespace: str, name: str) -> views.GroupView | None:
        return self.inputs.group

    def pods(self, namespace: str) -> Iterable[views.PodView]:
        return self.inputs.pods

    def leases(self, namespace: str) -> Iterable[views.LeaseView]:
        return self.inputs.leases

    def released(self, namespace: str) -> Iterable[views.LeaseView]:
        return self.inputs.released

    def groups_of(self, namespace: str) -> Iterable[views.GroupView]:
        return [self.inputs.group, *self.inputs.others]

    def connectors(self, namespace: str, group: str) -> Iterable[views.ConnectorView]:
        return self.inputs.connectors

    def configmaps(self, namespace: str, group: str) -> Iterable[views.ConfigMapView]:
        return self.inputs.configmaps.values()


class RecordingClient:
    """The API calls a round makes, in order; owners answer as recorded."""

    def __init__(self, owners: dict[control.Owner, control.OwnerFacts],
                 rollouts: dict[control.Owner, control.RolloutFacts] | None = None) -> None:
        self.owners = owners
        self.rollouts = rollouts or {}
        self.calls: list[tuple[str, Any]] = []

    async def read_owner(self, namespace: str, kind: str, name: str) -> tuple[bool, int | None]:
        facts = self.owners[(kind, name)]
        return facts.exists, facts.replicas

    async def read_rollouts(self, namespace: str, owners: Any
                            ) -> dict[control.Owner, control.RolloutFacts]:
        return {owner: facts for owner, facts in self.rollouts.items() if owner in owners}

    async def write_configmap(self, body: dict[str, Any], *, resource_version: str | None
                              ) -> str:
        self.calls.append(("write", body["data"][messages.CONFIGMAP_KEY]))
        return "1"

    async def patch_status(self, plural: str, namespace: str, name: str,
                           patch: dict[str, Any], **_: Any) -> dict[str, Any]:
        self.calls.append(("status", patch.get("state")))
        return {"metadata": {"resourceVersion": "2"}, "status": patch}

    async def delete_configmap(self, namespace: str, name: str) -> None:
        self.calls.append(("delete", name))

    async def post_event(self, **_: Any) -> None:
        return None


def shell_round(inputs: control.Inputs, memory: control.Memory, now_ms: int
                ) -> list[tuple[str, Any]]:
    """The API writes the operator makes for one recorded round."""
    client = RecordingClient(dict(inputs.owners), dict(inputs.rollouts))
    context = rounds.Context(client=client, views=RecordedViews(inputs),  # type: ignore[arg-type]
                             identity=inputs.leader, audit=audit.AuditLog(None),
                             connector_status=False, clock=lambda: now_ms / 1000)

    async def run() -> None:
        runner_ = rounds.GroupRunner(context, inputs.group.namespace, inputs.group.name)
        runner_.memory = memory
        await runner_.round()

    asyncio.run(run())
    return client.calls


def sim_writes(decided: control.Step) -> list[tuple[str, Any]]:
    """The same calls, from the simulator's step."""
    writes: list[tuple[str, Any]] = []
    for write in decided.writes:
        if isinstance(write, control.DeleteConfigMap):
            writes.append(("delete", views.configmap_name(write.member)))
        elif isinstance(write, control.WriteConfigMap):
            writes.append(("write", codec.encode_assignment(write.assignment)))
        else:
            writes.append(("status", state.encode(write.status.state,
                                                  owners=write.status.owners,
                                                  member_epoch=write.status.member_epoch,
                                                  epoch_floor=write.status.epoch_floor,
                                                  learned=write.status.learned,
                                                  terminating=write.status.terminating)))
    return writes


def recorded(config: runner.Config, scenario: scenarios.Scenario
             ) -> list[tuple[control.Inputs, control.Memory, int, control.Step]]:
    # Leases with real durations, and no word that a vanished pod's process stopped:
    # the shell's inputs never say so (``control.Inputs.gone_means_stopped``).
    sim = runner.Sim(config, scenario, chaos.HardFaults(chaos.Extra(
        offsets_ms={}, forge=0.0, gone_means_stopped=False)))
    sim.steps = []
    assert sim.run().violations == []
    assert sim.steps
    return sim.steps


RUNS = {
    "rolling-restart": (runner.Config(pods=4, connectors=2, tasks=3, seed=1),
                        scenarios.rolling_restart(4)),
    "scale-down": (runner.Config(pods=5, connectors=2, tasks=4, seed=2, delay_ms=60_000),
                   scenarios.build("scale-down", 5)),
    "chaos": chaos.draw(5108),
}


@pytest.mark.parametrize("name", sorted(RUNS))
def test_the_shell_writes_what_the_simulator_writes_on_recorded_rounds(name: str):
    config, scenario = RUNS[name]
    steps = recorded(config, scenario)
    for number, (inputs, memory, now_ms, decided) in enumerate(steps):
        calls = shell_round(inputs, memory, now_ms)
        expected = sim_writes(decided)
        # Deletions first, then the ConfigMap writes (each phase in parallel: same set),
        # then the status.
        # A round after a restart that read unpersisted epochs writes the status first.
        first = int(decided.epochs_first is not None)
        assert calls[:first] == expected[:first], (name, number)
        deletes = first + len(decided.deletes)
        split = deletes + len(decided.configmap_writes)
        assert sorted(calls[first:deletes]) == sorted(expected[first:deletes]), (name, number)
        assert sorted(calls[deletes:split]) == sorted(expected[deletes:split]), (name, number)
        # The persisted state (the shell patches the status it wrote first).
        assert [merged(calls[:first], call) for call in calls[split:]] == expected[split:], (
            name, number)


def merged(before: list[tuple[str, Any]], call: tuple[str, Any]) -> tuple[str, Any]:
    """``call``'s status state as a JSON merge patch over the state ``before`` wrote."""
    if not before:
        return call

    def apply(base: Any, patch: Any) -> Any:
        if not isinstance(patch, dict) or not isinstance(base, dict):
            return patch
        result = dict(base)
        for key, value in patch.items():
            if value is None:
                result.pop(key, None)
            else:
                result[key] = apply(result.get(key), value)
        return result

    return call[0], apply(before[0][1], call[1])


def test_a_recorded_round_is_a_pure_function_of_its_inputs_and_memory():
    config, scenario = RUNS["rolling-restart"]
    for inputs, memory, now_ms, decided in recorded(config, scenario):
        again = control.step(inputs, memory, now_ms=now_ms)
        assert again.configmap_writes == decided.configmap_writes
        assert again.deletes == decided.deletes
        assert again.memory.replace(last_plan=None) == \
            decided.memory.replace(last_plan=None)
