from kooper.core import events
from kooper.demo import plot, scores


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


def test_pause_is_the_time_no_member_runs_a_resource():
    s = scores.score(LOG, start_ms=1000, end_ms=3000)
    assert (s.total_pause_ms, s.max_pause_ms) == (300, 300)


def test_rounds_moves_and_overlaps_are_counted_in_the_window():
    s = scores.score(LOG, start_ms=1000, end_ms=3000)
    assert (s.rounds, s.moves, s.overlaps) == (2, 2, 1)
    assert s.converge_ms == 1600
    assert (s.running_at_end, s.resources) == (2, 2)


def test_a_gap_still_open_at_the_end_counts_up_to_the_end():
    s = scores.score([*LOG, e(2700, "a", "t2", "stop")], start_ms=1000, end_ms=3000)
    assert s.total_pause_ms == 300 + 300
    assert s.running_at_end == 1


def test_events_before_the_window_do_not_count():
    s = scores.score(LOG, start_ms=2100, end_ms=3000)
    assert (s.rounds, s.total_pause_ms, s.moves) == (0, 0, 1)


def test_running_series_steps_with_the_number_of_running_resources():
    times, counts = plot.running_series(LOG, start_ms=1000)
    assert times[0] == -1.0
    assert counts == [1, 2, 1, 2, 2, 2]


def test_plot_writes_a_png(tmp_path):
    path = plot.plot_runs([("a", LOG, 1000, 3000), ("b", LOG, 1000, 2500)],
                          tmp_path / "p.png", total=2)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
