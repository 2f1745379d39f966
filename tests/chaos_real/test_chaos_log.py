"""The real chaos run's invariants (e2e.chaos_log) on small hand-made logs."""

from __future__ import annotations

from e2e import chaos_log as log

from kooper.core import events

K = events.Kind


def row(ts: int, member: str, kind: K, resource: str, epoch: int = 1) -> events.Event:
    return events.Event(ts_ms=ts, run="r", group="g", member=member, resource=resource,
                        event=kind, epoch=epoch)


def proc(ts: int, incarnation: str, what: str, code: int | None = None) -> log.ProcessRow:
    return log.ProcessRow(ts_ms=ts, incarnation=incarnation, pod=incarnation.partition(".")[0],
                          what=what, code=code)


def test_a_run_ends_at_its_stop_else_at_its_process_exit_else_it_is_open():
    rows = {"a.1": [row(10, "a", K.START, "x"), row(20, "a", K.STOP, "x"),
                    row(30, "a", K.START, "y")],
            "b.2": [row(15, "b", K.START, "z")]}
    runs = log.runs(rows, [proc(40, "a.1", "exit", 137)])
    assert [(r.resource, r.start_ms, r.end_ms, r.ended_by) for r in runs] == [
        ("x", 10, 20, "stop"), ("y", 30, 40, "exit"), ("z", 15, log.OPEN, "open")]


def test_a_hand_over_at_one_instant_is_not_an_overlap():
    rows = {"a.1": [row(10, "a", K.START, "x"), row(20, "a", K.STOP, "x")],
            "b.1": [row(20, "b", K.START, "x", epoch=2)]}
    assert log.overlaps(log.runs(rows, [])) == []


def test_two_live_members_running_one_resource_is_an_overlap_and_not_excused():
    rows = {"a.1": [row(10, "a", K.START, "x"), row(30, "a", K.STOP, "x")],
            "b.1": [row(20, "b", K.START, "x", epoch=2)]}
    [overlap] = log.overlaps(log.runs(rows, []))
    assert (overlap.from_ms, overlap.to_ms, overlap.frozen) == (20, 30, ())
    assert not log.while_frozen(overlap, [])


def test_a_frozen_member_still_runs_what_it_ran_until_its_process_ends():
    # a runs x, is frozen at 100; b starts x at 200 (a higher epoch); a is thawed at 300
    # and its process ends at 305: the check counts a as running x from 10 to 305.
    rows = {"a.1": [row(10, "a", K.START, "x")], "b.1": [row(200, "b", K.START, "x", 2)]}
    processes = [proc(100, "a.1", "sigstop"), proc(300, "a.1", "sigcont"),
                 proc(305, "a.1", "exit", 3)]
    [overlap] = log.overlaps(log.runs(rows, processes), processes)
    assert (overlap.from_ms, overlap.to_ms, overlap.frozen) == (200, 305, ("a.1",))
    assert log.while_frozen(overlap, processes)
    assert log.thawed_at("a.1", processes) == 300


def test_a_frozen_members_stop_row_written_after_the_thaw_ends_its_run():
    rows = {"a.1": [row(10, "a", K.START, "x"), row(310, "a", K.STOP, "x")],
            "b.1": [row(200, "b", K.START, "x", 2)]}
    processes = [proc(100, "a.1", "sigstop"), proc(300, "a.1", "sigcont")]
    [overlap] = log.overlaps(log.runs(rows, processes), processes)
    assert overlap.to_ms == 310


def test_a_takeover_of_a_frozen_members_work_at_the_same_epoch_is_not_fenced():
    rows = {"a.1": [row(10, "a", K.START, "x", 3)], "b.1": [row(200, "b", K.START, "x", 3)]}
    processes = [proc(100, "a.1", "sigstop"), proc(300, "a.1", "sigcont"),
                 proc(305, "a.1", "exit", 3)]
    [overlap] = log.overlaps(log.runs(rows, processes), processes)
    assert not log.while_frozen(overlap, processes)


def test_a_takeover_after_the_thaw_is_not_excused_by_the_earlier_freeze():
    rows = {"a.1": [row(10, "a", K.START, "x")], "b.1": [row(400, "b", K.START, "x", 2)]}
    processes = [proc(100, "a.1", "sigstop"), proc(300, "a.1", "sigcont")]
    [overlap] = log.overlaps(log.runs(rows, processes), processes)
    assert overlap.frozen == ()
    assert not log.while_frozen(overlap, processes)


def test_lost_is_what_does_not_run_exactly_once():
    rows = {"a.1": [row(10, "a", K.START, "x"), row(10, "a", K.START, "y"),
                    row(20, "a", K.STOP, "y")],
            "b.1": [row(10, "b", K.START, "x", 2), row(10, "b", K.START, "q")]}
    runs = log.runs(rows, [])
    assert log.lost(runs, ["x", "y", "z"]) == ["x", "y", "z"]
    assert log.unexpected(runs, ["x", "y", "z"]) == ["q"]
    assert log.lost(runs, ["y"], at_ms=15) == []


