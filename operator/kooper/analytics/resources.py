"""Per resource: moves, the undisturbed flag, and pause/overlap statistics."""

from __future__ import annotations

from pyspark import sql
from pyspark.sql import functions as F

from kooper.analytics import eventlog


def moves(events: sql.DataFrame) -> sql.DataFrame:
    """Per resource: ``moves``, starts on a member other than the one that last started it."""
    by_time = sql.Window.partitionBy(*eventlog.sort_key(*eventlog.RESOURCE)).orderBy(
        "ts_ms", "member"
    )
    previous = F.lag("member").over(by_time)
    return (
        events.where((F.col("event") == "start") & (F.col("resource") != ""))
        .withColumn("moved", (previous.isNotNull() & (previous != F.col("member"))).cast("long"))
        .groupBy(*eventlog.RESOURCE)
        .agg(F.sum("moved").alias("moves"))
    )


def disruptions(events: sql.DataFrame) -> sql.DataFrame:
    """``schema.DISRUPTIONS``: each ``leave``, and each ``join`` later than the run's first
    ``start`` (a restart, or a member added after the group formed)."""
    first_start = events.where(F.col("event") == "start").groupBy("run").agg(
        F.min("ts_ms").alias("first_start_ms")
    )
    lifecycle = events.where(F.col("event").isin("join", "leave") & (F.col("member") != ""))
    late = (F.col("event") == "leave") | (
        F.col("first_start_ms").isNotNull() & (F.col("ts_ms") > F.col("first_start_ms"))
    )
    return (
        lifecycle.join(F.broadcast(first_start), "run", "left")
        .where(late)
        .select("run", "ts_ms", "group", "member", "event")
    )


def disturbed_members(events: sql.DataFrame) -> sql.DataFrame:
    """Members (``run``, ``group``, ``member``) disrupted in their run.

    A member is disturbed if it has a ``leave``, or a ``join`` later than the
    run's first ``start`` (a restart, or a member added after the group formed).
    """
    return disruptions(events).select(*eventlog.MEMBER).distinct()


def undisturbed(spans: sql.DataFrame, disturbed: sql.DataFrame) -> sql.DataFrame:
    """Per resource: ``undisturbed`` is true when no member that ran it was disturbed."""
    flagged = disturbed.withColumn("hit", F.lit(1))
    return (
        # Disturbed members are few (departures and restarts): broadcast them
        # rather than shuffle every interval by member.
        spans.join(F.broadcast(flagged), list(eventlog.MEMBER), "left")
        .groupBy(*eventlog.RESOURCE)
        .agg((F.max(F.coalesce("hit", F.lit(0))) == 0).alias("undisturbed"))
    )


def stats(
    segs: sql.DataFrame, moved: sql.DataFrame, calm: sql.DataFrame, held: sql.DataFrame | None
) -> sql.DataFrame:
    """``schema.RESOURCES``: pause, longest pause, overlap time, moves, undisturbed flag,
    and time held paused (``held``: ``intervals.paused``; ``None`` when nothing was)."""
    length = F.col("next_ms") - F.col("ts_ms")
    paused = F.when(F.col("running_on") == 0, length)
    doubled = F.when(F.col("running_on") >= 2, length)
    stats = segs.groupBy("rk", *eventlog.RESOURCE).agg(  # rk: the segments' partitioning
        F.coalesce(F.sum(paused), F.lit(0)).cast("long").alias("pause_ms"),
        F.coalesce(F.max(paused), F.lit(0)).cast("long").alias("max_pause_ms"),
        F.coalesce(F.sum(doubled), F.lit(0)).cast("long").alias("overlap_ms"),
    )
    joined = stats.join(moved, list(eventlog.RESOURCE), "left").join(
        calm, list(eventlog.RESOURCE), "left"
    )
    if held is None:
        joined = joined.withColumn("paused_ms", F.lit(0).cast("long"))
    else:
        joined = joined.join(held, list(eventlog.RESOURCE), "left")
    return (
        joined.drop("rk").select(
            *eventlog.RESOURCE,
            "pause_ms",
            "max_pause_ms",
            "overlap_ms",
            F.coalesce("moves", F.lit(0)).cast("long").alias("moves"),
            F.coalesce("undisturbed", F.lit(True)).alias("undisturbed"),
            F.coalesce("paused_ms", F.lit(0)).cast("long").alias("paused_ms"),
        )
    )
