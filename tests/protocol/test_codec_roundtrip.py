"""decode(encode(m)) == m for any message hypothesis can build."""

import dataclasses
import json

from hypothesis import given, settings
from tests.protocol import strategies

from kooper.core import model
from kooper.protocol import codec


@settings(strategies.UNHURRIED, max_examples=200)
@given(strategies.assignments())
def test_any_assignment_survives_a_round_trip(assignment):
    assert codec.decode_assignment(codec.encode_assignment(assignment)) == assignment


@settings(strategies.UNHURRIED, max_examples=200)
@given(strategies.reports())
def test_any_report_survives_a_round_trip(report):
    assert codec.decode_report(codec.encode_report(report)) == report


@settings(strategies.UNHURRIED, max_examples=50)
@given(strategies.assignments(strategies.AWKWARD_NAMES))
def test_an_assignment_with_awkward_names_survives_a_round_trip(assignment):
    assert codec.decode_assignment(codec.encode_assignment(assignment)) == assignment


@settings(strategies.UNHURRIED, max_examples=50)
@given(strategies.reports(strategies.AWKWARD_NAMES))
def test_a_report_with_awkward_names_survives_a_round_trip(report):
    assert codec.decode_report(codec.encode_report(report)) == report


@settings(strategies.UNHURRIED)
@given(strategies.assignments())
def test_the_incarnation_travels_only_when_set(assignment):
    text = codec.encode_assignment(assignment)
    assert ("incarnation" in json.loads(text)) == bool(assignment.incarnation)
    assert codec.decode_assignment(text).incarnation == assignment.incarnation


def test_an_assignment_for_a_given_incarnation_decodes_to_it_and_one_for_any_to_empty():
    planned = strategies.assignment(incarnation="5c1e0a77")
    for_any = dataclasses.replace(planned, incarnation="")
    assert codec.decode_assignment(codec.encode_assignment(planned)).incarnation == "5c1e0a77"
    assert '"incarnation"' not in codec.encode_assignment(for_any)
    assert codec.decode_assignment(codec.encode_assignment(for_any)).incarnation == ""


@settings(strategies.UNHURRIED)
@given(strategies.assignments())
def test_encoding_is_deterministic_and_compact(assignment):
    text = codec.encode_assignment(assignment)
    assert codec.encode_assignment(codec.decode_assignment(text)) == text
    assert json.dumps(json.loads(text), separators=(",", ":"), sort_keys=True) == text
    assert json.loads(text)["version"] == codec.ASSIGNMENT_VERSION


def test_task_numbers_travel_as_integers_per_connector_in_numeric_order():
    assignment = strategies.assignment(
        assigned=model.ConnectorsAndTasks.of(["A"], ["A-10", "A-9", "A-0", "B-1"])
    )
    document = json.loads(codec.encode_assignment(assignment))
    assert document["assigned"] == {"connectors": ["A"], "tasks": {"A": [0, 9, 10], "B": [1]}}


def test_epochs_of_resources_not_assigned_are_not_sent():
    assignment = strategies.assignment(tasks=["A-0"], epochs={"A-0": 2, "A-1": 9, "Z": 4})
    decoded = codec.decode_assignment(codec.encode_assignment(assignment))
    assert decoded.epochs == {"A-0": 2}