def test_a_start_elsewhere_at_an_epoch_no_higher_than_the_previous_start_is_a_regression():
    rows = {"a.1": [row(10, "a", K.START, "x", 4), row(20, "a", K.STOP, "x")],
            "b.1": [row(30, "b", K.START, "x", 4), row(40, "b", K.STOP, "x"),
                    row(50, "b", K.START, "y", 1)],
            "c.1": [row(60, "c", K.START, "x", 5)]}
    [(first, second)] = log.epoch_regressions(log.runs(rows, []))
    assert (first.incarnation, second.incarnation) == ("a.1", "b.1")


def test_the_same_process_may_restart_a_resource_at_its_epoch_but_never_below_it():
    rows = {"a.1": [row(10, "a", K.START, "x", 4), row(20, "a", K.STOP, "x"),
                    row(30, "a", K.START, "x", 4), row(40, "a", K.STOP, "x"),
                    row(50, "a", K.START, "x", 3)]}
    [(first, second)] = log.epoch_regressions(log.runs(rows, []))
    assert (first.start_ms, second.start_ms) == (30, 50)


def test_settled_is_the_latest_start_of_what_covers_the_end_or_none_when_not_whole():
    rows = {"a.1": [row(10, "a", K.START, "x"), row(20, "a", K.START, "y"),
                    row(30, "a", K.STOP, "y")],
            "b.1": [row(50, "b", K.START, "y", 2)]}
    runs = log.runs(rows, [])
    assert log.settled_at(runs, ["x", "y"], after_ms=25, until_ms=60) == 50
    assert log.settled_at(runs, ["x", "y"], after_ms=25, until_ms=40) is None
    assert log.settled_at(runs, ["x"], after_ms=25, until_ms=40) == 25


def test_an_incarnation_that_goes_back_to_an_older_generation_is_a_regression():
    def at(ts, kind, generation):
        return events.Event(ts_ms=ts, run="r", group="g", member="a", resource="x",
                            event=kind, generation=generation)

    rows = {"a.1": [at(1, K.START, 3), at(2, K.STOP, 3), at(3, K.START, 5), at(4, K.STOP, 4)],
            "b.1": [at(1, K.START, 9)]}
    [(first, second)] = log.generation_regressions(rows)
    assert (first.generation, second.generation) == (5, 4)


def test_a_second_start_without_a_stop_keeps_the_run_before_it():
    # a started x at 0 and, with no stop row between, again at 100: it ran x all along,
    # so b running x from 10 to 50 is a double run.
    rows = {"a.1": [row(0, "a", K.START, "x"), row(100, "a", K.START, "x"),
                    row(200, "a", K.STOP, "x")],
            "b.1": [row(10, "b", K.START, "x", 2), row(50, "b", K.STOP, "x")]}
    runs = log.runs(rows, [])
    assert [(r.incarnation, r.start_ms, r.end_ms, r.ended_by) for r in runs] == [
        ("a.1", 0, 100, "start"), ("b.1", 10, 50, "stop"), ("a.1", 100, 200, "stop")]
    [overlap] = log.overlaps(runs)
    assert (overlap.first.incarnation, overlap.second.incarnation) == ("a.1", "b.1")
    assert (overlap.from_ms, overlap.to_ms) == (10, 50)


def test_a_start_and_its_stop_written_in_one_millisecond_end_the_run():
    # The process wrote the start, then the stop, both stamped 100: x ran no longer,
    # so b starting it at 200 runs it alone.
    rows = {"a.1": [row(100, "a", K.START, "x"), row(100, "a", K.STOP, "x")],
            "b.1": [row(200, "b", K.START, "x", 2)]}
    runs = log.runs(rows, [])
    assert [(r.incarnation, r.end_ms, r.ended_by) for r in runs] == [
        ("a.1", 100, "stop"), ("b.1", log.OPEN, "open")]
    assert log.overlaps(runs) == []
    assert log.lost(runs, ["x"]) == []


def test_an_open_run_started_beyond_2_to_the_62_still_overlaps():
    # ts_ms is any signed 64-bit long: an open run must end after every one of them.
    late = 2**62 + 1000
    rows = {"a.1": [row(late, "a", K.START, "x")], "b.1": [row(late + 100, "b", K.START, "x", 2)]}
    [overlap] = log.overlaps(log.runs(rows, []))
    assert (overlap.from_ms, overlap.to_ms) == (late + 100, log.OPEN)
    assert log.lost(log.runs(rows, []), ["x"]) == ["x"]  # run twice at the end


def test_a_run_of_less_than_a_millisecond_inside_another_is_an_overlap():
    # b wrote a start and its stop of x both stamped 100 while a ran x from 0 to 300:
    # x ran on both at once (for less than a millisecond), as kooper analyze and the
    # drill invariants say of the same rows. At an instant where a's run ended, it is a
    # hand-over.
    rows = {"a.1": [row(0, "a", K.START, "x"), row(300, "a", K.STOP, "x")],
            "b.1": [row(100, "b", K.START, "x", 2), row(100, "b", K.STOP, "x", 2)]}
    [overlap] = log.overlaps(log.runs(rows, []))
    assert (overlap.first.incarnation, overlap.second.incarnation) == ("a.1", "b.1")
    assert (overlap.from_ms, overlap.to_ms) == (100, 100)
    handover = {"a.1": [row(0, "a", K.START, "x"), row(100, "a", K.STOP, "x")],
                "b.1": rows["b.1"]}
    assert log.overlaps(log.runs(handover, [])) == []
