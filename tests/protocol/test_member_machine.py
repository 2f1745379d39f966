"""The member lifecycle table: what it allows, what it refuses."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kooper.core import errors
from kooper.protocol import member

S = member.MemberState
In = member.MemberInput


def test_the_happy_path_joins_applies_revokes_and_leaves():
    state = S.UNJOINED
    for event, expected in [
        (In.JOIN, S.JOINING),
        (In.ASSIGN, S.STABLE),
        (In.REVOKE, S.REVOKING),
        (In.STOPPED, S.STABLE),
        (In.LEAVE, S.LEAVING),
        (In.RELEASED, S.LEFT),
    ]:
        state = member.transition(state, event)
        assert state is expected


def test_a_fenced_member_rejoins_only_through_a_renewed_lease():
    state = member.transition(S.STABLE, In.LEASE_LOST)
    assert state is S.FENCED
    with pytest.raises(errors.LocalProtocolError, match="cannot assign while fenced"):
        member.transition(state, In.ASSIGN)
    assert member.transition(state, In.LEASE_RENEWED) is S.JOINING


def test_nothing_leaves_the_left_state():
    for event in In:
        with pytest.raises(errors.LocalProtocolError):
            member.transition(S.LEFT, event)


def test_every_state_but_left_can_be_told_to_leave():
    for state in S:
        if state is not S.LEFT:
            assert member.transition(state, In.LEAVE) is S.LEAVING


def test_only_live_states_accept_assignments():
    assert {s for s in S if member.accepts_assignments(s)} == member.LIVE_STATES


def test_every_state_is_reachable_from_unjoined():
    seen = {S.UNJOINED}
    frontier = [S.UNJOINED]
    while frontier:
        state = frontier.pop()
        for (source, _event), target in member.TRANSITIONS.items():
            if source is state and target not in seen:
                seen.add(target)
                frontier.append(target)
    assert seen == set(S)


@settings(deadline=None)
@given(st.sampled_from(S), st.sampled_from(In))
def test_the_table_is_the_whole_truth(state, event):
    if (state, event) in member.TRANSITIONS:
        assert member.transition(state, event) is member.TRANSITIONS[state, event]
    else:
        with pytest.raises(errors.LocalProtocolError, match=f"cannot {event.value}"):
            member.transition(state, event)
