"""Compact reports (version 2): large reports fit the Lease, and decode to the same value."""

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.protocol import strategies
from tests.protocol.test_codec_text import reference_report

from kooper.core import errors, model
from kooper.protocol import codec, messages

BOTH = frozenset(model.Protocol)


def report(tasks, **changes):
    fields = {
        "member": "workers-0",
        "incarnation": "5c1e0a77",
        "protocols": BOTH,
        "generation": 41,
        "owned": model.ConnectorsAndTasks.of([f"c{i}" for i in range(10)], tasks),
    }
    return messages.Report(**(fields | changes))


def contiguous(connectors, tasks_each):
    return [f"c{c}-{n}" for c in range(connectors) for n in range(tasks_each)]


SHAPES = {
    "10 connectors x 10,000 tasks": contiguous(10, 10_000),
    "1 connector x 100,000 tasks": contiguous(1, 100_000),
    # A connector's tasks spread round-robin over two members: every other task.
    "every other task of 20 x 10,000": [
        f"c{c}-{n}" for c in range(20) for n in range(c % 2, 10_000, 2)
    ],
    "1,000 connectors x 100 tasks": contiguous(1000, 100),
}


@pytest.mark.parametrize("tasks", SHAPES.values(), ids=SHAPES.keys())
def test_100_000_owned_tasks_fit_the_report_limit_and_decode_to_the_same_report(tasks):
    assert len(tasks) == 100_000
    big = report(tasks)
    text = codec.encode_report(big)
    assert len(text) <= messages.MAX_REPORT_BYTES
    assert json.loads(text)["version"] == codec.COMPACT_REPORT_VERSION
    assert codec.decode_report(text) == big
    assert text == reference_report(big, compact=True)
    print(f"{len(text)} bytes")


def test_10_000_failed_starts_with_100_000_owned_tasks_fit():
    failed_tasks = [f"f-{n}" for n in range(10_000)]
    reason = "on_assigned raised RuntimeError: " + "x" * (messages.MAX_ERROR_CHARS - 33)
    big = report(
        contiguous(10, 10_000),
        failed={task: reason for task in failed_tasks[: messages.MAX_FAILURE_REASONS]},
        failure_counts={task: 1 + n % 3 for n, task in enumerate(failed_tasks)},
    )
    text = codec.encode_report(big)
    assert len(text) <= messages.MAX_REPORT_BYTES
    assert codec.decode_report(text) == big


def test_a_report_that_fits_plainly_stays_version_1_for_every_reader():
    small = report(contiguous(2, 100))
    document = json.loads(codec.encode_report(small))
    assert document["version"] == 1
    assert document["owned"]["tasks"]["c0"] == list(range(100))


def test_ranges_are_used_when_shorter_and_a_bitmap_when_shorter():
    text = codec.encode_report(report(contiguous(1, 100_000)))
    assert json.loads(text)["owned"]["tasks"] == {"c0": "0-99999"}
    spread = json.loads(codec.encode_report(report(SHAPES["every other task of 20 x 10,000"])))
    assert spread["owned"]["tasks"]["c0"].startswith("~")


def test_a_report_that_cannot_fit_even_compact_is_a_local_error_naming_its_size():
    # 40,000 connector instances: names are not compressible.
    huge = report([], owned=model.ConnectorsAndTasks.of([f"conn-{i}" for i in range(40_000)], []))
    with pytest.raises(errors.LocalProtocolError, match="even in the compact form"):
        codec.encode_report(huge)


NUMBERS = st.frozensets(st.integers(0, 5000), min_size=1, max_size=300) | st.builds(
    lambda start, length, step: frozenset(range(start, start + length * step, step)),
    st.integers(0, 1000),
    st.integers(1, 500),
    st.integers(1, 3),
)


@settings(strategies.UNHURRIED, max_examples=300)
@given(NUMBERS)
def test_any_task_set_survives_the_compact_forms(numbers):
    ordered = sorted(numbers)
    for text in (
        codec._ranges_text(ordered),
        codec._bitmap_text(ordered),
        codec._set_text(ordered),
    ):
        assert codec._decode_set(text, "x") == ordered


def compact_document(tasks):
    return json.dumps(
        {
            "version": 2,
            "member": "w",
            "protocols": ["compatible"],
            "generation": 1,
            "owned": {"connectors": [], "tasks": {"A": tasks}},
        }
    )


@pytest.mark.parametrize(
    ("tasks", "message"),
    [
        ("0-999999999", "at most 1000000 tasks"),
        ("5-3", "ascending, disjoint ranges"),
        ("0-5,3-9", "ascending, disjoint ranges"),
        ("3,3", "ascending, disjoint ranges"),
        ("4-4", "ascending, disjoint ranges"),
        ("01", "ranges of task numbers"),
        ("1,,2", "ranges of task numbers"),
        ("", "ranges of task numbers"),
        ("-1", "ranges of task numbers"),
        ("~!!", "a base64 bitmap"),
        ("~AAA", "a bitmap with at least one task"),
    ],
)
def test_a_malformed_compact_task_set_is_a_remote_error_naming_the_field(tasks, message):
    with pytest.raises(errors.RemoteProtocolError, match=message) as caught:
        codec.decode_report(compact_document(tasks))
    assert "report.owned.tasks['A']" in str(caught.value)


def test_failure_counts_must_be_positive_and_name_each_task_once():
    base = json.loads(compact_document([0]))
    base["failureCounts"] = {"connectors": {}, "tasks": {"A": {"0": "1"}}}
    with pytest.raises(errors.RemoteProtocolError, match="failure counts >= 1"):
        codec.decode_report(json.dumps(base))
    base["failureCounts"] = {"connectors": {}, "tasks": {"A": {"1": "0-3", "2": "3"}}}
    with pytest.raises(errors.RemoteProtocolError, match="'A-3' counted twice"):
        codec.decode_report(json.dumps(base))
    base["failureCounts"] = {"connectors": {"A": 0}}
    with pytest.raises(errors.RemoteProtocolError, match=r"failureCounts.connectors\['A'\]"):
        codec.decode_report(json.dumps(base))


def test_an_impossible_failure_count_is_a_local_error():
    with pytest.raises(errors.LocalProtocolError, match="failure count of 'A-1' is 0"):
        codec.encode_report(report([], failure_counts={"A-1": 0}))
