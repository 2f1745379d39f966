"""Which documents a round writes: only those whose content a member must act on.

docs/protocol.md, "Which documents a round writes".
"""

from __future__ import annotations

import dataclasses

from kooper.control import modelled, restore, state, views
from kooper.control import step as control
from kooper.core import ids, model
from kooper.protocol import codec, messages

W = ids.WorkerId
GROUP = "g"
SETTINGS = model.Settings(model.Protocol.COMPATIBLE, model.Policy.KOOPER, max_delay_ms=0)
CONNECTORS = {"A": 12, "B": 12, "C": 12}


def member(name: str) -> model.Member:
    return model.Member(W(name), model.EMPTY, -1, frozenset(model.Protocol), "1")


def inputs(members: list[model.Member], *, status: dict[str, object] | None = None,
           configmaps: dict[str, views.ConfigMapView] | None = None) -> control.Inputs:
    pods, leases = modelled.Members(GROUP).views({m.id: m for m in members})
    return control.Inputs(
        gone_means_stopped=True, group=modelled.group(GROUP, SETTINGS, status=status),
        pods=pods, leases=leases, connectors=modelled.connectors(GROUP, CONNECTORS),
        configmaps=configmaps or {})


def apply(decided: control.Step, members: list[model.Member],
          skip: frozenset[str] = frozenset()) -> list[model.Member]:
    """Every member written to (but ``skip``) applies its document and reports it."""
    written = {w.member: w for w in decided.configmap_writes}
    return [m if m.id not in written or m.id in skip else dataclasses.replace(
        m, owned=written[m.id].assigned, generation=written[m.id].generation)
        for m in members]


def settled(names: list[str]) -> tuple[list[model.Member], control.Memory]:
    """A group of ``names`` that applied its first assignment."""
    members = [member(n) for n in names]
    memory = control.Memory()
    for now in (0, 10):
        decided = control.step(inputs(members), memory, now_ms=now)
        members, memory = apply(decided, members), decided.memory
    return members, memory


def joined() -> tuple[list[model.Member], control.Step]:
    """Three settled members and a fourth that joins: the members and the revoking round."""
    members, memory = settled(["a", "b", "c"])
    members = [*members, member("d")]
    return members, control.step(inputs(members), memory, now_ms=100)


def configmap(document: messages.Assignment) -> views.ConfigMapView:
    """The ConfigMap that carries ``document``."""
    return views.ConfigMapView("default", views.configmap_name(document.member), GROUP,
                               document.member, "1", codec.encode_assignment(document))


def assigned(memory: control.Memory) -> dict[ids.WorkerId, model.ConnectorsAndTasks]:
    return dict(memory.persisted.state.assignments)


def test_a_join_rewrites_only_the_documents_whose_assignment_changed():
    members, memory = settled([f"w{n}" for n in range(6)])
    before = assigned(memory)
    members = [*members, member("new")]
    written: list[str] = []
    for now in range(100, 200, 10):
        decided = control.step(inputs(members), memory, now_ms=now)
        written += [w.member for w in decided.configmap_writes]
        members, memory = apply(decided, members), decided.memory
    after = assigned(memory)
    moved = sorted(m for m in after if before.get(m) != after[m])
    assert "new" in moved
    assert len(moved) > 2  # the join moved work from several members
    # The joiner gets two documents: its membership (its epoch, no work yet: the barrier
    # waits for the revoked members), then its work. Every other member whose assignment
    # changed gets one; nobody else gets any.
    assert sorted(written) == sorted([*moved, "new"])


def test_a_member_that_acknowledged_its_revocation_keeps_its_document():
    members, revoking = joined()
    revoked = {w.member: w for w in revoking.configmap_writes if w.revoked}
    assert revoked
    members = apply(revoking, members)
    handed = control.step(inputs(members), revoking.memory, now_ms=110)
    assert [w.member for w in handed.configmap_writes] == ["d"]
    assert handed.plan is not None
    for name, document in revoked.items():
        # The document it holds is the one it acts on: same generation, same work.
        assert handed.plan.members[W(name)].generation == document.generation
        assert handed.plan.members[W(name)].assigned == document.assigned
        assert W(name) not in handed.memory.persisted.state.revoking
    before = revoking.memory.persisted.state.generation
    assert handed.memory.persisted.state.generation == before + 1


