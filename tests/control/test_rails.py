"""The mass-departure rail in ``control.step`` (``control.rails``), as tables of steps."""

from __future__ import annotations

import dataclasses

from kooper.control import modelled, rails, status
from kooper.control import step as control
from kooper.core import ids, model

W = ids.WorkerId
GROUP = "g"
DELAY_MS = 10_000
SETTINGS = model.Settings(model.Protocol.COMPATIBLE, model.Policy.KOOPER, max_delay_ms=DELAY_MS)


class Group:
    def __init__(self, names: list[str], *, fraction: float = 0.5) -> None:
        self.members = {W(n): model.Member(W(n), incarnation="1") for n in names}
        self.memory = control.Memory()
        self.fraction = fraction
        self.release = ""

    def step(self, now_ms: int) -> control.Step:
        pods, leases = modelled.Members(GROUP).views(self.members)
        group = dataclasses.replace(modelled.group(GROUP, SETTINGS),
                                    max_departed_fraction=self.fraction,
                                    release_hold=self.release)
        owners = {("ReplicaSet", n): control.OwnerFacts(exists=True) for n in ("a", "b", "c", "d")}
        decided = control.step(control.Inputs(
            gone_means_stopped=True,
            group=group, pods=pods, leases=leases, owners=owners,
            connectors=modelled.connectors(GROUP, {"A": 7})), self.memory, now_ms=now_ms)
        for doc in decided.configmap_writes:
            member = self.members.get(W(doc.member))
            if member is not None:
                self.members[W(doc.member)] = dataclasses.replace(
                    member, owned=doc.assigned, generation=doc.generation)
        self.memory = decided.memory
        return decided

    def settle(self, now_ms: int) -> None:
        while self.step(now_ms).configmap_writes:
            pass

    def unassigned(self) -> int:
        assert self.memory.volatile.last_plan is not None
        return len(self.memory.volatile.last_plan.unassigned)


def reasons(decided: control.Step) -> list[str]:
    return [e.reason for e in decided.events]


def test_most_members_gone_at_once_holds_their_work_past_the_delay_until_they_return():
    group = Group(["a", "b", "c", "d"])
    group.settle(0)
    for name in ("b", "c", "d"):
        del group.members[W(name)]
    gone = group.step(1_000)
    assert "ReassignmentHeld" in reasons(gone)
    assert gone.status is not None
    degraded = status.group_conditions(gone.status.facts)[2]
    assert (degraded.status, degraded.reason) == (True, "ReassignmentHeld")
    assert "3 of 4 members departed" in degraded.message
    held = group.unassigned()
    assert held == 8 - len(group.members[W("a")].owned)  # a keeps its own; the rest waits
    later = group.step(1_000 + 5 * DELAY_MS)  # long past the delay: still held
    assert group.unassigned() == held
    assert "ReassignmentHeld" not in reasons(later)  # said once
    group.members[W("b")] = model.Member(W("b"), incarnation="1")
    group.members[W("c")] = model.Member(W("c"), incarnation="1")
    back = group.step(2_000 + 5 * DELAY_MS)
    assert "ReassignmentReleased" in reasons(back)
    group.settle(3_000 + 10 * DELAY_MS)  # d's work is reassigned when the delay ends
    assert group.unassigned() == 0


def test_without_the_rail_the_survivor_takes_everything_when_the_delay_ends():
    group = Group(["a", "b", "c", "d"], fraction=1.0)
    group.settle(0)
    for name in ("b", "c", "d"):
        del group.members[W(name)]
    assert "ReassignmentHeld" not in reasons(group.step(1_000))
    group.settle(1_000 + 2 * DELAY_MS)
    assert group.unassigned() == 0


def test_an_operator_override_releases_the_hold_at_once():
    group = Group(["a", "b", "c", "d"])
    group.settle(0)
    for name in ("b", "c", "d"):
        del group.members[W(name)]
    group.step(1_000)
    assert group.unassigned() == 8 - len(group.members[W("a")].owned)
    group.release = "now"
    released = group.step(2_000)  # before the delay would have ended
    assert "ReassignmentReleased" in reasons(released)
    group.settle(2_000)
    assert group.unassigned() == 0
    assert group.memory.volatile.hold_released == "now"


def test_one_departure_of_four_does_not_hold():
    assert not rails.judge(model.PlanState(assignments={W(n): model.EMPTY for n in "abcd"}),
                           {"a", "b", "c"}, fraction=0.5, override="", acted_on="").held
