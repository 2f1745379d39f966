"""The demo plot's pod disruptions: leaves and re-joins inside the drill window."""

from kooper.core import events
from kooper.demo import plot


def e(ts, member, kind, resource=""):
    return events.Event(ts_ms=ts, run="r", group="g", member=member, resource=resource,
                        event=events.Kind(kind))


LOG = [
    e(0, "a", "join"), e(0, "b", "join"),          # the group forming: not a disruption
    e(0, "a", "start", "t1"), e(0, "b", "start", "t2"),
    e(500, "c", "join"),                           # a first join inside the window neither
    e(1_500, "a", "leave"), e(2_000, "a", "join"),  # pod a restarted
    e(2_500, "b", "leave"), e(9_000, "b", "join"),  # b comes back after the window
]


def test_disruptions_are_the_leaves_and_rejoins_inside_the_window():
    got = plot.disruptions(LOG, start_ms=1_000, end_ms=5_000)
    assert got == [
        plot.Disruption(0.5, "a", left=True),
        plot.Disruption(1.0, "a", left=False),
        plot.Disruption(1.5, "b", left=True),
    ]


def test_a_leave_before_the_window_still_makes_the_rejoin_a_disruption():
    got = plot.disruptions(LOG, start_ms=1_800, end_ms=5_000)
    assert [(d.member, d.left) for d in got] == [("a", False), ("b", True)]


def test_plot_of_several_runs_with_disruptions_writes_a_png(tmp_path):
    path = plot.plot_runs([("eager/kip415", LOG, 1_000, 5_000), ("compatible/kooper", LOG,
                                                                 1_000, 9_000)],
                          tmp_path / "demo.png", total=2)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
