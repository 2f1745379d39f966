"""The sans-I/O worker session: ordering, generations, short-circuit, fencing, leaving."""

import pytest
from tests.sdk.session_helpers import (
    EAGER_ONLY,
    assignment,
    drive,
    flat,
    new_session,
)

from kooper.core import errors, model
from kooper.protocol import member
from kooper.sdk import session as sdk_session

Start, Stop, WriteReport = sdk_session.Start, sdk_session.Stop, sdk_session.WriteReport


def test_a_joined_member_first_reports_that_it_owns_nothing():
    session = new_session()
    batches = drive(session)
    assert len(batches) == 1
    (write,) = batches[0]
    assert isinstance(write, WriteReport)
    assert write.report.generation == -1
    assert not write.report.owned


def test_an_assignment_starts_everything_then_reports_the_applied_generation():
    session = new_session()
    drive(session)
    assert session.receive_assignment(
        assignment(1, ["A"], ["A-0", "A-1"], epochs={"A-0": 4}, configs={"A": {"k": "v"}})
    )
    batches = drive(session)
    starts = flat(batches, Start)
    assert [s.resource for s in starts] == ["A", "A-0", "A-1"]
    assert starts[1].epoch == 4
    assert starts[1].config == {"k": "v"}
    assert starts[0].connector
    assert not starts[1].connector
    report = flat(batches, WriteReport)[-1].report
    assert report.generation == 1
    assert report.owned == model.ConnectorsAndTasks.of(["A"], ["A-0", "A-1"])
    assert session.state is member.MemberState.STABLE


def test_revoked_resources_stop_in_an_earlier_batch_than_new_ones_start():
    session = new_session()
    session.receive_assignment(assignment(1, [], ["A-0", "A-1"]))
    drive(session)
    session.receive_assignment(assignment(2, [], ["A-1", "B-0"], revoked=([], ["A-0"])))
    assert session.state is member.MemberState.REVOKING
    batches = drive(session)
    assert [type(a) for a in batches[0]] == [Stop]
    assert batches[0][0].resource == "A-0"
    assert not batches[0][0].lost
    assert [a.resource for a in batches[1]] == ["B-0"]
    assert session.state is member.MemberState.STABLE


def test_nothing_new_starts_while_a_stop_is_still_in_flight():
    session = new_session()
    session.receive_assignment(assignment(1, [], ["A-0"]))
    drive(session)
    session.receive_assignment(assignment(2, [], ["B-0"]))
    (stop,) = session.next_actions()
    assert session.next_actions() == []
    session.done(stop)
    assert [a.resource for a in session.next_actions()] == ["B-0"]


def test_an_older_or_repeated_generation_is_ignored():
    session = new_session()
    assert session.receive_assignment(assignment(5, [], ["A-0"]))
    drive(session)
    assert not session.receive_assignment(assignment(5, [], ["B-0"]))
    assert not session.receive_assignment(assignment(4, [], []))
    assert drive(session) == []
    assert session.owned == {"A-0"}


def test_a_newer_assignment_arriving_mid_apply_replaces_the_target():
    session = new_session()
    session.receive_assignment(assignment(1, [], ["A-0", "A-1"]))
    batch = session.next_actions()
    assert session.receive_assignment(assignment(2, [], ["A-1"]))
    for action in batch:
        session.done(action)
    batches = drive(session)
    assert [a.resource for a in flat(batches, Stop)] == ["A-0"]
    assert flat(batches, WriteReport)[-1].report.generation == 2
    assert session.owned == {"A-1"}


def test_an_eager_assignment_is_a_full_replacement():
    session = new_session(protocols=EAGER_ONLY)
    session.receive_assignment(assignment(1, [], ["A-0", "A-1"], protocol="eager"))
    drive(session)
    session.receive_assignment(assignment(2, [], ["A-1"], protocol="eager"))
    batches = drive(session)
    assert [(a.resource, a.lost) for a in flat(batches, Stop)] == [("A-0", False)]


