"""decode(encode(m)) == m for any message hypothesis can build."""

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from kooper.core import model
from kooper.protocol import codec, messages

NAMES = st.text(
    alphabet=st.sampled_from("abcdefghijklmnopqrstuvwxyz0123456789-."), min_size=1, max_size=12
)
ANY_TEXT = st.text(max_size=20)


@st.composite
def resources(draw: st.DrawFn) -> model.ConnectorsAndTasks:
    connectors = draw(st.frozensets(NAMES, max_size=4))
    task_connectors = draw(st.frozensets(NAMES, max_size=4))
    tasks = {
        f"{name}-{number}"
        for name in task_connectors
        for number in draw(st.frozensets(st.integers(0, 10_000), max_size=6))
    }
    return model.ConnectorsAndTasks(connectors, frozenset(tasks))


@st.composite
def assignments(draw: st.DrawFn) -> messages.Assignment:
    assigned = draw(resources())
    revoked = draw(resources()).difference(assigned)
    ids = assigned.sorted()
    epoch_keys = draw(st.sets(st.sampled_from(ids))) if ids else set()
    connectors = sorted({model.task_connector(t) for t in assigned.tasks} | assigned.connectors)
    return messages.Assignment(
        group=draw(NAMES),
        member=draw(NAMES),
        generation=draw(st.integers(0, 2**53)),
        protocol=draw(st.sampled_from(model.Protocol)),
        assigned=assigned,
        revoked=revoked,
        delay_ms=draw(st.integers(0, 10**9)),
        leader=draw(ANY_TEXT),
        epochs={key: draw(st.integers(0, 2**31)) for key in epoch_keys},
        configs={
            name: draw(st.dictionaries(ANY_TEXT, ANY_TEXT, max_size=3))
            for name in draw(st.sets(st.sampled_from(connectors))) if connectors
        }
        if connectors
        else {},
        states=draw(st.dictionaries(NAMES, st.sampled_from(["paused", "stopped"]), max_size=2)),
        policy=draw(st.sampled_from(["", "kooper", "kip415"])),
    )


reports = st.builds(
    messages.Report,
    member=NAMES,
    incarnation=ANY_TEXT,
    protocols=st.frozensets(st.sampled_from(model.Protocol), min_size=1),
    generation=st.integers(-1, 2**53),
    owned=resources(),
    failed=st.dictionaries(NAMES, ANY_TEXT, max_size=3),
    fenced=st.booleans(),
)


@settings(max_examples=200)
@given(assignments())
def test_any_assignment_survives_a_round_trip(assignment):
    assert codec.decode_assignment(codec.encode_assignment(assignment)) == assignment


@settings(max_examples=200)
@given(reports)
def test_any_report_survives_a_round_trip(report):
    assert codec.decode_report(codec.encode_report(report)) == report


@given(assignments())
def test_encoding_is_deterministic_and_compact(assignment):
    text = codec.encode_assignment(assignment)
    assert codec.encode_assignment(codec.decode_assignment(text)) == text
    assert json.dumps(json.loads(text), separators=(",", ":"), sort_keys=True) == text
    assert json.loads(text)["version"] == codec.CURRENT_VERSION


def test_task_numbers_travel_as_integers_per_connector_in_numeric_order():
    assignment = messages.Assignment(
        group="g",
        member="m",
        generation=1,
        protocol=model.Protocol.COMPATIBLE,
        assigned=model.ConnectorsAndTasks.of(["A"], ["A-10", "A-9", "A-0", "B-1"]),
    )
    document = json.loads(codec.encode_assignment(assignment))
    assert document["assigned"] == {"connectors": ["A"], "tasks": {"A": [0, 9, 10], "B": [1]}}


def test_epochs_of_resources_not_assigned_are_not_sent():
    assignment = messages.Assignment(
        group="g",
        member="m",
        generation=1,
        protocol=model.Protocol.COMPATIBLE,
        assigned=model.ConnectorsAndTasks.of([], ["A-0"]),
        epochs={"A-0": 2, "A-1": 9, "Z": 4},
    )
    decoded = codec.decode_assignment(codec.encode_assignment(assignment))
    assert decoded.epochs == {"A-0": 2}
