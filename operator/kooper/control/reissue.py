"""Giving members a newer document although their work did not change (pure).

A worker applies a document only if its generation is newer than every one it
accepted (``sdk.session``). So when the operator must tell a member something new
without moving its work (a connector's config or state changed, or the member gets a
new membership epoch after it fenced itself), the member's document needs a generation
above every one issued: ``reissue`` bumps the group's generation and gives it to them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from kooper.core import ids, model


def reissue(plan: model.Plan, members: Iterable[ids.WorkerId]) -> model.Plan:
    """``plan`` where each of ``members`` it does not change already gets a newer document."""
    due = sorted(m for m in members if m in plan.members and m not in plan.changed)
    if not due:
        return plan
    generation = plan.state.generation + 1
    parts = dict(plan.members)
    assigned_at = dict(plan.state.assigned_at)
    for member in due:
        part = parts[member]
        parts[member] = model.MemberPlan(part.assigned, part.revoked, generation)
        assigned_at[member] = generation
    return dataclasses.replace(
        plan, members=parts, changed=plan.changed | frozenset(due),
        state=dataclasses.replace(plan.state, generation=generation, assigned_at=assigned_at))