def test_an_eager_only_member_revoked_by_eager_runs_on_revoked():
    session = new_session(protocols=EAGER_ONLY)
    session.receive_assignment(assignment(1, [], ["A-0"], protocol="eager"))
    drive(session)
    session.receive_assignment(assignment(2, [], [], revoked=([], ["A-0"]), protocol="eager"))
    assert [a.lost for a in flat(drive(session), Stop)] == [False]


def test_a_cooperative_member_revoked_by_an_eager_assignment_treats_it_as_lost():
    session = new_session()
    session.receive_assignment(assignment(1, ["A"], ["A-0", "A-1"]))
    drive(session)
    session.receive_assignment(
        assignment(2, [], [], revoked=(["A"], ["A-0", "A-1"]), protocol="eager")
    )
    stops = flat(drive(session), Stop)
    assert {(a.resource, a.lost) for a in stops} == {("A", True), ("A-0", True), ("A-1", True)}
    assert all(a.protocol is model.Protocol.EAGER for a in stops)


def test_a_cooperative_revocation_is_not_lost():
    session = new_session()
    session.receive_assignment(assignment(1, [], ["A-0"]))
    drive(session)
    session.receive_assignment(assignment(2, [], [], revoked=([], ["A-0"])))
    assert [a.lost for a in flat(drive(session), Stop)] == [False]


def test_a_new_epoch_or_config_restarts_the_resource():
    session = new_session()
    session.receive_assignment(assignment(1, [], ["A-0", "A-1"], epochs={"A-0": 1, "A-1": 1}))
    drive(session)
    session.receive_assignment(
        assignment(2, [], ["A-0", "A-1"], epochs={"A-0": 2, "A-1": 1}, configs={})
    )
    batches = drive(session)
    assert [a.resource for a in batches[0]] == ["A-0"]
    assert [(a.resource, a.epoch) for a in batches[1]] == [("A-0", 2)]
    session.receive_assignment(
        assignment(3, [], ["A-0", "A-1"], epochs={"A-0": 2, "A-1": 1}, configs={"A": {"x": "1"}})
    )
    assert {a.resource for a in flat(drive(session), Start)} == {"A-0", "A-1"}


def test_a_new_epoch_or_config_that_arrives_while_the_resource_starts_still_restarts_it():
    # A restart (kooper.dev/restart) or a config edit lands while on_assigned still runs
    # for the old epoch and config: when the start returns, the resource runs as the
    # start was told, not as the newer document says, so it must be restarted.
    for newer in ({"epochs": {"A-0": 2}}, {"epochs": {"A-0": 1}, "configs": {"A": {"x": "2"}}}):
        session = new_session()
        session.receive_assignment(assignment(1, [], ["A-0"], epochs={"A-0": 1},
                                              configs={"A": {"x": "1"}}))
        (start,) = session.next_actions()
        assert session.receive_assignment(
            assignment(2, [], ["A-0"], **{"configs": {"A": {"x": "1"}}, **newer}))
        session.done(start)
        batches = drive(session)
        assert [(type(a).__name__, a.resource) for a in batches[0]] == [("Stop", "A-0")]
        assert not batches[0][0].lost  # a restart in place: it stays here
        (restart,) = batches[1]
        assert (restart.epoch, restart.config) == (newer["epochs"]["A-0"],
                                                  newer.get("configs", {"A": {"x": "1"}})["A"])


def test_a_failed_start_is_reported_and_not_retried_within_the_generation():
    session = new_session()
    session.receive_assignment(assignment(1, [], ["A-0", "A-1"]))
    batches = drive(session, errors={("Start", "A-1"): "boom"})
    report = flat(batches, WriteReport)[-1].report
    assert report.failed == {"A-1": "boom"}
    assert report.owned.tasks == {"A-0"}
    assert report.generation == 1
    assert drive(session) == []
    session.receive_assignment(assignment(2, [], ["A-0", "A-1"]))
    report = flat(drive(session), WriteReport)[-1].report
    assert report.failed == {}
    assert report.owned.tasks == {"A-0", "A-1"}


