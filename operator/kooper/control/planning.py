"""Stage 3 of a step: the plan (pure).

The assignor plans from the situation (``control.situation``) with the grace
``control.adaptive`` chose (``kooper``) and the hold's view of the delay
(``control.rails``); then the plan is paced (``control.pacing``), and members are given
newer documents where they must learn something without their work moving: foreign
claims answered (``claims.revoke_foreign``), connector settings changed
(``control.settings``), a new membership (``control.reissue``).
"""

from __future__ import annotations

import dataclasses

from kooper.control import adaptive, claims, epochs, pacing, rails, reissue, settings
from kooper.control.decision import Observation, Planned, Situation
from kooper.control.inputs import Caches, Inputs, Memory
from kooper.core import assignor, model


def plan(inputs: Inputs, memory: Memory, seen: Observation, now: Situation, *, now_ms: int,
         caches: Caches) -> Planned:
    """Plan the round (see the module docstring)."""
    group, previous, snap = inputs.group, memory.persisted.state, now.snap
    choice = adaptive.choose(memory.persisted.learned, max_delay_ms=group.settings.max_delay_ms)
    if group.settings.policy is model.Policy.KOOPER and \
            choice.grace_ms != group.settings.max_delay_ms:
        # Not in the step's key: the grace only matters to a departure, which changes it.
        snap = dataclasses.replace(snap, grace_ms=choice.grace_ms)
    planning = rails.planning_state(previous, now.hold, now_ms=now_ms,
                                    delay_ms=group.settings.max_delay_ms)
    if now.hold.held and planning.delay is not None and planning.delay.departures:
        # A hold keeps every lost set waiting: none is released on its own deadline.
        planning = dataclasses.replace(
            planning, delay=dataclasses.replace(planning.delay, departures={}))
    planned = assignor.plan(snap, planning, now_ms=now_ms, configured=now.configured,
                            cache=caches.assignor)
    planned, paced = pacing.pace(planned, previous, snap, configured=now.configured,
                                 limit=group.balancing_limit, pending=memory.volatile.paced,
                                 exempt={member for member, _ in seen.seen})
    if now.foreign:  # after pacing: these members must be rewritten whatever pacing left
        planned = claims.revoke_foreign(planned, now.foreign, done=memory.volatile.revoked_claims)
    carried = now.wanted.carried
    planned = settings.rewrite(planned,
                               settings.changed(memory.persisted.settings_written, carried))
    # A member starting a new membership (it fenced itself, or came back) must apply its
    # document even where its work did not change: a generation it has not accepted yet.
    # So must a member whose ConfigMap held a document we did not write (edited by hand,
    # or our own write whose answer was lost): its worker may have accepted that one.
    # Re-issuing changes no member's incarnation: the memberships stay the documents'.
    memberships = epochs.member_epochs(memory, planned, seen.good)
    planned = reissue.reissue(planned, memberships.fresh | inputs.edits.keys())
    return Planned(plan=planned, snap=snap, paced=paced, carried=carried,
                   memberships=memberships)
