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


def test_json_nulls_in_optional_columns_take_the_defaults_like_missing_ones():
    # docs/events.md: "Missing optional columns and JSON nulls take the default."
    # A null group must name the same group as a missing one ("", not "None"):
    # otherwise one task reads as two and an overlap between them goes unseen.
    written = ('{"ts_ms":0,"run":"r","member":"a","resource":"T-0","event":"start",'
               '"group":null,"generation":null,"epoch":null,"protocol":null,"policy":null}')
    missing = '{"ts_ms":0,"run":"r","member":"a","resource":"T-0","event":"start"}'
    assert list(events.load_lines([written])) == list(events.load_lines([missing]))
    assert next(events.load_lines([written])).group == ""
