"""The encoders write exactly what json.dumps writes for the documented document.

The codec writes its JSON text piece by piece for speed; these tests hold it to the
plain construction (build the document, ``json.dumps`` it compact with sorted keys),
written here independently of the codec, on random and awkward messages.
"""

import base64
import json
import re

import pytest
from hypothesis import given, settings
from tests.protocol import strategies

from kooper.core import errors
from kooper.protocol import codec, messages


def _dumps(document):
    return json.dumps(document, separators=(",", ":"), sort_keys=True)


def _numbers_by_connector(tasks):
    numbers = {}
    for task in tasks:
        connector, _, number = task.rpartition("-")
        numbers.setdefault(connector, []).append(int(number))
    return {connector: sorted(values) for connector, values in numbers.items()}


def _resources(resources):
    return {
        "connectors": sorted(resources.connectors),
        "tasks": _numbers_by_connector(resources.tasks),
    }


def reference_assignment(assignment: messages.Assignment) -> str:
    epoch_tasks = {}
    for connector, numbers in _numbers_by_connector(assignment.assigned.tasks).items():
        values = [assignment.epochs.get(f"{connector}-{number}") for number in numbers]
        if any(value is not None for value in values):
            epoch_tasks[connector] = values
    document = {
        "version": 1,
        "group": assignment.group,
        "member": assignment.member,
        "generation": assignment.generation,
        "protocol": str(assignment.protocol),
        "assigned": _resources(assignment.assigned),
        "revoked": _resources(assignment.revoked),
        "delayMs": assignment.delay_ms,
        "leader": assignment.leader,
        "epochs": {
            "connectors": {
                name: assignment.epochs[name]
                for name in assignment.assigned.connectors
                if name in assignment.epochs
            },
            "tasks": epoch_tasks,
        },
        "configs": {name: dict(config) for name, config in assignment.configs.items()},
        "states": dict(assignment.states),
    }
    if assignment.policy:
        document["policy"] = assignment.policy
    if assignment.incarnation:
        document["incarnation"] = assignment.incarnation
    if assignment.member_epoch:
        document["memberEpoch"] = assignment.member_epoch
    return _dumps(document)


def _ranges(numbers):
    runs = []
    for number in sorted(numbers):
        if runs and runs[-1][1] == number - 1:
            runs[-1][1] = number
        else:
            runs.append([number, number])
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)


def _bitmap(numbers):
    value = sum(1 << number for number in set(numbers))
    data = value.to_bytes(max(numbers) // 8 + 1, "little")
    return "~" + base64.b64encode(data).decode().rstrip("=")


def compact_set(numbers):
    """The shorter of ranges and bitmap (ranges on a tie)."""
    ranges, bitmap = _ranges(numbers), _bitmap(numbers)
    return bitmap if len(bitmap) < len(ranges) else ranges


def _is_task(resource):
    connector, dash, number = resource.rpartition("-")
    return bool(dash and connector and re.fullmatch(r"0|[1-9][0-9]*", number))


def _failure_counts(counts):
    connectors, tasks = {}, {}
    for resource, count in counts.items():
        if _is_task(resource):
            connector, _, number = resource.rpartition("-")
            tasks.setdefault(connector, {}).setdefault(str(count), []).append(int(number))
        else:
            connectors[resource] = count
    return {
        "connectors": connectors,
        "tasks": {
            connector: {count: compact_set(numbers) for count, numbers in by_count.items()}
            for connector, by_count in tasks.items()
        },
    }


def reference_report(report: messages.Report, *, compact=False) -> str:
    document = {
        "version": 2 if compact else 1,
        "member": report.member,
        "incarnation": report.incarnation,
        "protocols": sorted(str(protocol) for protocol in report.protocols),
        "generation": report.generation,
        "owned": _resources(report.owned),
        "failed": dict(report.failed),
        "fenced": report.fenced,
    }
    if compact:
        owned = document["owned"]
        owned["tasks"] = {c: compact_set(numbers) for c, numbers in owned["tasks"].items()}
    if report.failure_counts:
        document["failureCounts"] = _failure_counts(report.failure_counts)
    if report.member_epoch:
        document["memberEpoch"] = report.member_epoch
    if report.rejoins:
        document["rejoins"] = report.rejoins
    if report.left:
        document["left"] = True
    return _dumps(document)


@settings(strategies.UNHURRIED, max_examples=150)
@given(strategies.assignments(strategies.NAMES | strategies.AWKWARD_NAMES))
def test_an_assignment_is_written_exactly_as_json_dumps_writes_its_document(assignment):
    assert codec.encode_assignment(assignment) == reference_assignment(assignment)


@settings(strategies.UNHURRIED, max_examples=100)
@given(strategies.reports(strategies.NAMES | strategies.AWKWARD_NAMES))
def test_a_report_is_written_exactly_as_json_dumps_writes_its_document(report):
    assert codec.encode_report(report) == reference_report(report)


@pytest.mark.parametrize(
    "tasks",
    [
        ["A-0", "A-1", "A-1-0", "A-2"],  # a dashed neighbour inside the connector's ids
        ["A-1-0", "A-1-1", "A-10"],  # "A-1-" is a prefix of neither
        ["a,b-0", "a,b-1"],  # a comma in the connector name
        ["x-1", "x-1,x-2"],  # joined by commas, these look like three tasks of "x"
        ["A-9", "A-10", "A-100", "B-0"],
        ["x-0"],
        [f"conn-{n}" for n in range(0, 2000, 7)],
    ],
)
def test_tricky_task_groups_are_written_as_json_dumps_writes_them(tasks):
    epochs = {task: index for index, task in enumerate(sorted(tasks)) if index % 3}
    assignment = strategies.assignment(tasks=tasks, epochs=epochs)
    assert codec.encode_assignment(assignment) == reference_assignment(assignment)
    assert codec.decode_assignment(codec.encode_assignment(assignment)) == assignment


@pytest.mark.parametrize(
    ("tasks", "bad"),
    [
        (["A-01", "A-1"], "A-01"),
        (["A-0", "A-00"], "A-00"),
        (["A-1", "A-2x"], "A-2x"),
        (["A-1", "A-"], "A-"),
        (["-0", "-1"], "-0"),
        (["A"], "A"),
        (["A-1", "A-\u0663"], "A-\u0663"),
    ],
)
def test_a_bad_task_id_of_a_single_connector_is_named_in_the_local_error(tasks, bad):
    with pytest.raises(errors.LocalProtocolError, match="is not '<connector>-<n>'") as caught:
        codec.encode_assignment(strategies.assignment(tasks=tasks))
    assert repr(bad) in str(caught.value)
