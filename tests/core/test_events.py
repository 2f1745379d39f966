"""The event-log row: pause and resume kinds, and the same-instant order of every kind."""

from kooper.core import events


def test_pause_and_resume_rows_round_trip_through_json_lines():
    rows = [
        events.Event(ts_ms=7, run="r", group="g", member="a", resource="A-0",
                     event=kind, generation=3, epoch=2, protocol="compatible", policy="kooper")
        for kind in (events.Kind.PAUSE, events.Kind.RESUME)
    ]
    lines = list(events.dump_lines(rows))
    assert '"event":"pause"' in lines[0]
    assert '"event":"resume"' in lines[1]
    assert list(events.load_lines(lines)) == rows


def test_every_kind_has_its_own_place_among_rows_of_one_instant():
    order = events.SAME_INSTANT_ORDER
    assert set(order) == set(events.Kind)
    assert sorted(order.values()) == list(range(len(events.Kind)))
    ranked = sorted(order, key=order.__getitem__)
    assert ranked == ["stop", "leave", "round", "join", "start", "pause", "resume"]
