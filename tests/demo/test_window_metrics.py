"""The demo table's numbers: ``kooper.sim.metrics`` over a drill window, and the plot."""

import dataclasses
import random

from kooper.core import events
from kooper.demo import plot
from kooper.sim import metrics


def e(ts, member, resource, kind):
    return events.Event(ts_ms=ts, run="r", group="g", member=member, resource=resource,
                        event=events.Kind(kind))


LOG = [
    e(0, "a", "t1", "start"), e(0, "b", "t2", "start"),
    e(1000, "", "", "round"),
    e(1500, "a", "t1", "stop"),          # t1 paused 1500..1800
    e(1800, "b", "t1", "start"),         # a move
    e(2000, "", "", "round"),
    e(2500, "a", "t2", "start"),         # overlap: b still runs t2 (and a move)
    e(2600, "b", "t2", "stop"),
]


def test_pause_is_the_time_in_the_window_no_member_runs_a_resource():
    m = metrics.run_metrics(LOG, start_ms=1000, end_ms=3000)
    assert (m.total_pause_ms, m.max_pause_ms) == (300, 300)


def test_rounds_moves_and_overlaps_are_counted_in_the_window():
    m = metrics.run_metrics(LOG, start_ms=1000, end_ms=3000)
    assert (m.rounds, m.moves, m.overlaps) == (2, 2, 1)
    assert m.converge_ms == 1500  # from the window's start to its last start
    assert (m.running_at_end, m.resources) == (2, 2)


def test_a_pause_still_open_at_the_end_counts_up_to_the_end_of_the_window():
    m = metrics.run_metrics([*LOG, e(2700, "a", "t2", "stop")], start_ms=1000, end_ms=3000)
    assert m.total_pause_ms == 300 + 300
    assert m.running_at_end == 1


def test_a_pause_that_began_before_the_window_counts_from_the_window_start():
    m = metrics.run_metrics(LOG, start_ms=1700, end_ms=3000)
    assert (m.total_pause_ms, m.max_pause_ms) == (100, 100)


def test_events_before_the_window_do_not_count_but_say_who_ran_what():
    m = metrics.run_metrics(LOG, start_ms=2100, end_ms=3000)
    assert (m.rounds, m.total_pause_ms, m.moves) == (0, 0, 1)
    assert m.overlaps == 1  # b's interval began before the window and still ran


def test_rows_after_the_window_are_ignored():
    shutdown = [e(5000, "a", "t1", "stop"), e(5000, "b", "t2", "stop"), e(5001, "", "", "round")]
    assert (metrics.run_metrics([*LOG, *shutdown], start_ms=1000, end_ms=3000)
            == metrics.run_metrics(LOG, start_ms=1000, end_ms=3000))


def test_a_leave_in_the_window_disturbs_the_members_resources_and_one_before_does_not():
    log = [e(0, "a", "X", "start"), e(0, "b", "Y", "start"), e(0, "c", "Z", "start"),
           e(100, "c", "Z", "stop"), e(150, "c", "", "leave"), e(200, "b", "Z", "start"),
           e(1000, "a", "X", "stop"), e(1100, "a", "", "leave"), e(1400, "b", "X", "start")]
    m = metrics.run_metrics(log, start_ms=500, end_ms=2000)
    assert m.undisturbed_resources == 2  # Y and Z: c's leave came before the window
    assert m.undisturbed_pause_ms == 0
    assert m.total_pause_ms == 400


def random_log(rng):
    members, resources = ["m0", "m1", "m2"], ["A", "A-0", "A-1"]
    rows, ts = [], 0
    for _ in range(rng.randint(3, 40)):
        ts += rng.choice([0, 1, 5, 50])
        kind = rng.choice(["start"] * 5 + ["stop"] * 3 + ["round", "join", "leave"])
        member = "" if kind == "round" else rng.choice(members)
        resource = rng.choice(resources) if kind in ("start", "stop") else ""
        rows.append(e(ts, member, resource, kind))
    return rows


def test_a_window_over_the_whole_log_measures_what_the_whole_log_measures_but_convergence():
    rng = random.Random(7)
    for _ in range(300):
        log = random_log(rng)
        whole = metrics.run_metrics(log)
        first = min(r.ts_ms for r in log)
        windowed = metrics.run_metrics(log, start_ms=first, end_ms=max(r.ts_ms for r in log))
        # converge_ms counts from the window's start instead of the first disruption.
        assert dataclasses.replace(windowed, converge_ms=whole.converge_ms) == whole
        assert metrics.run_metrics(log, end_ms=max(r.ts_ms for r in log)) == whole


def test_running_follows_the_interval_rules():
    log = [e(0, "a", "X", "start"), e(0, "b", "Y", "start"), e(10, "b", "", "leave"),
           e(20, "c", "X", "start")]
    assert metrics.running(log, at_ms=30) == {("g", "X"): {"a", "c"}}
    assert metrics.running(log, at_ms=5) == {("g", "X"): {"a"}, ("g", "Y"): {"b"}}
    # At the log's own end a start of that instant runs there (docs/events.md: the
    # empty intervals begun at ``run_end`` still run at it, as for overlaps).
    assert metrics.running(log) == {("g", "X"): {"a", "c"}}


def test_running_series_steps_with_the_number_of_running_resources():
    times, counts = plot.running_series(LOG, start_ms=1000)
    assert times == [-1.0, 0.5, 0.8, 1.5, 1.6]
    assert counts == [2, 1, 2, 2, 2]


def test_running_series_stops_at_the_window_and_keeps_what_runs_there():
    times, counts = plot.running_series([*LOG, e(5000, "b", "t1", "stop")], start_ms=1000,
                                        end_ms=3000)
    assert (times[-1], counts[-1]) == (2.0, 2)


def test_plot_writes_a_png(tmp_path):
    path = plot.plot_runs([("a", LOG, 1000, 3000), ("b", LOG, 1000, 2500)],
                          tmp_path / "p.png", total=2)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
