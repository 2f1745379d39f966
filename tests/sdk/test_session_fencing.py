"""Fencing by the timing budget, on virtual time (issue 12, "timing-only fencing").

Lease 30 s, stop timeout 10 s, margin 2 s: the member fences itself 18 s after its
last renewal was sent, and nothing may run 28 s after it; the operator may expire
it from 30 s after it *observed* that renewal, which is later still.
"""

import pytest
from tests.sdk.session_helpers import BOTH, assignment, drive, flat

from kooper.core import errors
from kooper.protocol import member
from kooper.sdk import session as sdk_session
from kooper.sdk.session import Exit, Start, Stop, WriteReport


def budgeted(now=0):
    session = sdk_session.Session(
        member_name="w-0",
        incarnation="i1",
        protocols=BOTH,
        lease_duration_ms=30_000,
        stop_timeout_ms=10_000,
        fence_margin_ms=2_000,
    )
    session.join(now)
    return session


def running(session, generation=1, tasks=("A-0",)):
    session.receive_assignment(assignment(generation, [], list(tasks)))
    drive(session)
    assert session.owned == set(tasks)
    return session


def test_the_member_fences_itself_stop_timeout_plus_margin_before_the_lease_ends():
    session = running(budgeted())
    session.tick(17_999)
    assert session.state is member.MemberState.STABLE
    session.tick(18_000)
    assert session.state is member.MemberState.FENCED
    assert [(a.resource, a.lost) for a in session.next_actions()] == [("A-0", True)]


def test_a_renewal_moves_the_fence():
    session = running(budgeted())
    session.lease_renewed(10_000)
    session.tick(27_999)
    assert session.state is member.MemberState.STABLE
    assert session.wake_at_ms() == 28_000


def test_fencing_does_not_wait_for_a_start_that_blocks():
    session = running(budgeted())
    session.receive_assignment(assignment(2, [], ["A-0", "A-1"]))
    (start,) = session.next_actions()  # A-1's on_assigned blocks in its thread
    assert isinstance(start, Start)
    session.tick(18_000)
    (stop,) = session.next_actions()
    assert (stop.resource, stop.lost) == ("A-0", True)
    assert session.next_actions() == []  # nothing twice
    session.done(stop)
    session.done(start)  # it returns at last, having started A-1: stop it too, as lost
    assert [(a.resource, a.lost) for a in session.next_actions()] == [("A-1", True)]


def test_a_start_that_returns_after_the_member_fenced_and_renewed_again_is_stopped_as_lost():
    # As above, but the Lease is back (the member rejoined, empty and fenced) before the
    # blocked start returns: it began before the fence, so it stops as lost all the same.
    session = running(budgeted())
    session.receive_assignment(assignment(2, [], ["A-0", "A-1"]))
    (start,) = session.next_actions()
    session.tick(18_000)
    (stop,) = session.next_actions()
    session.done(stop)
    session.lease_renewed(19_000)
    assert session.state is member.MemberState.JOINING
    session.done(start)
    stops = flat(drive(session), Stop)
    assert [(a.resource, a.lost) for a in stops] == [("A-1", True)]


def test_a_stop_that_outlives_its_timeout_ends_the_process_instead_of_counting_as_stopped():
    session = running(budgeted())
    session.receive_assignment(assignment(2, [], []))
    (stop,) = session.next_actions()
    session.done(stop, error="on_revoked timed out after 10s", still_running=True)
    (exit_,) = session.next_actions()
    assert isinstance(exit_, Exit)
    assert "stopping A-0 did not finish" in exit_.reason
    assert session.owned == {"A-0"}  # it still runs: never reported as stopped
    assert session.next_actions() == [exit_]


def test_a_start_still_running_when_the_lease_may_expire_ends_the_process():
    session = running(budgeted(), tasks=())
    session.receive_assignment(assignment(2, [], ["A-0"]))
    (start,) = session.next_actions()  # the start blocks past the fence
    assert isinstance(start, Start)
    session.tick(18_000)
    assert session.next_actions() == []  # nothing owned to stop yet
    assert session.wake_at_ms() == 28_000
    session.tick(27_999)
    assert session.exit_reason is None
    session.tick(28_000)
    (exit_,) = session.next_actions()
    assert "may still run (A-0)" in exit_.reason


def test_a_member_whose_stops_finished_in_time_does_not_end():
    session = running(budgeted(), tasks=("A-0", "A-1"))
    session.tick(18_000)
    batches = drive(session)
    assert {a.resource for a in flat(batches, Stop)} == {"A-0", "A-1"}
    assert flat(batches, WriteReport)[-1].report.fenced
    session.tick(60_000)
    assert session.exit_reason is None
    assert session.next_actions() == []
    assert session.wake_at_ms() is None


def test_a_member_that_renews_again_after_fencing_rejoins_empty():
    session = running(budgeted())
    session.tick(18_000)
    drive(session)
    session.lease_renewed(20_000)
    assert session.state is member.MemberState.JOINING
    session.tick(37_999)
    assert session.state is member.MemberState.JOINING


def test_a_session_without_a_stop_timeout_fences_at_the_lease_and_never_asks_to_end():
    # What simulators that do not model stop timeouts construct.
    session = sdk_session.Session(
        member_name="w-0", incarnation="i1", protocols=BOTH, lease_duration_ms=30_000
    )
    session.join(0)
    running(session)
    session.tick(29_999)
    assert session.state is member.MemberState.STABLE
    session.tick(30_000)
    (stop,) = session.next_actions()
    session.tick(90_000)
    assert session.next_actions() == []
    session.done(stop)


def test_a_budget_with_no_time_to_fence_is_a_local_error():
    with pytest.raises(errors.LocalProtocolError, match="leave no time to fence"):
        sdk_session.Session(
            member_name="w-0",
            incarnation="i1",
            protocols=BOTH,
            lease_duration_ms=10_000,
            stop_timeout_ms=9_000,
            fence_margin_ms=1_000,
        )


def test_only_starts_and_stops_may_be_left_running():
    session = running(budgeted())
    session.receive_assignment(assignment(2, [], ["A-0"], states={"A": "paused"}))
    (pause,) = session.next_actions()
    with pytest.raises(errors.LocalProtocolError, match="only a failed start or stop"):
        session.done(pause, error="x", still_running=True)
