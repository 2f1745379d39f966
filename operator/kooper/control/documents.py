"""Stage 4 of a step: the documents a round writes, and what members were given (pure).

Every member the plan changed, whose ConfigMap someone else edited, or which starts a
new membership gets a document (``state.assignment_message``) naming its membership
epoch (``control.epochs``). ``given`` remembers, per member incarnation, everything its
documents ever named, assigned or revoked: what a report of it may truthfully hold
(``control.claims``).
"""

from __future__ import annotations

from collections.abc import Mapping

from kooper.control import epochs, state
from kooper.control.decision import Documents
from kooper.control.inputs import Inputs, Memory, Wanted
from kooper.core import ids, model
from kooper.protocol import messages

Given = Mapping[ids.WorkerId, tuple[str, model.ConnectorsAndTasks]]
"""member → (incarnation, everything its documents named)."""


def issue(inputs: Inputs, memory: Memory, plan: model.Plan,
          memberships: epochs.Memberships, wanted: Wanted) -> Documents:
    """The documents of this round (see the module docstring), for the round's
    ``memberships`` (``Planned.memberships``)."""
    group = inputs.group
    member_epochs, fresh = memberships.by_member, memberships.fresh
    floor = memory.persisted.issued.epoch_floor
    if plan.state.epochs is not memory.persisted.state.epochs and plan.state.epochs:
        top = max(plan.state.epochs.values())  # (max(floor, *values) builds a 100,000-tuple)
        floor = max(floor, top)
    to_write = set(plan.changed) | {m for m in inputs.edits if m in plan.members} | fresh
    writes = tuple(state.assignment_message(
        group=group.name, member=member, plan=plan.members[member], protocol=plan.protocol,
        policy=str(group.settings.policy), delay_ms=plan.delay_ms, leader=inputs.leader,
        epochs=plan.state.epochs, configs=wanted.configs, states=wanted.states,
        incarnation=plan.state.incarnations.get(member, ""),
        member_epoch=member_epochs[member][1], rejoins=member_epochs[member][2],
        leader_epoch=inputs.leader_epoch,
    ) for member in sorted(to_write))
    return Documents(writes=writes, floor=floor)


def given(before: Given, plan: model.Plan, writes: tuple[messages.Assignment, ...],
          failed: frozenset[ids.WorkerId]) -> Given:
    """``before`` with what the written ``writes`` named (members gone from the plan
    forgotten; a new incarnation starts from nothing)."""
    after = dict(before) if before.keys() <= plan.members.keys() else {
        m: known for m, known in before.items() if m in plan.members}
    for message in writes:
        member = ids.WorkerId(message.member)
        if member in failed:
            continue
        known = after.get(member)
        had = known[1] if known is not None and known[0] == message.incarnation else model.EMPTY
        after[member] = (message.incarnation,
                         had.union(message.assigned).union(message.revoked))
    return after
