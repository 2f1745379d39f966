"""Failures stay small: reasons are cut, counted per resource, and the report always fits;
a crashed task is reported, not restarted within its generation; stopped runs nothing."""

from tests.sdk.session_helpers import EAGER_ONLY, assignment, drive, flat, new_session

from kooper.protocol import codec, member, messages
from kooper.sdk.session import Start, Stop, WriteReport


def last_report(batches):
    return flat(batches, WriteReport)[-1].report


def test_10_000_failed_starts_make_a_report_that_fits_and_decodes_to_itself():
    # Issue 13: this report used to encode to 469,051 bytes and raise LocalProtocolError.
    session = new_session()
    tasks = [f"orders-{n}" for n in range(10_000)]
    session.receive_assignment(assignment(1, [], tasks))
    error = "on_assigned raised ConnectionError: broker unreachable " + "x" * 200
    report = last_report(drive(session, errors={("Start", t): error for t in tasks}))
    assert report.failure_counts == dict.fromkeys(tasks, 1)
    assert len(report.failed) == messages.MAX_FAILURE_REASONS
    assert set(report.failed) == {f"orders-{n}" for n in range(messages.MAX_FAILURE_REASONS)}
    text = codec.encode_report(report)
    assert len(text) <= messages.MAX_REPORT_BYTES
    assert codec.decode_report(text) == report


def test_a_long_reason_is_cut_to_the_limit():
    session = new_session()
    session.receive_assignment(assignment(1, [], ["A-0"]))
    report = last_report(drive(session, errors={("Start", "A-0"): "boom " * 1000}))
    assert len(report.failed["A-0"]) == messages.MAX_ERROR_CHARS
    assert report.failed["A-0"].endswith("...")


def test_each_failure_of_a_resource_counts_and_the_count_outlives_a_recovery():
    session = new_session()
    counts = []
    # generation -> (assigned, whether its start fails)
    for generation, tasks, fails in (
        (1, ["A-0"], True),
        (2, ["A-0"], True),
        (3, ["A-0"], False),  # it runs
        (4, [], False),  # and stops
        (5, ["A-0"], True),
    ):
        session.receive_assignment(assignment(generation, [], tasks))
        errors = {("Start", "A-0"): "boom"} if fails else {}
        counts.append(dict(last_report(drive(session, errors=errors)).failure_counts))
    assert counts == [{"A-0": 1}, {"A-0": 2}, {}, {}, {"A-0": 3}]


def test_a_task_that_dies_by_itself_is_reported_failed_with_no_stop_and_no_restart():
    session = new_session()
    session.receive_assignment(assignment(1, ["A"], ["A-0", "A-1"]))
    drive(session)
    assert session.task_failed("A-1", "consumer crashed: offset out of range")
    batches = drive(session)
    assert flat(batches, Stop) == []
    assert flat(batches, Start) == []  # not within this generation
    report = last_report(batches)
    assert report.owned.tasks == {"A-0"}
    assert report.failed == {"A-1": "consumer crashed: offset out of range"}
    assert report.failure_counts == {"A-1": 1}
    assert report.generation == 1
    # A newer generation (the operator's restart) starts it again.
    session.receive_assignment(assignment(2, ["A"], ["A-0", "A-1"]))
    assert [a.resource for a in flat(drive(session), Start)] == ["A-1"]


def test_a_crash_of_something_not_running_changes_nothing():
    session = new_session()
    session.receive_assignment(assignment(1, [], ["A-0"]))
    drive(session)
    assert not session.task_failed("B-0", "who?")
    assert drive(session) == []


def test_a_crash_while_its_stop_runs_leaves_the_stop_to_settle_it():
    session = new_session()
    session.receive_assignment(assignment(1, [], ["A-0"]))
    drive(session)
    session.receive_assignment(assignment(2, [], []))
    (stop,) = session.next_actions()
    assert session.task_failed("A-0", "died while stopping")
    session.done(stop)
    report = last_report(drive(session))
    assert not report.owned
    assert report.failure_counts == {"A-0": 1}


def test_a_stopped_connector_runs_neither_its_instance_nor_its_tasks():
    session = new_session()
    session.receive_assignment(assignment(1, ["A", "B"], ["A-0", "B-0"], states={"A": "stopped"}))
    batches = drive(session)
    assert {a.resource for a in flat(batches, Start)} == {"B", "B-0"}
    report = last_report(batches)
    assert report.owned.sorted() == ["B", "B-0"]
    assert report.generation == 1


def test_stopping_a_running_connector_stops_it_gracefully_even_in_an_eager_group():
    session = new_session()
    session.receive_assignment(assignment(1, ["A"], ["A-0"], protocol="eager"))
    drive(session)
    session.receive_assignment(
        assignment(2, ["A"], ["A-0"], protocol="eager", states={"A": "stopped"})
    )
    batches = drive(session)
    assert {(a.resource, a.lost) for a in flat(batches, Stop)} == {("A", False), ("A-0", False)}
    assert not last_report(batches).owned
    assert session.state is member.MemberState.STABLE
    # Running again: started again.
    session.receive_assignment(assignment(3, ["A"], ["A-0"], protocol="eager"))
    assert {a.resource for a in flat(drive(session), Start)} == {"A", "A-0"}


def test_an_eager_only_member_also_runs_nothing_of_a_stopped_connector():
    session = new_session(protocols=EAGER_ONLY)
    session.receive_assignment(assignment(1, ["A"], [], protocol="eager", states={"A": "stopped"}))
    assert flat(drive(session), Start) == []
