"""One duration language: what the CRDs admit is exactly what kooper parses (core.durations)."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.chart import crdschema
from tests.chart.test_crd_schemas import wg

from kooper.core import durations, errors

FIELD = "scheduledRebalanceMaxDelay"


def _duration_fields(schema, path=""):
    """Every string field of a CRD schema that is a duration (its description says so)."""
    for key, sub in schema.get("properties", {}).items():
        where = f"{path}.{key}" if path else key
        if sub.get("type") == "string" and "duration" in sub.get("description", ""):
            yield where, sub
        yield from _duration_fields(sub, where)
    if "items" in schema:
        yield from _duration_fields(schema["items"], f"{path}[]")


def test_every_duration_field_of_the_crds_carries_the_parsers_pattern_and_length(crds):
    found = {}
    for kind, crd in crds.items():
        for path, field in _duration_fields(crdschema.version_schema(crd)):
            found[f"{kind}:{path}"] = (field["pattern"], field["maxLength"])
    assert found == {f"WorkerGroup:spec.{FIELD}": (durations.PATTERN, durations.MAX_LENGTH)}


def admitted(crds, text: str) -> bool:
    return crdschema.admit(crds["WorkerGroup"], wg(**{FIELD: text}))[1] == []


def parsed(text: str) -> bool:
    try:
        durations.parse_ms(text)
    except errors.InvalidDurationError:
        return False
    return True


TABLE = [
    ("0s", 0), ("300s", 300_000), ("5m", 300_000), ("1m30s", 90_000), ("1.5h", 5_400_000),
    ("250ms", 250), ("1.5s", 1_500), ("1h30m", 5_400_000), ("1.005s", 1_005),
    ("", None), ("0", None), ("5", None), ("100ns", None), ("500us", None), ("500µs", None),
    ("-1s", None), ("+1s", None), ("1d", None), (" 5s", None), ("5s ", None), ("1e3s", None),
    (".5s", None), ("5.s", None), ("5S", None), ("soon", None), ("1" * 31 + "s", None),
]


@pytest.mark.parametrize(("text", "ms"), TABLE)
def test_the_crd_and_the_parser_agree_on_a_table_of_inputs(crds, text, ms):
    assert admitted(crds, text) == parsed(text) == (ms is not None)
    if ms is not None:
        assert durations.parse_ms(text) == ms
        assert durations.parse_ms(durations.format_ms(ms)) == ms


@settings(max_examples=150, deadline=None)
@given(st.text(alphabet="0123456789.smhnuµd -", max_size=12))
def test_the_crd_and_the_parser_agree_on_any_string(crds, text):
    assert admitted(crds, text) == parsed(text), text


@given(st.integers(min_value=0, max_value=10**12))
def test_formatting_reads_back(ms):
    text = durations.format_ms(ms)
    assert re.fullmatch(durations.PATTERN, text)
    assert durations.parse_ms(text) == ms


def test_a_duration_longer_than_go_allows_is_refused_by_both(crds):
    # Found by the property above: the API server's CEL duration() is Go's, which stops
    # at about 292 years, as the parser does (cel-python alone would admit 10,000).
    for text in ("200000000m", "2562048h", "9223372036855ms"):
        assert (admitted(crds, text), parsed(text)) == (False, False), text
    assert (admitted(crds, "2562047h"), parsed("2562047h")) == (True, True)
