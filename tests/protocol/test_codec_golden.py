"""Golden vectors: every version's documents decode to known values, forever."""

import json
import pathlib

import pytest
from tests.protocol import golden_values

from kooper.core import errors
from kooper.protocol import codec, messages

GOLDEN_DIR = pathlib.Path(__file__).parent / "golden"


def _decode(name: str, text: str) -> messages.Assignment | messages.Report:
    if pathlib.Path(name).name.startswith("assignment"):
        return codec.decode_assignment(text)
    return codec.decode_report(text)


def _encode(value: messages.Assignment | messages.Report) -> str:
    if isinstance(value, messages.Assignment):
        return codec.encode_assignment(value)
    return codec.encode_report(value)


def test_every_golden_file_has_an_expected_value_and_back():
    on_disk = {str(p.relative_to(GOLDEN_DIR)) for p in GOLDEN_DIR.rglob("*.json")}
    assert on_disk == set(golden_values.GOLDEN)


@pytest.mark.parametrize("name", sorted(golden_values.GOLDEN))
def test_golden_document_decodes_to_its_expected_value(name):
    text = (GOLDEN_DIR / name).read_text(encoding="utf-8")
    assert _decode(name, text) == golden_values.GOLDEN[name]


@pytest.mark.parametrize("name", sorted(golden_values.GOLDEN))
def test_golden_document_decodes_the_same_from_bytes(name):
    data = (GOLDEN_DIR / name).read_bytes()
    assert _decode(name, data) == golden_values.GOLDEN[name]


@pytest.mark.parametrize("name", golden_values.ENCODER_OUTPUT)
def test_encoder_writes_the_golden_bytes_exactly(name):
    expected = (GOLDEN_DIR / name).read_text(encoding="utf-8").strip()
    assert _encode(golden_values.GOLDEN[name]) == expected


@pytest.mark.parametrize("name", sorted(golden_values.GOLDEN))
def test_golden_value_survives_a_round_trip_through_the_current_version(name):
    value = golden_values.GOLDEN[name]
    assert _decode(name, _encode(value)) == value


def test_our_highest_reader_accepts_a_newer_document_and_ignores_unknown_fields():
    text = (GOLDEN_DIR / "v9/assignment_extra_fields.json").read_text()
    assert max(codec.DECODERS) < 9  # the point: no v9 decoder exists
    decoded = codec.decode_assignment(text)
    assert decoded.generation == 12
    assert "B-2" in decoded.assigned


def test_a_newer_report_advertising_an_unknown_protocol_keeps_the_known_ones():
    decoded = codec.decode_report((GOLDEN_DIR / "v9/report_extra_fields.json").read_text())
    assert {str(p) for p in decoded.protocols} == {"eager", "compatible"}


def test_every_version_written_has_a_golden_vector():
    versions = {int(path.parent.name[1:]) for path in GOLDEN_DIR.rglob("*.json")}
    assert set(codec.known_versions()) <= versions


def test_a_v1_reader_refuses_compact_task_numbers_instead_of_misreading_them():
    # A compact report stamped v1 is malformed: the v1 row reads task lists only. So an
    # old operator keeps the last report it could read instead of seeing "owns nothing".
    text = (
        (GOLDEN_DIR / "v2/report_compact.json").read_text().replace('"version": 2', '"version": 1')
    )
    with pytest.raises(errors.RemoteProtocolError, match=r"owned.tasks\['A'\]: expected a list"):
        codec.decode_report(text)


def test_assignments_are_written_at_version_1_and_reports_that_fit_too():
    for name in golden_values.ENCODER_OUTPUT:
        assert '"version":1' in _encode(golden_values.GOLDEN[name])


def test_assignments_written_before_the_incarnation_key_decode_to_any_incarnation():
    older = [
        name
        for name in golden_values.GOLDEN
        if pathlib.Path(name).name.startswith("assignment")
        and '"incarnation"' not in (GOLDEN_DIR / name).read_text(encoding="utf-8")
    ]
    assert len(older) >= 4
    for name in older:
        assert _decode(name, (GOLDEN_DIR / name).read_text(encoding="utf-8")).incarnation == ""


def test_an_assignment_planned_for_one_incarnation_carries_it():
    name = "v1/assignment_incarnation.json"
    assert json.loads((GOLDEN_DIR / name).read_text(encoding="utf-8"))["incarnation"] == "9e0d4c21"
    assert _decode(name, (GOLDEN_DIR / name).read_bytes()).incarnation == "9e0d4c21"
