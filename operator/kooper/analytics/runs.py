"""Per run: first and last event, convergence time, and the ``metrics`` table."""

from __future__ import annotations

from pyspark import sql
from pyspark.sql import functions as F

from kooper.analytics import eventlog, schema


def bounds(events: sql.DataFrame) -> sql.DataFrame:
    """Per run: ``run_start_ms`` and ``run_end_ms`` (first and last event of any kind)."""
    return events.groupBy("run").agg(
        F.min("ts_ms").alias("run_start_ms"), F.max("ts_ms").alias("run_end_ms")
    )


def convergence(events: sql.DataFrame) -> sql.DataFrame:
    """Per run: ``converge_ms``, from the first disruption to the run's last ``start``.

    The first disruption is the first ``leave``, or the first ``stop`` in a run
    without one; a run with neither has a null ``converge_ms``, and one whose
    last ``start`` precedes its disruption has 0.
    """
    def first(kind: str) -> sql.Column:
        return F.min(F.when(F.col("event") == kind, F.col("ts_ms")))

    per_run = events.groupBy("run").agg(
        F.coalesce(first("leave"), first("stop")).alias("disrupted_ms"),
        F.max(F.when(F.col("event") == "start", F.col("ts_ms"))).alias("last_start_ms"),
    )
    gap = F.greatest(F.col("last_start_ms") - F.col("disrupted_ms"), F.lit(0))
    return per_run.select(
        "run",
        F.when(F.col("disrupted_ms").isNotNull(), F.coalesce(gap, F.lit(0)))
        .cast("long")
        .alias("converge_ms"),
    )


def metrics(
    events: sql.DataFrame,
    resources: sql.DataFrame,
    moved: sql.DataFrame,
    *,
    overlapping: sql.DataFrame,
    balance: sql.DataFrame,
    converged: sql.DataFrame,
) -> sql.DataFrame:
    """``schema.METRICS``: one row per run, sorted by protocol, policy and run.

    ``moves`` sums ``moved`` (``resources.moves``: every start), not the per-resource
    table, which lists only resources with a non-empty interval: a start elsewhere at
    the run's last instant is a move too (docs/events.md, "Move")."""
    def some(name: str) -> sql.Column:
        """The run's first non-empty value (by time, same-instant order, then the least)."""
        first = F.min(F.when(F.col(name) != "",
                             F.struct("ts_ms", eventlog.kind_order().alias("k"), name)))
        return F.coalesce(first[name], F.lit("")).alias(name)

    runs = events.groupBy("run").agg(
        some("protocol"),
        some("policy"),
        F.count(F.lit(1)).alias("events"),
        (F.max("ts_ms") - F.min("ts_ms")).alias("duration_ms"),
        F.count(F.when(F.col("event") == "round", 1)).alias("rounds"),
    )
    calm = F.col("undisturbed")
    per_resource = resources.groupBy("run").agg(
        F.count(F.lit(1)).alias("resources"),
        F.sum("pause_ms").alias("total_pause_ms"),
        F.max("max_pause_ms").alias("max_pause_ms"),
        F.count(F.when(calm, 1)).alias("undisturbed_resources"),
        F.sum(F.when(calm, F.col("pause_ms"))).alias("undisturbed_pause_ms"),
        F.sum("overlap_ms").alias("overlap_ms"),
        F.sum("paused_ms").alias("paused_ms"),
    )
    # Distinct members first (the partial aggregate shrinks the log to its members
    # before any shuffle), then counted: cheaper than countDistinct beside other sums.
    members = (
        events.where(F.col("member") != "")
        .select("run", "group", "member")
        .distinct()
        .groupBy("run")
        .agg(F.count(F.lit(1)).alias("members"))
    )
    moves = moved.groupBy("run").agg(F.sum("moves").alias("moves"))
    overlap_count = overlapping.groupBy("run").agg(F.count(F.lit(1)).alias("overlaps"))
    balanced = balance.groupBy("run").agg(
        F.max("imbalance").alias("max_imbalance"),
        F.max_by("imbalance", "ts_ms").alias("final_imbalance"),
    )
    joined = (
        runs.join(members, "run", "left")
        .join(per_resource, "run", "left")
        .join(moves, "run", "left")
        .join(overlap_count, "run", "left")
        .join(balanced, "run", "left")
        .join(converged, "run", "left")
    )
    zero_if_missing = {
        "members", "resources", "total_pause_ms", "max_pause_ms", "undisturbed_resources",
        "undisturbed_pause_ms", "moves", "overlaps", "overlap_ms", "paused_ms",
    }
    columns = []
    for field in schema.METRICS.fields:
        column = F.col(field.name)
        if field.name in zero_if_missing:
            column = F.coalesce(column, F.lit(0))
        columns.append(column.cast(field.dataType).alias(field.name))
    return joined.select(*columns).orderBy("protocol", "policy", "run")
