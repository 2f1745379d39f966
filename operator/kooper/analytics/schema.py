"""Spark schemas of the event log and of every table ``kooper analyze`` writes.

The event log's columns are declared once, in ``kooper.core.events.COLUMNS``;
this module gives them Spark types and fails at import if the two drift apart.
Output tables are declared here too, so tests can ``assertSchemaEqual`` against
them and the docs (``docs/events.md``) have one place to be checked against.
"""

from __future__ import annotations

from pyspark.sql import types as T

from kooper.core import events

_EVENT_TYPES: dict[str, T.DataType] = {
    "ts_ms": T.LongType(),
    "run": T.StringType(),
    "group": T.StringType(),
    "member": T.StringType(),
    "resource": T.StringType(),
    "event": T.StringType(),
    "generation": T.LongType(),
    "epoch": T.LongType(),
    "protocol": T.StringType(),
    "policy": T.StringType(),
}

if tuple(_EVENT_TYPES) != events.COLUMNS:  # pragma: no cover - guards a refactor of events.py
    raise RuntimeError("analytics.schema is out of sync with core.events.COLUMNS")

EVENTS = T.StructType([T.StructField(name, kind, True) for name, kind in _EVENT_TYPES.items()])
"""The event log as read (every column nullable: files may omit optional ones)."""

REQUIRED: tuple[str, ...] = ("ts_ms", "run", "event")
"""Columns that must be present and non-null in every row."""

DEFAULTS: dict[str, object] = {
    "group": "",
    "member": "",
    "resource": "",
    "generation": -1,
    "epoch": -1,
    "protocol": "",
    "policy": "",
}
"""Values of optional columns that a row leaves out (as in ``events.Event``)."""

KINDS: tuple[str, ...] = tuple(str(kind) for kind in events.Kind)
"""Allowed values of the ``event`` column."""

INTEGRAL = (T.ByteType, T.ShortType, T.IntegerType, T.LongType)
"""Parquet column types accepted (and widened to long) for integer columns."""


def _struct(*fields: tuple[str, T.DataType]) -> T.StructType:
    return T.StructType([T.StructField(name, kind, True) for name, kind in fields])


INTERVALS = _struct(
    ("run", T.StringType()),
    ("group", T.StringType()),
    ("resource", T.StringType()),
    ("member", T.StringType()),
    ("start_ms", T.LongType()),
    ("end_ms", T.LongType()),
)
"""One row per time span in which one member ran one resource: ``[start_ms, end_ms)``."""

RESOURCES = _struct(
    ("run", T.StringType()),
    ("group", T.StringType()),
    ("resource", T.StringType()),
    ("pause_ms", T.LongType()),
    ("max_pause_ms", T.LongType()),
    ("overlap_ms", T.LongType()),
    ("moves", T.LongType()),
    ("undisturbed", T.BooleanType()),
    ("paused_ms", T.LongType()),
)
"""Per resource and run: pause, longest pause, time on two members, moves, time held
paused (connector state ``paused``: not a pause)."""

OVERLAPS = _struct(
    ("run", T.StringType()),
    ("group", T.StringType()),
    ("resource", T.StringType()),
    ("member", T.StringType()),
    ("other_member", T.StringType()),
    ("start_ms", T.LongType()),
    ("end_ms", T.LongType()),
)
"""Intervals in which ``member`` started a resource that ``other_member`` still ran."""

IMBALANCE = _struct(
    ("run", T.StringType()),
    ("ts_ms", T.LongType()),
    ("generation", T.LongType()),
    ("members", T.LongType()),
    ("min_running", T.LongType()),
    ("max_running", T.LongType()),
    ("imbalance", T.LongType()),
)
"""At each ``round`` event: live members and the spread of resources running on them."""

TIMELINE = _struct(
    ("run", T.StringType()),
    ("ts_ms", T.LongType()),
    ("running", T.LongType()),
)
"""Step function: from ``ts_ms`` on, ``running`` resources ran on at least one member."""

METRICS = _struct(
    ("run", T.StringType()),
    ("protocol", T.StringType()),
    ("policy", T.StringType()),
    ("events", T.LongType()),
    ("resources", T.LongType()),
    ("members", T.LongType()),
    ("duration_ms", T.LongType()),
    ("total_pause_ms", T.LongType()),
    ("max_pause_ms", T.LongType()),
    ("undisturbed_resources", T.LongType()),
    ("undisturbed_pause_ms", T.LongType()),
    ("rounds", T.LongType()),
    ("moves", T.LongType()),
    ("converge_ms", T.LongType()),
    ("overlaps", T.LongType()),
    ("overlap_ms", T.LongType()),
    ("max_imbalance", T.LongType()),
    ("final_imbalance", T.LongType()),
    ("paused_ms", T.LongType()),
)
"""``metrics.parquet``: one row per run (definitions in ``docs/events.md``)."""

DISRUPTIONS = _struct(
    ("run", T.StringType()),
    ("ts_ms", T.LongType()),
    ("group", T.StringType()),
    ("member", T.StringType()),
    ("event", T.StringType()),
)
"""Each ``leave``, and each ``join`` after the run's first ``start``: what disturbs members."""

RUNNING = _struct(
    ("run", T.StringType()),
    ("ts_ms", T.LongType()),
    ("running", T.LongType()),
    ("min_running", T.LongType()),
    ("max_running", T.LongType()),
)
"""``timeline.parquet``: ``TIMELINE`` in at most 1000 buckets per run (start of bucket)."""
