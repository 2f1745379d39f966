"""Malformed documents raise RemoteProtocolError naming the field; our own bugs raise Local."""

import json

import pytest
from tests.protocol import strategies

from kooper.core import errors, model
from kooper.protocol import codec, messages

VALID_ASSIGNMENT = {
    "version": 1,
    "group": "g",
    "member": "workers-0",
    "generation": 3,
    "protocol": "compatible",
    "assigned": {"connectors": ["A"], "tasks": {"A": [0, 1]}},
    "revoked": {"connectors": [], "tasks": {"B": [0]}},
    "epochs": {"connectors": {"A": 1}, "tasks": {"A": [1, 2]}},
    "configs": {"A": {"k": "v"}},
}
VALID_REPORT = {
    "version": 1,
    "member": "workers-0",
    "incarnation": "x",
    "protocols": ["compatible", "eager"],
    "generation": 3,
    "owned": {"connectors": ["A"], "tasks": {"A": [0]}},
}


def _with(document, path, value):
    document = json.loads(json.dumps(document))
    *parents, last = path
    target = document
    for key in parents:
        target = target[key]
    if value is _DELETE:
        del target[last]
    else:
        target[last] = value
    return json.dumps(document)


_DELETE = object()


def test_the_valid_fixtures_decode():
    codec.decode_assignment(json.dumps(VALID_ASSIGNMENT))
    codec.decode_report(json.dumps(VALID_REPORT))


@pytest.mark.parametrize(
    ("path", "value", "message"),
    [
        (("generation",), -1, "assignment.generation: expected a non-negative integer, got -1"),
        (("generation",), True, "assignment.generation: expected a non-negative integer"),
        (("generation",), "3", "assignment.generation: expected a non-negative integer"),
        (("generation",), _DELETE, "assignment: missing required field 'generation'"),
        (("group",), "", "assignment.group: expected a non-empty string"),
        (("member",), 7, "assignment.member: expected a non-empty string"),
        (("protocol",), "cooperative", "assignment.protocol: expected 'eager' or 'compatible'"),
        (("assigned",), _DELETE, "assignment: missing required field 'assigned'"),
        (("assigned",), [], "assignment.assigned: expected an object"),
        (("assigned", "connectors"), "A", "assignment.assigned.connectors: expected a list"),
        (("assigned", "connectors"), ["A", ""], "assignment.assigned.connectors[1]"),
        (
            ("assigned", "tasks", "A"),
            [0, -1],
            (
                "assignment.assigned.tasks['A'][1]: expected a non-negative integer, got -1"
            ),
        ),
        (("assigned", "tasks", "A"), [0, 1.5], "assignment.assigned.tasks['A'][1]"),
        (("assigned", "tasks", "A"), [0, 0], "assignment.assigned: duplicate connector or task"),
        (("assigned", "tasks", "A"), 3, "assignment.assigned.tasks['A']: expected a list"),
        (("revoked", "tasks", "A"), [1], "both assigned and revoked: ['A-1']"),
        (("delayMs",), -5, "assignment.delayMs: expected a non-negative integer"),
        (("epochs", "tasks", "A"), [1], "assignment.epochs.tasks['A']: expected 2 epochs"),
        (
            ("epochs", "tasks", "A"),
            [1, "2"],
            "assignment.epochs.tasks['A'][1]: expected a non-negative integer or null",
        ),
        (
            ("epochs", "connectors", "Z"),
            1,
            "assignment.epochs.connectors: expected epochs of assigned connectors only",
        ),
        (("configs", "A", "k"), 1, "assignment.configs['A']['k']: expected a string, got 1"),
        (("states",), ["paused"], "assignment.states: expected an object"),
        (("version",), 0, "assignment.version: expected an integer >= 1, got 0"),
        (("version",), "1", "assignment.version"),
        (("version",), _DELETE, "assignment: missing required field 'version'"),
    ],
)
def test_a_malformed_assignment_names_the_bad_field(path, value, message):
    with pytest.raises(errors.RemoteProtocolError) as caught:
        codec.decode_assignment(_with(VALID_ASSIGNMENT, path, value))
    assert message in str(caught.value)


