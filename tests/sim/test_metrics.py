"""The pure-Python metrics on small hand-made event logs, with exact numbers."""

from __future__ import annotations

from kooper.core import events as ev
from kooper.sim import metrics


def rows(*spec: tuple[int, str, str, str]) -> list[ev.Event]:
    return [ev.Event(ts, "r", "g", member, resource, ev.Kind(kind))
            for ts, kind, member, resource in spec]


def test_a_hand_over_pauses_between_the_stop_and_the_next_start_and_counts_one_move():
    log = rows(
        (0, "join", "a", ""), (0, "join", "b", ""),
        (10, "start", "a", "T-0"), (10, "start", "b", "T-1"),
        (100, "stop", "a", "T-0"), (130, "round", "", ""), (150, "start", "b", "T-0"),
        (200, "stop", "b", "T-1"),
    )
    m = metrics.run_metrics(log)
    # T-0 paused 100..150 (50); T-1 paused from its stop at 200 to the run's end at 200 (0).
    assert (m.total_pause_ms, m.max_pause_ms, m.moves, m.overlaps, m.rounds) == (50, 50, 1, 0, 1)
    assert m.converge_ms == 50  # first stop (100) to last start (150)
    assert m.undisturbed_pause_ms == 50
    assert m.undisturbed_resources == 2


def test_a_leave_ends_what_the_member_ran_and_marks_its_resources_disturbed():
    log = rows(
        (0, "join", "a", ""), (0, "join", "b", ""),
        (0, "start", "a", "X"), (0, "start", "b", "Y"),
        (1_000, "leave", "a", ""),
        (4_000, "start", "b", "X"),
        (5_000, "stop", "b", "Y"), (5_200, "start", "b", "Y"),
        (6_000, "round", "", ""),
    )
    m = metrics.run_metrics(log)
    assert m.total_pause_ms == 3_000 + 200
    assert m.max_pause_ms == 3_000
    assert m.undisturbed_resources == 1  # only Y
    assert m.undisturbed_pause_ms == 200
    assert m.converge_ms == 4_200  # first leave (1000) to last start (5200)
    assert m.moves == 1


def test_two_members_running_a_resource_at_once_is_an_overlap_and_a_same_instant_hand_over_is_not():
    log = rows(
        (0, "start", "a", "X"), (50, "start", "b", "X"), (80, "stop", "a", "X"),
        (100, "stop", "b", "X"), (100, "start", "a", "X"), (120, "stop", "a", "X"),
    )
    m = metrics.run_metrics(log)
    assert m.overlaps == 1
    assert m.total_pause_ms == 0
    assert m.moves == 2
    assert m.converge_ms == 20  # no leave: first stop (80) to last start (100)


def test_a_run_without_disruption_has_no_convergence_time_and_no_pause():
    m = metrics.run_metrics(rows((0, "join", "a", ""), (5, "start", "a", "X"),
                                 (9, "round", "", "")))
    assert m.converge_ms is None
    assert m.total_pause_ms == 0
    assert m.rounds == 1


def test_a_zombie_that_stops_after_leaving_ran_until_its_stop():
    log = rows((0, "start", "a", "X"), (10, "leave", "a", ""), (20, "start", "b", "X"),
               (30, "stop", "a", "X"), (40, "round", "", ""))
    assert metrics.run_metrics(log).overlaps == 1


def test_metrics_are_computed_per_run():
    log = rows((0, "start", "a", "X"), (10, "stop", "a", "X"))
    other = [ev.Event(e.ts_ms, "s", e.group, e.member, e.resource, e.event) for e in log]
    runs = metrics.by_run(log + other + rows((30, "round", "", "")))
    assert [(m.run, m.total_pause_ms) for m in runs] == [("r", 20), ("s", 0)]


def test_a_start_on_the_last_row_is_running_at_the_end():
    """``docs/events.md``: intervals cut by the end of the log run there, the empty ones
    begun there too (as ``e2e/invariants.running_at_end`` reads them)."""
    log = rows((0, "start", "a", "X"), (5, "stop", "a", "X"), (9, "start", "b", "X"),
               (9, "start", "b", "Y"))
    assert metrics.running(log) == {("g", "X"): {"b"}, ("g", "Y"): {"b"}}
    assert metrics.running(log, at_ms=5) == {}
    assert metrics.run_metrics(log).running_at_end == 2
