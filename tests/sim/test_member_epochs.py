"""Issue 12 in the simulator, with members driven by the real SDK ``Session``.

Mechanism 1, *stale assignment after a partition*: a member cut off from the API
for a little over the time it takes the operator to declare it departed (20 s
here: a 15 s lease plus a 5 s skew margin) must never act on a document written
before it was declared departed, while that document's work runs elsewhere.

Two defences close it, and each is shown sufficient on its own where it applies:
the step deletes a departed member's ConfigMap before it writes that member's work
into anyone else's (``Step.writes``), and every document names the member's
membership epoch, which a fenced worker retires and the operator renews.
"""

from __future__ import annotations

import dataclasses

import pytest

from kooper.control import step as control
from kooper.core import ids, model
from kooper.protocol import messages
from kooper.sim import metrics, runner, scenarios

A = scenarios.Action
S = scenarios.Step


class Defences(runner.NoFaults):
    """The operator with the two defences switchable, to show each one matters; one
    dying mid-write-sequence dies just before the status write."""

    def __init__(self, *, old_order: bool = False, no_epochs: bool = False) -> None:
        self.old_order = old_order
        """Write as before issue 12: ConfigMaps, the status, then the deletions."""
        self.no_epochs = no_epochs
        """Documents without ``memberEpoch`` (an operator before issue 12)."""

    def order(self, writes: tuple[control.Write, ...]) -> tuple[control.Write, ...]:
        if not self.old_order:
            return writes
        deletes = tuple(w for w in writes if isinstance(w, control.DeleteConfigMap))
        return (*(w for w in writes if not isinstance(w, control.DeleteConfigMap)), *deletes)

    def crash_prefix(self, count: int) -> int | None:
        return count - 1

    def document(self, message: messages.Assignment) -> messages.Assignment:
        return dataclasses.replace(message, member_epoch=0) if self.no_epochs else message


def run(*, heal_ms: int, crash: bool, seed: int, old_order: bool = False,
        no_epochs: bool = False) -> runner.Result:
    """Pod 1 is cut off; pod 2 dies, and its work goes to pods 0 and 1 (pod 1's document
    is written while it cannot read it); pod 1 is declared departed at +20 s and its work
    goes to pod 0. With ``crash`` the operator dies while writing that round."""
    config = runner.Config(pods=3, connectors=2, tasks=2, delay_ms=0, seed=seed,
                           sessions=True, policy=model.Policy.KOOPER)
    steps = [S(A.PARTITION, pod=1, down_ms=heal_ms),
             S(A.KILL, pod=2, delay_ms=2_000, down_ms=120_000)]
    if crash:
        steps.append(S(A.OPERATOR_RESTART, delay_ms=13_000, mid_round=True))
    sim = runner.Sim(config, scenarios.Scenario("stale-assignment", tuple(steps)),
                     Defences(old_order=old_order, no_epochs=no_epochs))
    return sim.run()


def overlaps(result: runner.Result) -> int:
    return len(result.violations) + metrics.run_metrics(result.events).overlaps


def converged(result: runner.Result) -> bool:
    every = set(result.configured.connectors) | set(result.configured.tasks)
    running = [r for rs in result.running.values() for r in rs]
    return sorted(running) == sorted(every)


# The operator dies after handing pod 1's work to pod 0 and before anything else;
# the partition heals 200 ms after the declaration, while the operator is down.
CRASH = {"heal_ms": 20_200, "crash": True, "seed": 7}
# The partition heals 30 ms after pod 1 is declared departed (the 20.03 s): it
# rereads its ConfigMap at once, and its report lands after the round that hands its
# work over.
HEAL = {"heal_ms": 20_030, "crash": False, "seed": 3}


@pytest.mark.parametrize(("case", "old_order", "no_epochs"), [
    ("crash", False, False), ("crash", False, True), ("crash", True, False),
    ("heal", False, False), ("heal", True, False),
])
def test_a_member_back_from_a_partition_never_runs_a_document_from_before_its_departure(
        case: str, old_order: bool, no_epochs: bool):
    result = run(**(CRASH if case == "crash" else HEAL),  # type: ignore[arg-type]
                 old_order=old_order, no_epochs=no_epochs)
    assert overlaps(result) == 0, result.violations
    assert converged(result)


@pytest.mark.parametrize("case", ["crash", "heal"])
def test_without_either_defence_the_same_runs_double_own(case: str):
    """The scenarios are sharp: the code before issue 12 ran the work twice."""
    result = run(**(CRASH if case == "crash" else HEAL),  # type: ignore[arg-type]
                 old_order=True, no_epochs=True)
    assert any(" while sim-" in v for v in result.violations), result.violations
    assert metrics.run_metrics(result.events).overlaps > 0


def test_a_member_back_from_a_partition_rejoins_with_a_new_epoch():
    sim = runner.Sim(
        runner.Config(pods=3, connectors=2, tasks=2, delay_ms=0, seed=7, sessions=True),
        scenarios.Scenario("back", (S(A.PARTITION, pod=1, down_ms=30_000),)), Defences())
    sim.steps = []
    assert sim.run().violations == []
    docs = [(w.member_epoch, w.generation, len(w.assigned)) for _, _, _, step in sim.steps
            for w in step.configmap_writes if w.member == "sim-1"]
    epochs = [epoch for epoch, _, _ in docs]
    assert epochs == sorted(epochs)
    assert len(set(epochs)) == 2
    departed = [step for _, _, _, step in sim.steps if ids.WorkerId("sim-1") in step.deletes]
    assert len(departed) == 1  # declared departed once: its epoch retired with its ConfigMap
    assert ids.WorkerId("sim-1") not in departed[0].memory.persisted.member_epochs
    issued = [step.memory.persisted.issued.member_epoch for _, _, _, step in sim.steps]
    assert issued == sorted(issued)