def test_a_failed_stop_counts_as_stopped_and_is_reported():
    session = new_session()
    session.receive_assignment(assignment(1, [], ["A-0"]))
    drive(session)
    session.receive_assignment(assignment(2, [], []))
    report = flat(drive(session, errors={("Stop", "A-0"): "timed out"}), WriteReport)[-1].report
    assert report.failed == {"A-0": "timed out"}
    assert not report.owned


def test_an_unrenewed_lease_fences_the_member_and_stops_everything_as_lost():
    session = new_session(lease_ms=30_000)
    session.receive_assignment(assignment(1, ["A"], ["A-0"]))
    drive(session)
    session.lease_renewed(10_000)
    session.tick(39_999)
    assert session.state is member.MemberState.STABLE
    session.tick(40_000)
    assert session.state is member.MemberState.FENCED
    batches = drive(session)
    assert {(a.resource, a.lost) for a in flat(batches, Stop)} == {("A", True), ("A-0", True)}
    assert flat(batches, Start) == []
    report = flat(batches, WriteReport)[-1].report
    assert report.fenced
    assert not report.owned


def test_a_fenced_member_ignores_assignments_until_its_lease_is_back_then_needs_a_newer_one():
    session = new_session(lease_ms=1_000)
    session.receive_assignment(assignment(3, [], ["A-0"]))
    drive(session)
    session.tick(5_000)
    drive(session)
    assert not session.receive_assignment(assignment(4, [], ["A-0"]))
    session.lease_renewed(6_000)
    assert session.state is member.MemberState.JOINING
    report = flat(drive(session), WriteReport)[-1].report
    assert report.fenced
    assert report.generation == 3
    assert not session.receive_assignment(assignment(3, [], ["A-0"]))
    assert session.receive_assignment(assignment(5, [], ["A-0"]))
    report = flat(drive(session), WriteReport)[-1].report
    assert not report.fenced
    assert report.generation == 5
    assert session.owned == {"A-0"}


def test_terminate_stops_everything_gracefully_reports_empty_and_releases_the_lease():
    session = new_session()
    session.receive_assignment(assignment(1, ["A"], ["A-0"]))
    drive(session)
    session.terminate()
    batches = drive(session)
    assert {(a.resource, a.lost) for a in batches[0]} == {("A", False), ("A-0", False)}
    assert isinstance(batches[1][0], WriteReport)
    assert not batches[1][0].report.owned
    assert batches[1][0].report.left  # the operator may read it after the Lease is gone
    assert isinstance(batches[2][0], sdk_session.ReleaseLease)
    assert session.state is member.MemberState.LEFT
    assert session.next_actions() == []


def test_only_the_last_report_of_a_leaving_member_says_it_left():
    session = new_session()
    session.receive_assignment(assignment(1, ["A"], ["A-0"]))
    reports = [a.report for batch in drive(session) for a in batch if isinstance(a, WriteReport)]
    assert reports
    assert not any(report.left for report in reports)
    session.terminate()
    assert not session.report().left  # A and A-0 are still to stop
    (stops,) = [session.next_actions()]
    assert {action.resource for action in stops} == {"A", "A-0"}
    session.done(stops[0])
    assert not session.report().left
    session.done(stops[1])
    assert session.report().left


def test_terminate_does_not_wait_for_a_report_that_cannot_be_written():
    session = new_session()
    session.terminate()
    batches = drive(session, errors={("WriteReport", None): "api down"})
    assert isinstance(batches[-1][0], sdk_session.ReleaseLease)
    assert session.state is member.MemberState.LEFT


def test_a_report_that_failed_to_write_is_retried_after_the_next_tick():
    session = new_session()
    (write,) = session.next_actions()
    session.done(write, error="api down")
    assert session.next_actions() == []
    session.tick(1)
    assert isinstance(session.next_actions()[0], WriteReport)


def test_an_assignment_for_another_member_is_a_remote_error():
    session = new_session()
    with pytest.raises(errors.RemoteProtocolError, match="delivered to 'w-0'"):
        session.receive_assignment(assignment(1, name="w-9"))


def test_acknowledging_an_action_twice_is_a_local_error():
    session = new_session()
    (write,) = session.next_actions()
    session.done(write)
    with pytest.raises(errors.LocalProtocolError, match="not in flight"):
        session.done(write)
