"""The sans-I/O session: incarnations, restarts in place, late starts and pauses."""

import pytest
from tests.sdk.session_helpers import assignment, drive, flat, new_session

from kooper.core import errors
from kooper.protocol import member
from kooper.sdk import session as sdk_session

Start, Stop, WriteReport = sdk_session.Start, sdk_session.Stop, sdk_session.WriteReport
Pause, Resume = sdk_session.Pause, sdk_session.Resume


# --- incarnations ------------------------------------------------------------------------


def test_a_document_planned_for_a_previous_incarnation_is_ignored_until_ours_arrives():
    session = new_session()  # incarnation "i1"
    drive(session)
    assert not session.receive_assignment(assignment(7, [], ["A-0"], incarnation="i0"))
    assert session.state is member.MemberState.JOINING
    assert drive(session) == []
    assert session.report().generation == -1
    assert session.receive_assignment(assignment(8, [], ["A-1"], incarnation="i1"))
    batches = drive(session)
    assert [a.resource for a in flat(batches, Start)] == ["A-1"]
    assert flat(batches, WriteReport)[-1].report.generation == 8


def test_an_ignored_document_does_not_raise_the_generation_bar():
    session = new_session()
    assert not session.receive_assignment(assignment(9, [], ["A-0"], incarnation="old"))
    assert session.receive_assignment(assignment(3, [], ["A-0"], incarnation="i1"))


def test_a_document_for_any_incarnation_is_applied():
    session = new_session()
    assert session.planned_for_us(assignment(1, incarnation=""))
    assert session.planned_for_us(assignment(1, incarnation="i1"))
    assert not session.planned_for_us(assignment(1, incarnation="i2"))
    assert session.receive_assignment(assignment(1, [], ["A-0"]))


def test_a_running_member_ignores_a_document_for_another_incarnation_and_keeps_running():
    session = new_session()
    session.receive_assignment(assignment(1, [], ["A-0"], incarnation="i1"))
    drive(session)
    assert not session.receive_assignment(assignment(2, [], [], incarnation="i9"))
    assert drive(session) == []
    assert session.owned == {"A-0"}


# --- restart in place ----------------------------------------------------------------------


@pytest.mark.parametrize("protocol", ["compatible", "eager"])
def test_a_kept_resource_with_a_higher_epoch_restarts_in_place_gracefully(protocol):
    session = new_session()
    session.receive_assignment(
        assignment(1, ["A"], ["A-0", "A-1"], epochs={"A": 1, "A-0": 1, "A-1": 1}, protocol=protocol)
    )
    drive(session)
    session.receive_assignment(
        assignment(2, ["A"], ["A-0", "A-1"], epochs={"A": 1, "A-0": 2, "A-1": 1}, protocol=protocol)
    )
    assert session.state is member.MemberState.REVOKING
    batches = drive(session)
    assert [(type(a), a.resource) for a in batches[0]] == [(Stop, "A-0")]
    assert not batches[0][0].lost  # it stays here: progress may be committed
    assert [(type(a), a.resource, a.epoch) for a in batches[1]] == [(Start, "A-0", 2)]
    report = flat(batches, WriteReport)[-1].report
    assert report.generation == 2
    assert report.owned.tasks == {"A-0", "A-1"}
    assert session.state is member.MemberState.STABLE


def test_an_eager_document_that_restarts_one_resource_and_takes_another_loses_only_that_one():
    session = new_session()
    session.receive_assignment(assignment(1, [], ["A-0", "A-1"], epochs={"A-0": 1, "A-1": 1}))
    drive(session)
    session.receive_assignment(assignment(2, [], ["A-0"], epochs={"A-0": 2}, protocol="eager"))
    stops = flat(drive(session), Stop)
    assert {(a.resource, a.lost) for a in stops} == {("A-0", False), ("A-1", True)}


# --- a start that timed out --------------------------------------------------------------


def start_and_time_out(session, generation, tasks, slow):
    session.receive_assignment(assignment(generation, [], tasks))
    left = None
    while batch := session.next_actions():
        for action in batch:
            if isinstance(action, Start) and action.resource == slow:
                session.done(action, error="on_assigned timed out after 1s", still_running=True)
                left = action
            else:
                session.done(action)
    return left


def test_a_timed_out_start_is_not_owned_and_is_reported_failed():
    session = new_session()
    left = start_and_time_out(session, 1, ["A-0", "A-1"], slow="A-1")
    report = session.report()
    assert report.owned.tasks == {"A-0"}
    assert report.failed == {"A-1": "on_assigned timed out after 1s"}
    assert report.generation == 1
    assert session.left_running == {"A-1"}
    assert left.resource == "A-1"


def test_a_late_start_that_succeeded_is_stopped_as_lost_and_reported():
    session = new_session()
    left = start_and_time_out(session, 1, ["A-0", "A-1"], slow="A-1")
    assert session.late_start_returned(left)
    (stop,) = session.next_actions()
    assert (stop.resource, stop.lost, stop.cleanup) == ("A-1", True, True)
    session.done(stop)
    (write,) = session.next_actions()
    assert write.report.owned.tasks == {"A-0"}
    assert write.report.failed["A-1"].startswith("on_assigned timed out after 1s; it returned late")
    session.done(write)
    assert session.left_running == frozenset()
    assert session.idle


def test_a_late_start_that_failed_needs_no_stop():
    session = new_session()
    left = start_and_time_out(session, 1, ["A-1"], slow="A-1")
    session.late_start_returned(left, error="boom")
    batches = drive(session)
    assert flat(batches, Stop) == []
    assert "then failed: boom" in flat(batches, WriteReport)[-1].report.failed["A-1"]