@pytest.mark.parametrize(
    ("path", "value", "message"),
    [
        (("protocols",), [], "report.protocols: expected at least one of"),
        (("protocols",), ["cooperative-v9"], "report.protocols: expected at least one of"),
        (("protocols",), "eager", "report.protocols: expected a list"),
        (("generation",), -2, "report.generation: expected an integer >= -1, got -2"),
        (("fenced",), "no", "report.fenced: expected a boolean"),
        (("left",), 1, "report.left: expected a boolean"),
        (("owned", "tasks"), {"": [0]}, "report.owned.tasks: expected non-empty connector names"),
        (("member",), _DELETE, "report: missing required field 'member'"),
        (("failed",), {"A-0": None}, "report.failed['A-0']: expected a string"),
    ],
)
def test_a_malformed_report_names_the_bad_field(path, value, message):
    with pytest.raises(errors.RemoteProtocolError) as caught:
        codec.decode_report(_with(VALID_REPORT, path, value))
    assert message in str(caught.value)


@pytest.mark.parametrize(
    "data",
    ["", "not json", "[1, 2]", "null", '{"version": 1', b"\xff\xfe", "1" * 2000 + "[" * 100000],
)
def test_garbage_is_a_remote_protocol_error(data):
    with pytest.raises(errors.RemoteProtocolError):
        codec.decode_assignment(data)
    with pytest.raises(errors.RemoteProtocolError):
        codec.decode_report(data)


def test_non_text_input_is_a_remote_protocol_error():
    with pytest.raises(errors.RemoteProtocolError, match="str or bytes"):
        codec.decode_report(42)  # type: ignore[arg-type]


def test_an_oversized_report_is_rejected_before_parsing():
    padding = "x" * messages.MAX_REPORT_BYTES
    text = json.dumps({**VALID_REPORT, "padding": padding})
    with pytest.raises(errors.RemoteProtocolError, match="over"):
        codec.decode_report(text)
    with pytest.raises(errors.RemoteProtocolError, match="bytes, over"):
        codec.decode_report(text.encode())


def test_an_oversized_report_in_multibyte_characters_is_measured_in_bytes():
    # 100k characters, 300k bytes: under the limit in characters, over it in bytes.
    text = json.dumps({**VALID_REPORT, "padding": "\u2615" * 100_000}, ensure_ascii=False)
    assert len(text) < messages.MAX_REPORT_BYTES < len(text.encode())
    with pytest.raises(errors.RemoteProtocolError, match="over"):
        codec.decode_report(text)


@pytest.mark.parametrize("task", ["A", "-0", "A-01", "A-+1", "A- 1", "A-\u0663", "A-"])
def test_encoding_a_task_id_that_cannot_round_trip_is_a_local_error(task):
    report = messages.Report(
        member="m",
        incarnation="",
        protocols=frozenset({model.Protocol.EAGER}),
        generation=0,
        owned=model.ConnectorsAndTasks.of([], ["B-0", task]),
    )
    with pytest.raises(errors.LocalProtocolError, match="is not '<connector>-<n>'"):
        codec.encode_report(report)


def test_encoding_an_assignment_that_assigns_and_revokes_the_same_task_is_a_local_error():
    assignment = strategies.assignment(
        tasks=["A-0"], revoked=model.ConnectorsAndTasks.of([], ["A-0"])
    )
    with pytest.raises(errors.LocalProtocolError, match="both assigns and revokes"):
        codec.encode_assignment(assignment)


def test_an_assignment_too_big_for_a_configmap_is_a_local_error():
    assignment = strategies.assignment(configs={"A": {"blob": "x" * messages.MAX_ASSIGNMENT_BYTES}})
    with pytest.raises(errors.LocalProtocolError, match="ConfigMap"):
        codec.encode_assignment(assignment)
