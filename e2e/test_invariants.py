"""The drill invariants on hand-made event logs (offline: no cluster)."""

from __future__ import annotations

import pytest

from e2e import invariants
from kooper.core import events

K = events.Kind


def ev(ts, kind, member="", resource=""):
    return events.Event(
        ts_ms=ts, run="t", group="demo", member=member, resource=resource, event=kind
    )


def steady():
    return [
        ev(0, K.JOIN, "w-0"),
        ev(0, K.JOIN, "w-1"),
        ev(10, K.START, "w-0", "A"),
        ev(10, K.START, "w-0", "A-0"),
        ev(10, K.START, "w-1", "A-1"),
    ]


def test_a_resource_started_on_a_second_member_before_the_first_stopped_is_an_overlap():
    rows = [*steady(), ev(20, K.START, "w-1", "A-0"), ev(25, K.STOP, "w-0", "A-0")]
    assert invariants.overlaps(rows) == [invariants.Overlap(20, "A-0", ("w-0", "w-1"))]


def test_a_move_within_one_timestamp_is_not_an_overlap():
    rows = [*steady(), ev(20, K.START, "w-1", "A-0"), ev(20, K.STOP, "w-0", "A-0")]
    assert invariants.overlaps(rows) == []


def test_a_leave_ends_what_the_member_ran():
    rows = [*steady(), ev(20, K.LEAVE, "w-0"), ev(21, K.START, "w-1", "A-0")]
    assert invariants.overlaps(rows) == []
    assert invariants.running_at_end(rows) == {"A-0": {"w-1"}, "A-1": {"w-1"}}


def test_not_running_names_missing_and_doubly_run_resources():
    rows = [*steady(), ev(20, K.STOP, "w-1", "A-1"), ev(21, K.START, "w-1", "A")]
    assert invariants.not_running(rows, ["A", "A-0", "A-1"]) == ["A", "A-1"]


def test_imbalance_counts_tasks_only_and_idle_members():
    rows = steady()
    assert invariants.imbalance(rows) == 0
    assert invariants.imbalance(rows, members=["w-0", "w-1", "w-2"]) == 1


def test_a_stop_on_an_undisturbed_member_is_reported():
    rows = [
        *steady(),
        ev(20, K.LEAVE, "w-1"),
        ev(21, K.STOP, "w-1", "A-1"),
        ev(30, K.JOIN, "w-1"),
        ev(31, K.START, "w-1", "A-1"),
        ev(40, K.STOP, "w-0", "A-0"),
    ]
    bad = invariants.stops_on_undisturbed_members(rows, settle_ms=5)
    assert [(r.member, r.resource) for r in bad] == [("w-0", "A-0")]


def test_stops_while_restarting_and_just_before_the_leave_is_seen_are_fine():
    rows = [
        *steady(),
        ev(19, K.STOP, "w-1", "A-1"),
        ev(20, K.LEAVE, "w-1"),
        ev(30, K.JOIN, "w-1"),
        ev(33, K.STOP, "w-1", "A-1"),
    ]
    assert invariants.stops_on_undisturbed_members(rows, settle_ms=5, lead_ms=2) == []
    assert len(invariants.stops_on_undisturbed_members(rows, settle_ms=0, lead_ms=0)) == 2


def test_lost_work_started_elsewhere_before_the_delay_is_an_early_reassignment():
    rows = [
        *steady(),
        ev(100, K.LEAVE, "w-0"),
        ev(150, K.START, "w-1", "A-0"),
        ev(400, K.START, "w-1", "A"),
    ]
    early = invariants.early_reassignments(rows, departed="w-0", delay_ms=300)
    assert [(r.ts_ms, r.resource) for r in early] == [(150, "A-0")]
    assert (
        invariants.early_reassignments(rows, departed="w-0", delay_ms=300, tolerance_ms=260) == []
    )


def test_a_returning_identity_may_take_its_work_back_at_once_unless_forbidden():
    rows = [
        *steady(),
        ev(100, K.LEAVE, "w-0"),
        ev(120, K.JOIN, "w-0"),
        ev(130, K.START, "w-0", "A-0"),
    ]
    assert invariants.early_reassignments(rows, departed="w-0", delay_ms=300) == []
    strict = invariants.early_reassignments(
        rows, departed="w-0", delay_ms=300, same_member_ok=False
    )
    assert [r.resource for r in strict] == ["A-0"]


