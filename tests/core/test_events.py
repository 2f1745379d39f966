"""The event-log row: pause and resume kinds, and the same-instant order of every kind."""

import json

import pytest

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


def _row(ts: object, event: str, member: str = "", resource: str = "",
         **extra: object) -> dict[str, object]:
    return {"ts_ms": ts, "run": "r", "group": "g", "member": member, "resource": resource,
            "event": event, **extra}


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        (_row(5, "join"), "a join row without 'member'"),
        (_row(5, "start", "a"), "a start row without 'resource'"),
        (_row(5, "stop", resource="A-0"), "a stop row without 'member'"),
        (_row(5, "pause", resource="A-0"), "a pause row without 'member'"),
        (_row(5, "teleport", "a"), "unknown event 'teleport' (expected one of start, stop,"),
        ({"ts_ms": 5, "event": "round"}, "column 'run' is missing"),
        ({"ts_ms": 5, "run": None, "event": "round"}, "column 'run' is missing"),
        (_row("100", "round"), "column 'ts_ms' is '100', expected an integer"),
        (_row(100.9, "round"), "column 'ts_ms' is 100.9, expected an integer"),
        (_row(True, "round"), "column 'ts_ms' is True, expected an integer"),
        (_row(2**63, "round"), "column 'ts_ms' is 9223372036854775808, expected an integer"),
        (_row(5, "round", generation=1.0), "column 'generation' is 1.0, expected an integer"),
        (_row(5, "start", 7, "A-0"), "column 'member' is 7, expected a string"),
        ([1, 2], "not a JSON object (a list)"),
    ],
)
def test_load_lines_rejects_every_row_kooper_analyze_rejects(bad, message):
    # docs/events.md, "Checked before Spark starts": the Python readers (e2e invariants,
    # the recorder) must not read a row analyze refuses, e.g. 100.9 as 100 or a start
    # without a member as member "".
    lines = [json.dumps(_row(0, "round")), json.dumps(bad)]
    with pytest.raises(ValueError, match=r"^line 2: ") as caught:
        list(events.load_lines(lines))
    assert message in str(caught.value)
