"""Double ownership, one pure function: intervals of one resource on two holders that
share an instant (``core.ownership``), as every checker asks it."""

from __future__ import annotations

from kooper.core import events as ev
from kooper.core import ownership
from kooper.sim import chaos, metrics

Interval = ownership.Interval


def test_two_holders_at_one_instant_overlap():
    held = [Interval("r", "a", 0, 10), Interval("r", "b", 5, 20)]
    assert ownership.overlaps(held) == [(0, 1)]


def test_a_hand_over_at_an_instant_is_not_an_overlap():
    assert ownership.overlaps([Interval("r", "a", 0, 10), Interval("r", "b", 10, 20)]) == []


def test_an_empty_interval_holds_nothing():
    assert ownership.overlaps([Interval("r", "a", 0, 10), Interval("r", "b", 5, 5)]) == []


def test_one_holder_never_overlaps_itself_nor_another_resource():
    held = [Interval("r", "a", 0, 10), Interval("r", "a", 5, 20), Interval("s", "b", 5, 20)]
    assert ownership.overlaps(held) == []


def test_the_first_to_begin_comes_first_and_ties_keep_the_listed_order():
    held = [Interval("r", "c", 7, 30), Interval("r", "a", 0, 10), Interval("r", "b", 7, 9)]
    assert ownership.overlaps(held) == [(1, 0), (1, 2), (0, 2)]


def start(ts: int, member: str, epoch: int = -1) -> ev.Event:
    return ev.Event(ts, "r", "g", member, "c00-0", ev.Kind.START, 1, epoch)


def stop(ts: int, member: str) -> ev.Event:
    return ev.Event(ts, "r", "g", member, "c00-0", ev.Kind.STOP, 1, -1)


def test_the_simulators_log_check_names_who_still_runs_it():
    log = [start(0, "a"), start(5, "b"), stop(6, "a"), start(9, "c")]
    assert chaos.check_log(log, last_fault_ms=0, delay_ms=0, end_ms=0) == [
        "log: t=5 c00-0 started on b while a runs it",
        "log: t=9 c00-0 started on c while b runs it"]
    # A stop at the instant of a start elsewhere is a hand-over.
    assert chaos.check_log([start(0, "a"), start(5, "b"), stop(5, "a")][::-1],
                           last_fault_ms=0, delay_ms=0, end_ms=0) == []


def test_the_simulators_log_check_ends_a_run_only_at_its_stop():
    # A simulated process writes a stop for everything it stops, and a force-deleted
    # pod's process runs on under the name its successor joins with: so the simulator's
    # check ends nothing at a leave or a join, as docs/events.md's "Interval" (written for
    # logs of processes killed without their stops) does. It flags every overlap the
    # metrics count, and these too.
    def member(ts: int, name: str, kind: ev.Kind) -> ev.Event:
        return ev.Event(ts, "r", "g", name, "", kind)

    for gone in (ev.Kind.LEAVE, ev.Kind.JOIN):
        log = [start(0, "a"), member(4, "a", gone), start(5, "b")]
        assert chaos.check_log(log, last_fault_ms=0, delay_ms=0, end_ms=0) == [
            "log: t=5 c00-0 started on b while a runs it"]
        assert metrics.run_metrics(log).overlaps == 0


def test_the_simulators_log_check_holds_a_run_started_beyond_2_to_the_62():
    # ts_ms is any signed 64-bit long: a run nothing ended holds past every row.
    late = 2**62 + 1000
    assert chaos.check_log([start(late, "a"), start(late + 5, "b")], last_fault_ms=late,
                           delay_ms=0, end_ms=late) == [
        f"log: t={late + 5} c00-0 started on b while a runs it"]