def test_summary_counts_rows():
    rows = [*steady(), ev(5, K.ROUND)]
    assert invariants.summary(rows) == {
        "rows": 6,
        "rounds": 1,
        "starts": 3,
        "stops": 0,
        "overlaps": 0,
    }


def test_connector_names_with_dashes_are_not_tasks():
    assert invariants.is_task("warehouse-sink-7")
    assert not invariants.is_task("warehouse-sink")
    rows = [ev(0, K.START, "w-0", "warehouse-sink"), ev(0, K.START, "w-1", "warehouse-sink-0")]
    assert invariants.imbalance(rows) == 0


# --- every invariant fails on a log that breaks it --------------------------------------
# Each log below is the smallest story that breaks one drill invariant; the check must
# name the violation. Together with the passing cases above, none of them is vacuous.

EXPECTED = {"A", "A-0", "A-1"}


def test_double_ownership_fails_the_overlap_invariant():
    # w-1 starts A-0 while w-0, which never stopped or left, still runs it.
    rows = [*steady(), ev(20, K.START, "w-1", "A-0")]
    assert invariants.overlaps(rows) == [invariants.Overlap(20, "A-0", ("w-0", "w-1"))]
    assert invariants.not_running(rows, EXPECTED) == ["A-0"]  # and it ends doubled


def test_lost_work_fails_the_nothing_lost_invariant():
    # w-0 is killed; its instance A comes back, its task A-0 never does.
    rows = [*steady(), ev(20, K.LEAVE, "w-0"), ev(50, K.START, "w-1", "A")]
    assert invariants.overlaps(rows) == []
    assert invariants.not_running(rows, EXPECTED) == ["A-0"]


def test_work_stopped_and_never_restarted_fails_the_nothing_lost_invariant():
    rows = [*steady(), ev(20, K.STOP, "w-1", "A-1")]
    assert invariants.not_running(rows, EXPECTED) == ["A-1"]


def test_a_reassignment_before_the_deadline_fails_the_delay_invariant():
    # The delay is 300 ms from w-0's leave at 100: A-0 starts on w-1 at 399, one ms early.
    rows = [*steady(), ev(100, K.LEAVE, "w-0"), ev(399, K.START, "w-1", "A-0"),
            ev(400, K.START, "w-1", "A")]
    early = invariants.early_reassignments(rows, departed="w-0", delay_ms=300)
    assert [(r.ts_ms, r.member, r.resource) for r in early] == [(399, "w-1", "A-0")]
    # The same log checked against the delay it honours passes: the check can tell.
    assert invariants.early_reassignments(rows, departed="w-0", delay_ms=299) == []


def test_a_log_that_never_saw_the_departure_cannot_pass_the_delay_invariant():
    with pytest.raises(invariants.VacuousCheck, match="w-0 never left"):
        invariants.early_reassignments(steady(), departed="w-0", delay_ms=300)


def test_a_log_that_ends_before_the_lost_work_returns_cannot_pass_the_delay_invariant():
    rows = [*steady(), ev(100, K.LEAVE, "w-0")]
    with pytest.raises(invariants.VacuousCheck, match="none of w-0's 2 lost resources"):
        invariants.early_reassignments(rows, departed="w-0", delay_ms=300)


def test_a_member_that_ran_nothing_cannot_pass_the_delay_invariant():
    rows = [*steady(), ev(5, K.JOIN, "w-2"), ev(100, K.LEAVE, "w-2")]
    with pytest.raises(invariants.VacuousCheck, match="w-2 ran nothing"):
        invariants.early_reassignments(rows, departed="w-2", delay_ms=300)


def test_a_stop_on_a_member_nobody_restarted_fails_the_undisturbed_invariant():
    # Scale-down: w-2 leaves, and w-0 (staying) gives up A-0 for no reason.
    rows = [*steady(), ev(5, K.JOIN, "w-2"), ev(20, K.LEAVE, "w-2"),
            ev(21, K.STOP, "w-0", "A-0"), ev(22, K.START, "w-1", "A-0")]
    bad = invariants.stops_on_undisturbed_members(rows, lead_ms=0)
    assert [(r.ts_ms, r.member, r.resource) for r in bad] == [(21, "w-0", "A-0")]


def test_an_uneven_spread_fails_the_balance_invariant():
    rows = [*steady(), ev(20, K.STOP, "w-1", "A-1"), ev(20, K.START, "w-0", "A-1")]
    assert invariants.imbalance(rows) == 2


