"""A report never takes work from another member (issue 12), as ``control.step`` tables."""

from __future__ import annotations

import dataclasses

from kooper.control import modelled
from kooper.control import step as control
from kooper.core import ids, model

W = ids.WorkerId
GROUP = "g"
SETTINGS = model.Settings(model.Protocol.COMPATIBLE, model.Policy.KOOPER, max_delay_ms=60_000)


def member(name: str) -> model.Member:
    return model.Member(W(name), model.EMPTY, -1, frozenset(model.Protocol), "1")


def inputs(members: list[model.Member]) -> control.Inputs:
    pods, leases = modelled.Members(GROUP).views({m.id: m for m in members})
    return control.Inputs(group=modelled.group(GROUP, SETTINGS), pods=pods, leases=leases,
                          connectors=modelled.connectors(GROUP, {"A": 4}),
                          gone_means_stopped=True)


def run(members: list[model.Member], memory: control.Memory, now_ms: int
        ) -> tuple[control.Step, list[model.Member]]:
    """One step, and the members after each applied what it wrote to it."""
    decided = control.step(inputs(members), memory, now_ms=now_ms)
    written = {w.member: w for w in decided.configmap_writes}
    return decided, [m if m.id not in written else dataclasses.replace(
        m, owned=written[m.id].assigned, generation=written[m.id].generation) for m in members]


def settled(count: int = 3) -> tuple[control.Memory, list[model.Member], int]:
    memory, members, now = control.Memory(), [member(f"m{i}") for i in range(count)], 0
    for _ in range(4):
        decided, members = run(members, memory, now)
        memory, now = decided.memory, now + 10
    assert all(m.owned for m in members)
    return memory, members, now


def claiming(members: list[model.Member], who: int, extra: model.ConnectorsAndTasks
             ) -> list[model.Member]:
    return [dataclasses.replace(m, owned=m.owned.union(extra)) if i == who else m
            for i, m in enumerate(members)]


def test_a_worker_claiming_another_members_task_does_not_stop_it_on_its_owner():
    memory, members, now = settled()
    owner, forger = members[0], members[1]
    theirs = model.ConnectorsAndTasks.of(tasks=[sorted(owner.owned.tasks)[0]])
    forged = claiming(members, 1, theirs)
    decided, after = run(forged, memory, now)
    assert decided.plan is not None
    # The owner keeps it: nothing revokes it there, and its document (if any) still assigns it.
    assert theirs.tasks <= decided.plan.members[owner.id].assigned.tasks
    assert not decided.plan.members[owner.id].revoked
    assert owner.id not in {w.member for w in decided.configmap_writes}
    # The forger alone gets a newer document without it (a full replacement). It is not
    # listed as revoked: a restarted operator reads revoked sets as work still held.
    doc = next(w for w in decided.configmap_writes if w.member == forger.id)
    assert doc.generation > forger.generation
    assert theirs.tasks.isdisjoint(doc.assigned.tasks)
    assert theirs.tasks.isdisjoint(doc.revoked.tasks)
    assert any(e.reason == "UnknownClaim" and "keep them" in e.message for e in decided.events)
    # A forger that applies the document but goes on claiming changes nothing more.
    still = claiming(after, 1, theirs)
    again, _ = run(still, decided.memory, now + 10)
    assert again.configmap_writes == ()
    assert theirs.tasks <= (again.plan or decided.plan).members[owner.id].assigned.tasks
    # When it stops claiming, the group is as it was.
    honest, _ = run(after, again.memory, now + 20)
    assert honest.configmap_writes == ()


def test_every_member_claiming_every_task_takes_nothing_from_anyone():
    memory, members, now = settled(4)
    everything = model.ConnectorsAndTasks.of(["A"], [f"A-{n}" for n in range(4)])
    forged = [dataclasses.replace(m, owned=everything) for m in members]
    decided, _ = run(forged, memory, now)
    assert decided.plan is not None
    for m in members:
        assert decided.plan.members[m.id].assigned == m.owned
        assert not decided.plan.members[m.id].revoked
    assert {w.member for w in decided.configmap_writes} == {m.id for m in members}


def test_a_claim_on_lost_work_leaves_it_waiting_for_its_departed_member():
    # Hard chaos seeds 593 and 2201: the claimant held it, let it go, and it went out as
    # free work before the departed member's grace ran out.
    memory, members, now = settled(2)
    gone = members[0]
    decided, rest = run(members[1:], memory, now)  # its work is lost, held back by the delay
    assert decided.plan is not None
    lost = gone.owned
    assert decided.plan.state.lost == {gone.id: lost}
    # A report that has not acknowledged the claimant's latest document yet (one that
    # does is false on its face: ``claims.false``).
    forged = [dataclasses.replace(m, generation=m.generation - 1)
              for m in claiming(rest, 0, lost)]
    claimed, after = run(forged, decided.memory, now + 10)
    assert claimed.plan is not None
    # Not the claimant's: it is neither assigned to it nor waited for as its holding.
    part = claimed.plan.members[members[1].id]
    assert lost.tasks.isdisjoint(part.assigned.tasks)
    assert lost.tasks.isdisjoint(part.revoked.tasks)
    assert claimed.plan.state.lost == {gone.id: lost}
    doc = next(w for w in claimed.configmap_writes if w.member == members[1].id)
    assert doc.generation > rest[0].generation
    assert lost.tasks.isdisjoint(doc.assigned.tasks)
    # Once the claimant stops claiming, the work still waits; its member comes back
    # within the grace and gets it back.
    honest, _ = run(after, claimed.memory, now + 20)
    state = (honest.plan or claimed.plan).state
    assert state.lost == {gone.id: lost}
    back, _ = run([member(gone.id), *after], honest.memory, now + 30)
    assert back.plan is not None
    assert lost.tasks <= back.plan.members[gone.id].assigned.tasks
