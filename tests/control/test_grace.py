"""Each unplanned departure gets its own full grace (``core.delays``), on virtual time.

Issue 11's repro: with a 300 s delay, W2 leaving at t=0 and W3 at t=290 s used to
give W3's work away at t=300 s (10 s of grace). Under ``kooper`` each lost set now
waits its own delay; ``kip415`` keeps the KIP's single deadline.
"""

from __future__ import annotations

import dataclasses

import pytest

from kooper.control import modelled, state, views
from kooper.control import step as control
from kooper.core import ids, model
from kooper.protocol import codec

W = ids.WorkerId
GROUP = "g"
DELAY = 300_000
T0 = 100_000
"""W2 departs here; W3 departs 290 s later."""


def settings(policy: model.Policy) -> model.Settings:
    return model.Settings(model.Protocol.COMPATIBLE, policy, max_delay_ms=DELAY)


def member(name: str) -> model.Member:
    return model.Member(W(name), model.EMPTY, -1, frozenset(model.Protocol), "1")


class Group:
    """Modelled members that apply what they are written at once, and one operator."""

    def __init__(self, policy: model.Policy, names: list[str]) -> None:
        self.policy = policy
        self.members = {W(n): member(n) for n in names}
        self.memory = control.Memory()
        self.status: dict[str, object] = {}
        self.configmaps: dict[str, views.ConfigMapView] = {}
        self.last: control.Step | None = None

    def inputs(self) -> control.Inputs:
        pods, leases = modelled.Members(GROUP).views(self.members)
        # Every owner exists: a departure is never known to be permanent.
        owners = {("ReplicaSet", str(m)): control.OwnerFacts(exists=True)
                  for m in ("w0", "w1", "w2", "w3")}
        return control.Inputs(
            gone_means_stopped=True,
            group=modelled.group(GROUP, settings(self.policy), status=self.status),
            pods=pods, leases=leases, connectors=modelled.connectors(GROUP, {"A": 7}),
            owners=owners)

    def round(self, now_ms: int) -> control.Step:
        """One step, its writes executed, then every member applies and reports."""
        decided = control.step(self.inputs(), self.memory, now_ms=now_ms)
        self.memory = decided.memory
        for gone in decided.deletes:
            self.configmaps.pop(gone, None)
        for doc in decided.configmap_writes:
            self.configmaps[doc.member] = views.ConfigMapView(
                modelled.NAMESPACE, views.configmap_name(doc.member), GROUP, doc.member, "1",
                codec.encode_assignment(doc))
            found = self.members.get(W(doc.member))
            if found is not None:
                self.members[found.id] = dataclasses.replace(
                    found, owned=doc.assigned, generation=doc.generation)
        if decided.status is not None:
            self.status = {"state": state.encode(decided.status.state,
                                                 owners=decided.status.owners,
                                                 learned=decided.status.learned,
                                                 terminating=decided.status.terminating)}
        if decided.plan is not None:
            self.last = decided
        return decided

    def settle(self, now_ms: int) -> control.Step:
        """Rounds until nothing changes (members report what they applied)."""
        decided = self.round(now_ms)
        for tick in range(1, 10):
            again = self.round(now_ms + tick)
            if again.plan is None:
                return decided
            decided = again
        raise AssertionError("the group did not settle")

    def restart_operator(self) -> None:
        """A new leader: only what the API holds (status and ConfigMaps)."""
        group = modelled.group(GROUP, settings(self.policy), status=self.status)
        self.memory = control.restored(group, self.configmaps)

    def holders(self) -> dict[str, str]:
        assert self.last is not None
        assert self.last.plan is not None
        return {r: m for m, p in self.last.plan.members.items() for r in p.assigned.sorted()}


def formed(policy: model.Policy) -> tuple[Group, list[str], list[str]]:
    group = Group(policy, ["w0", "w1", "w2", "w3"])
    group.settle(0)
    holders = group.holders()
    w2 = sorted(r for r, m in holders.items() if m == "w2")
    w3 = sorted(r for r, m in holders.items() if m == "w3")
    assert w2
    assert w3
    return group, w2, w3