def test_a_stop_that_moves_work_to_a_returning_member_is_not_needless():
    # w-1 restarted and came back empty; w-0 (undisturbed) hands it A-0: a move.
    rows = [*steady(), ev(20, K.LEAVE, "w-1"), ev(21, K.STOP, "w-1", "A-1"),
            ev(22, K.START, "w-0", "A-1"), ev(30, K.JOIN, "w-1"),
            ev(40, K.STOP, "w-0", "A-0"), ev(41, K.START, "w-1", "A-0")]
    assert [r.resource for r in invariants.stops_on_undisturbed_members(rows)] == ["A-0"]
    assert invariants.needless_stops(rows) == []


def test_a_stop_and_start_in_place_on_an_undisturbed_member_fails_the_needless_invariant():
    # What eager does: w-0 is not restarting, yet stops A-0 only to start it again.
    rows = [*steady(), ev(40, K.STOP, "w-0", "A-0"), ev(41, K.START, "w-0", "A-0"),
            ev(50, K.STOP, "w-1", "A-1")]
    bad = invariants.needless_stops(rows)
    assert [(r.ts_ms, r.member, r.resource) for r in bad] == [
        (40, "w-0", "A-0"), (50, "w-1", "A-1")]


# --- what a member runs: docs/events.md, "Interval" ----------------------------------


def test_a_restart_without_a_leave_ends_what_the_member_ran_before():
    # w-0 crashed without writing a stop or a leave and came back (join at 50): it runs
    # nothing it did not start again, so w-1 taking A-0 at 60 is no double run.
    rows = [*steady(), ev(50, K.JOIN, "w-0"), ev(60, K.START, "w-1", "A-0")]
    assert invariants.overlaps(rows) == []
    assert invariants.running_at_end(rows) == {"A-0": {"w-1"}, "A-1": {"w-1"}}


def test_a_member_that_left_but_stops_later_ran_it_until_that_stop():
    # A zombie: w-0 was declared gone at 20 but still ran A-0 until its stop at 40.
    rows = [*steady(), ev(20, K.LEAVE, "w-0"), ev(30, K.START, "w-1", "A-0"),
            ev(40, K.STOP, "w-0", "A-0")]
    assert invariants.overlaps(rows) == [invariants.Overlap(30, "A-0", ("w-0", "w-1"))]
    assert invariants.running_at_end(rows) == {"A-0": {"w-1"}, "A-1": {"w-1"}}


def test_a_resource_and_a_member_are_named_within_their_group():
    # Two WorkerGroups in two namespaces, each with a pod w-0 and a connector A
    # (docs/events.md: every metric is per run and group). w-0 of "other" leaving ends
    # nothing in "demo", and A-0 in "other" is another resource than A-0 in "demo".
    def there(ts, kind, member="", resource=""):
        return events.Event(ts_ms=ts, run="t", group="other", member=member,
                            resource=resource, event=kind)

    rows = [*steady(), there(12, K.START, "w-9", "A-0"), there(20, K.LEAVE, "w-0"),
            ev(30, K.START, "w-1", "A-0")]
    assert invariants.overlaps(rows) == [invariants.Overlap(30, "A-0", ("w-0", "w-1"))]


def test_a_resource_still_running_at_a_timestamp_beyond_2_to_the_62_is_held():
    # ts_ms is any signed 64-bit long (docs/events.md): a start that nothing ended
    # holds the resource past every later row, however late the clock reads.
    late = 2**62 + 1000
    rows = [ev(late, K.START, "w-0", "A-0"), ev(late + 100, K.START, "w-1", "A-0")]
    assert invariants.overlaps(rows) == [invariants.Overlap(late + 100, "A-0", ("w-0", "w-1"))]
    assert invariants.running_at_end(rows) == {"A-0": {"w-0", "w-1"}}


def test_a_resource_and_a_member_are_named_within_their_run():
    # docs/events.md: "a file may hold many runs" and a resource is named by (run,
    # group, resource): two drills' logs read together are not one drill's overlap.
    def then(ts, kind, member="", resource=""):
        return events.Event(ts_ms=ts, run="later", group="demo", member=member,
                            resource=resource, event=kind)

    rows = [*steady(), then(20, K.START, "w-1", "A-0"), then(25, K.LEAVE, "w-0")]
    assert invariants.overlaps(rows) == []
    assert invariants.running_at_end(rows)["A-0"] == {"w-0", "w-1"}
    assert invariants.overlaps([*rows, then(30, K.START, "w-0", "A-0")]) == [
        invariants.Overlap(30, "A-0", ("w-0", "w-1"))]