def test_revoked_work_stays_with_its_member_until_it_acknowledges():
    members, revoking = joined()
    slow = next(w.member for w in revoking.configmap_writes if w.revoked)
    waiting = apply(revoking, members, skip=frozenset({slow}))
    held = control.step(inputs(waiting), revoking.memory, now_ms=110)
    assert slow not in [w.member for w in held.configmap_writes]
    assert held.plan is not None
    given = held.plan.members[W("d")].assigned
    mine = next(w for w in revoking.configmap_writes if w.member == slow).revoked
    assert not given.intersection(mine)  # the barrier: not handed out before it stops
    assert held.memory.persisted.state.revoking[W(slow)] == mine


def test_a_restored_leader_reads_no_revocation_that_a_newer_document_hands_out():
    members, revoking = joined()
    members = apply(revoking, members)
    handed = control.step(inputs(members), revoking.memory, now_ms=110)
    members = apply(handed, members)
    documents = {w.member: w for w in (*revoking.configmap_writes, *handed.configmap_writes)}
    configmaps = {name: configmap(doc) for name, doc in documents.items()}
    assert handed.status is not None
    persisted = state.encode(handed.status.state, owners=handed.status.owners)
    group = modelled.group(GROUP, SETTINGS, status={"state": persisted})
    restored = control.restored(group, configmaps)
    assert any(doc.revoked for doc in documents.values())  # still listed in the documents
    assert restored.persisted.state.revoking == {}  # ... but all of it runs on "d" now
    again = control.step(inputs(members, status={"state": persisted}, configmaps=configmaps),
                         restored, now_ms=120)
    assert again.configmap_writes == ()


def test_a_restored_leader_reads_as_in_flight_only_the_revocations_the_status_lists():
    members, revoking = joined()
    members = apply(revoking, members)
    handed = control.step(inputs(members), revoking.memory, now_ms=110)
    # Only the revoking documents survive (as if "d" departed and its ConfigMap went):
    # no newer document hands their work out, yet none of it is in flight.
    configmaps = {w.member: configmap(w) for w in revoking.configmap_writes if w.revoked}
    for step_, in_flight in ((revoking, True), (handed, False)):
        assert step_.status is not None
        persisted = state.encode(step_.status.state, owners=step_.status.owners)
        assert bool(persisted["revoking"]) is in_flight
        restored = control.restored(modelled.group(GROUP, SETTINGS, status={
            "state": persisted}), configmaps)
        assert bool(restored.persisted.state.revoking) is in_flight


def test_a_revocation_rewrites_a_document_only_when_it_says_something_new():
    a, b = model.ConnectorsAndTasks.of(tasks=["A-0"]), model.ConnectorsAndTasks.of(tasks=["A-1"])
    table = [
        # told, tell, acknowledged, rewrite
        (model.EMPTY, model.EMPTY, True, False),
        (a, a, False, False),  # still stopping it: the document says so already
        (a, model.EMPTY, True, False),  # stopped it: nothing left to say
        (a, model.EMPTY, False, True),
        (model.EMPTY, a, True, True),  # a new revocation
        (a, a.union(b), True, True),
        (a, b, True, True),
    ]
    for told, tell, acknowledged, rewrite in table:
        assert model.tells_more(told, tell, acknowledged=acknowledged) is rewrite, (
            told, tell, acknowledged)


def test_a_restored_leader_reads_the_revocation_a_departed_member_left_unacknowledged():
    """The status lists no revocation in flight for a departed member (its revocations
    became lost work), but its document outlived it: what the status counts lost from
    it and the document revokes is read as still held (hard chaos seed 5259, families 4);
    what it revoked and acknowledged before (not counted lost) is not."""
    tasks = model.ConnectorsAndTasks.of
    gone = messages.Assignment(group=GROUP, member="gone", generation=7,
                               protocol=model.Protocol.COMPATIBLE,
                               assigned=tasks(tasks=["A-0"]),
                               revoked=tasks(tasks=["A-1", "A-2"]), incarnation="i1")
    persisted = {"version": state.STATE_VERSION, "generation": 10, "revoking": [],
                 "lost": {"gone": codec.encode_resources(tasks(tasks=["A-1"]))}}
    restored = restore.restore(persisted, [("gone", codec.encode_assignment(gone))],
                             group=GROUP)
    assert restored.state.revoking == {W("gone"): tasks(tasks=["A-1"])}
    assert restored.state.lost == {W("gone"): tasks(tasks=["A-1"])}
    # Listed nowhere as lost: an acknowledged revocation, nothing held.
    persisted["lost"] = {}
    restored = restore.restore(persisted, [("gone", codec.encode_assignment(gone))],
                             group=GROUP)
    assert restored.state.revoking == {}