def test_a_resource_is_not_started_again_while_its_timed_out_start_still_runs():
    session = new_session()
    left = start_and_time_out(session, 1, ["A-1"], slow="A-1")
    session.receive_assignment(assignment(2, [], ["A-1", "B-0"]))
    batches = drive(session)
    assert [a.resource for a in flat(batches, Start)] == ["B-0"]
    session.late_start_returned(left)
    batches = drive(session)
    assert [(type(a), a.resource) for batch in batches[:2] for a in batch] == [
        (Stop, "A-1"),
        (Start, "A-1"),
    ]
    assert session.owned == {"A-1", "B-0"}
    assert session.report().failed == {}


def test_a_late_start_of_a_fenced_member_is_still_cleaned_up():
    session = new_session(lease_ms=1_000)
    left = start_and_time_out(session, 1, ["A-1"], slow="A-1")
    session.tick(5_000)
    drive(session)
    session.late_start_returned(left)
    stops = flat(drive(session), Stop)
    assert [(a.resource, a.lost, a.cleanup) for a in stops] == [("A-1", True, True)]


def test_a_late_start_of_a_leaving_member_is_left_to_the_transport():
    session = new_session()
    left = start_and_time_out(session, 1, ["A-1"], slow="A-1")
    session.terminate()
    assert not session.late_start_returned(left)
    batches = drive(session)
    assert flat(batches, Stop) == []
    assert isinstance(batches[-1][0], sdk_session.ReleaseLease)
    assert session.left_running == frozenset()


def test_a_leaving_member_whose_start_still_runs_late_does_not_say_it_left():
    """A start callback that timed out may still start its resource: the last report
    must not promise the operator that this incarnation runs nothing."""
    session = new_session()
    start_and_time_out(session, 1, ["A-1"], slow="A-1")
    session.terminate()
    reports = [a.report for a in flat(drive(session), WriteReport)]
    assert reports
    assert not any(report.left for report in reports)
    assert session.state is member.MemberState.LEFT


def test_only_a_failed_start_may_be_left_running_and_only_once_returned():
    session = new_session()
    session.receive_assignment(assignment(1, [], ["A-0"]))
    (start,) = session.next_actions()
    with pytest.raises(errors.LocalProtocolError, match="only a failed start"):
        session.done(start, still_running=True)
    session.done(start, error="timed out", still_running=True)
    session.late_start_returned(start, error="boom")
    with pytest.raises(errors.LocalProtocolError, match="not left running"):
        session.late_start_returned(start)


# --- pause -----------------------------------------------------------------------------


def test_a_paused_connector_starts_then_pauses_before_the_report():
    session = new_session()
    session.receive_assignment(assignment(1, ["A", "B"], ["A-0", "B-0"], states={"A": "paused"}))
    batches = drive(session)
    kinds = [[(type(a).__name__, getattr(a, "resource", None)) for a in b] for b in batches]
    assert kinds == [
        [("Start", "A"), ("Start", "A-0"), ("Start", "B"), ("Start", "B-0")],
        [("Pause", "A"), ("Pause", "A-0")],
        [("WriteReport", None)],
    ]
    assert batches[-1][0].report.generation == 1
    assert session.paused == {"A", "A-0"}


def test_a_state_flip_pauses_or_resumes_owned_resources_without_restarting_them():
    session = new_session()
    session.receive_assignment(assignment(1, ["A"], ["A-0"]))
    drive(session)
    session.receive_assignment(assignment(2, ["A"], ["A-0"], states={"A": "paused"}))
    batches = drive(session)
    assert [type(a) for a in batches[0]] == [Pause, Pause]
    assert flat(batches, Start) == flat(batches, Stop) == []
    session.receive_assignment(assignment(3, ["A"], ["A-0"]))
    batches = drive(session)
    assert [(type(a), a.resource) for a in batches[0]] == [(Resume, "A"), (Resume, "A-0")]
    assert flat(batches, WriteReport)[-1].report.generation == 3
    assert session.paused == frozenset()


def test_a_stopped_or_restarted_paused_resource_is_paused_again_only_if_still_kept():
    session = new_session()
    session.receive_assignment(
        assignment(1, [], ["A-0", "A-1"], states={"A": "paused"}, epochs={"A-0": 1, "A-1": 1})
    )
    drive(session)
    session.receive_assignment(
        assignment(2, [], ["A-0"], states={"A": "paused"}, epochs={"A-0": 2})
    )
    batches = drive(session)
    assert [(type(a).__name__, a.resource) for b in batches[:-1] for a in b] == [
        ("Stop", "A-0"), ("Stop", "A-1"), ("Start", "A-0"), ("Pause", "A-0"),
    ]
    assert session.paused == {"A-0"}


def test_a_failed_pause_is_reported_and_not_retried():
    session = new_session()
    session.receive_assignment(assignment(1, [], ["A-0"], states={"A": "paused"}))
    batches = drive(session, errors={("Pause", "A-0"): "on_paused raised"})
    assert flat(batches, WriteReport)[-1].report.failed == {"A-0": "on_paused raised"}
    assert drive(session) == []


def test_a_fenced_or_leaving_member_neither_pauses_nor_resumes():
    session = new_session(lease_ms=1_000)
    session.receive_assignment(assignment(1, [], ["A-0"], states={"A": "paused"}))
    drive(session)
    session.tick(5_000)
    batches = drive(session)
    assert flat(batches, Pause) == flat(batches, Resume) == []
    assert session.paused == frozenset()