@pytest.mark.parametrize("restart", [False, True], ids=["same-leader", "operator-restart"])
def test_a_member_leaving_late_in_anothers_delay_gets_its_own_full_grace(restart: bool):
    group, w2, w3 = formed(model.Policy.KOOPER)
    del group.members[W("w2")]
    first = group.settle(T0)
    assert first.wake_at_ms == T0 + DELAY
    del group.members[W("w3")]
    second = group.settle(T0 + 290_000)
    assert second.plan is not None
    assert set(w3) <= second.plan.unassigned.connectors | second.plan.unassigned.tasks
    if restart:
        group.restart_operator()
    # t=300 s: W2's delay ends, W3 has 290 s of its own left.
    due = group.settle(T0 + DELAY)
    held = group.holders()
    assert all(r in held for r in w2), "W2's work is placed when W2's delay ends"
    assert not any(r in held for r in w3), "W3's work still waits for W3"
    assert due.wake_at_ms == T0 + 290_000 + DELAY
    assert due.status is not None
    assert due.status.state.delay is not None
    assert dict(due.status.state.delay.departures) == {W("w3"): T0 + 290_000 + DELAY}
    shown = due.status.document(encoded={}, previous={})["delay"]
    assert shown["remainingSeconds"] == 290
    assert [(d["member"], d["remainingSeconds"], d["lost"]) for d in shown["departures"]] == \
        [("w3", 290, len(w3))]
    # W3 returning inside its own grace gets its work back at once.
    group.members[W("w3")] = dataclasses.replace(member("w3"), incarnation="2")
    group.settle(T0 + DELAY + 60_000)
    held = group.holders()
    assert all(held[r] == "w3" for r in w3)
    assert group.memory.persisted.state.delay is None


def test_a_member_that_never_returns_is_given_away_when_its_own_delay_ends():
    group, w2, w3 = formed(model.Policy.KOOPER)
    del group.members[W("w2")]
    group.settle(T0)
    del group.members[W("w3")]
    group.settle(T0 + 290_000)
    group.settle(T0 + DELAY)
    group.settle(T0 + 290_000 + DELAY - 1_000)
    assert not any(r in group.holders() for r in w3)
    group.settle(T0 + 290_000 + DELAY)
    held = group.holders()
    assert all(r in held for r in (*w2, *w3))
    assert group.memory.persisted.state.delay is None


def test_kip415_keeps_one_deadline_for_every_departure_as_the_kip_says():
    group, w2, w3 = formed(model.Policy.KIP415)
    del group.members[W("w2")]
    group.settle(T0)
    del group.members[W("w3")]
    group.settle(T0 + 290_000)
    assert group.memory.persisted.state.delay is not None
    assert group.memory.persisted.state.delay.departures == {}
    group.settle(T0 + DELAY)
    held = group.holders()
    assert all(r in held for r in (*w2, *w3)), "KIP-415: all lost work goes at the deadline"


def test_a_pod_seen_terminating_before_an_operator_restart_still_leaves_as_planned():
    """The fact that makes a departure planned is persisted (``status.state.terminating``):
    a leader that restarts after seeing the pod terminate, while the pod goes away, hands
    its work over at once instead of waiting for the pod."""
    group, _, w3 = formed(model.Policy.KOOPER)
    terminating = group.inputs()
    terminating = dataclasses.replace(terminating, pods=[
        dataclasses.replace(p, deleting=p.name == "w3") for p in terminating.pods])
    seen = control.step(terminating, group.memory, now_ms=T0)
    assert seen.status is not None, "a pod starting to terminate is a round: it is persisted"
    assert {m for m, _ in seen.status.terminating} == {"w3"}
    group.memory = seen.memory
    group.status = {"state": state.encode(seen.status.state, owners=seen.status.owners,
                                          terminating=seen.status.terminating)}
    group.restart_operator()
    del group.members[W("w3")]  # the worker left and the pod is gone by the next round
    group.settle(T0 + 5_000)
    held = group.holders()
    assert all(r in held for r in w3), "planned: handed over at once, not waiting for w3"
    assert group.memory.persisted.state.delay is None
    assert group.memory.persisted.terminating == frozenset()  # forgotten once handled
