"""Membership epochs on the worker side (issue 12, mechanism 1: a stale assignment
after a partition). The operator gives each membership a new, greater epoch and
retires it when it declares the member departed; the worker acts only on documents
of its current epoch, and after fencing itself only on a newer one."""

import dataclasses

from tests.sdk.session_helpers import assignment, drive, flat, new_session

from kooper.protocol import member
from kooper.sdk.session import Start, Stop, WriteReport


def document(generation, tasks=(), *, epoch, connectors=(), rejoins=0):
    return dataclasses.replace(assignment(generation, connectors, tasks), member_epoch=epoch,
                               rejoins=rejoins)


def test_a_document_written_for_the_epoch_a_partition_retired_is_never_applied():
    # Issue 12: cut off for 20.03 s, the member missed generation 5 (epoch 3, assigning
    # c00); the operator declared it departed and gave c00 to another member; 28 ms
    # later the partition healed and the member read generation 5: newer than anything
    # it had accepted, right incarnation, so it started c00 next to its new owner.
    session = new_session(lease_ms=1_000)
    session.receive_assignment(document(4, ["w-0-task-0"], epoch=3))
    drive(session)
    session.tick(1_000)  # the partition: the member fences itself
    drive(session)
    session.lease_renewed(1_200)  # healed
    assert session.state is member.MemberState.JOINING
    assert not session.receive_assignment(document(5, ["c00-0"], epoch=3))
    batches = drive(session)
    assert flat(batches, Start) == []
    report = flat(batches, WriteReport)[-1].report
    assert (report.fenced, report.member_epoch, report.owned.sorted()) == (True, 3, [])
    assert report.rejoins == 1
    # The operator rejoins it with a new epoch and an empty assignment, then gives work.
    assert session.receive_assignment(document(7, [], epoch=4, rejoins=1))
    report = flat(drive(session), WriteReport)[-1].report
    assert (report.fenced, report.member_epoch, report.generation) == (False, 4, 7)
    assert session.receive_assignment(document(8, ["c01-0"], epoch=4, rejoins=1))
    assert [a.resource for a in flat(drive(session), Start)] == ["c01-0"]


def test_a_member_cut_off_before_its_first_document_never_applies_one_written_meanwhile():
    # Hard chaos seed 47195: a member joined and was cut off at once. Its delayed join
    # report reached the operator, which issued it epoch 4 and wrote it documents; the
    # member fenced itself (with no epoch to retire), the operator declared it departed
    # (retiring 4) and gave its work away; the partition healed before the ConfigMap
    # was deleted, and the member read a document of epoch 4: newer than anything it
    # knew. Each fence counts, and a document names the count its epoch was issued for.
    session = new_session(lease_ms=1_000)
    drive(session)
    session.tick(1_000)  # cut off before any document: fenced, nothing to retire
    drive(session)
    session.lease_renewed(1_200)  # healed
    assert not session.receive_assignment(document(5, ["c02-3"], epoch=4))
    batches = drive(session)
    assert flat(batches, Start) == []
    report = flat(batches, WriteReport)[-1].report
    assert (report.fenced, report.rejoins, report.member_epoch) == (True, 1, 0)
    # The operator answers the rejoin with a new epoch issued for it.
    assert session.receive_assignment(document(7, ["c01-0"], epoch=6, rejoins=1))
    assert [a.resource for a in flat(drive(session), Start)] == ["c01-0"]


def test_a_document_of_an_older_epoch_is_ignored_even_with_a_newer_generation():
    session = new_session()
    session.receive_assignment(document(3, ["A-0"], epoch=5))
    drive(session)
    assert not session.receive_assignment(document(9, ["A-0", "A-1"], epoch=4))
    assert drive(session) == []
    assert session.owned == {"A-0"}


def test_a_newer_epoch_ends_the_old_membership_before_the_new_one_runs_anything():
    session = new_session()
    session.receive_assignment(document(1, ["A-0", "A-1"], epoch=1))
    drive(session)
    assert session.receive_assignment(document(2, ["A-1", "A-2"], epoch=2))
    batches = drive(session)
    stops = flat(batches, Stop)
    assert {(a.resource, a.lost) for a in stops} == {("A-0", True), ("A-1", True)}
    assert batches.index(next(b for b in batches if isinstance(b[0], Start))) > 0
    assert {a.resource for a in flat(batches, Start)} == {"A-1", "A-2"}
    assert flat(batches, WriteReport)[-1].report.member_epoch == 2


def test_a_start_of_the_old_membership_that_returns_under_a_newer_epoch_stops_as_lost_first():
    # The newer epoch arrives while on_assigned of the old membership still runs: what
    # that start began belongs to the retired membership too.
    session = new_session()
    session.receive_assignment(document(1, ["A-0"], epoch=3))
    (start,) = session.next_actions()
    assert session.receive_assignment(document(2, ["A-0"], epoch=4))
    session.done(start)
    batches = drive(session)
    assert [(a.resource, a.lost) for a in flat(batches[:1], Stop)] == [("A-0", True)]
    assert [a.resource for a in flat(batches, Start)] == ["A-0"]


def test_the_first_epoch_seen_is_adopted_without_stopping_anything():
    session = new_session()
    session.receive_assignment(assignment(1, [], ["A-0"]))  # an operator without epochs
    drive(session)
    assert session.receive_assignment(document(2, ["A-0"], epoch=1))
    assert flat(drive(session), Stop) == []


def test_documents_without_an_epoch_follow_the_generation_rule_alone():
    session = new_session(lease_ms=1_000)
    session.receive_assignment(assignment(3, [], ["A-0"]))
    drive(session)
    session.tick(1_000)
    drive(session)
    session.lease_renewed(1_100)
    assert not session.receive_assignment(assignment(3, [], ["A-0"]))
    assert session.receive_assignment(assignment(4, [], ["A-0"]))
    assert flat(drive(session), WriteReport)[-1].report.member_epoch == 0
