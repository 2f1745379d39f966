"""The event log as every step reads it: key columns, same-instant order, defaults."""

from __future__ import annotations

from pyspark import sql
from pyspark.sql import functions as F

from kooper.analytics import schema
from kooper.core import events

RUN = ("run",)
"""Columns that name a run."""
RESOURCE = ("run", "group", "resource")
"""Columns that name a resource within its run."""
MEMBER = ("run", "group", "member")
"""Columns that name a member within its run."""


def sort_key(*columns: str) -> list[sql.Column]:
    """``columns`` led by a 64-bit hash of them: partition keys for a window that sorts.

    A window sorts its rows by partition keys, then order keys. Spark's sort
    compares an 8-byte prefix of the first key before anything else; with
    ``run`` first that prefix is the same for every row of a run, so every
    comparison reads whole rows. With the hash first, rows of different
    resources are told apart by the prefix alone. The columns themselves still
    partition the window, so a hash collision changes nothing.
    """
    return [F.xxhash64(*columns), *(F.col(c) for c in columns)]


_ORDER = {str(kind): rank for kind, rank in events.SAME_INSTANT_ORDER.items()}


def kind_order() -> sql.Column:
    """The rank of ``event`` among events of one timestamp (``events.SAME_INSTANT_ORDER``).

    Stop, leave, round, join, start, pause, resume: a hand-over at one instant is
    then no pause, and a member that rejoins at ``t`` and starts a resource at ``t``
    started it in its new life.
    """
    order = F.lit(len(_ORDER))
    for kind, rank in reversed(_ORDER.items()):
        order = F.when(F.col("event") == kind, F.lit(rank)).otherwise(order)
    return order


def normalize(raw: sql.DataFrame) -> sql.DataFrame:
    """The event log in ``schema.EVENTS`` column order, defaults filled, integers as long.

    Columns missing from ``raw`` are added with their defaults. Rows are not
    validated here: ``job`` rejects files with nulls in ``schema.REQUIRED``.
    """
    columns = []
    for field in schema.EVENTS.fields:
        if field.name in raw.columns:
            column = F.col(field.name).cast(field.dataType)
        else:
            column = F.lit(None).cast(field.dataType)
        if field.name in schema.DEFAULTS:
            column = F.coalesce(column, F.lit(schema.DEFAULTS[field.name]).cast(field.dataType))
        columns.append(column.alias(field.name))
    return raw.select(*columns)

