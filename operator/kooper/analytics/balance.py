"""Imbalance: resources running per live member, probed at each round."""

from __future__ import annotations

from pyspark import sql
from pyspark.sql import functions as F

from kooper.analytics import eventlog

_MARKER = 9  # imbalance probes sort after every real event of their timestamp


def imbalance(events: sql.DataFrame, spans: sql.DataFrame, bounds: sql.DataFrame) -> sql.DataFrame:
    """``schema.IMBALANCE``: at each ``round``, max - min of resources running per live member.

    A member is live at ``t`` if its latest ``join``/``leave`` at or before ``t``
    is a ``join``, or if it runs something at ``t``. All groups of a run count
    together. The state probed is the one after every event of timestamp ``t``,
    except that intervals reaching the run's last event still count as running
    there (they were cut by the end of the log, not stopped), the empty ones begun
    there included: ``spans`` are ``intervals.intervals``, ``cut`` ones and all.
    """
    rounds = (
        events.where(F.col("event") == "round")
        .groupBy("run", "ts_ms")
        .agg(F.max("generation").alias("generation"))
    )
    lifecycle = events.where(F.col("event").isin("join", "leave") & (F.col("member") != ""))
    ends = (
        spans.join(F.broadcast(bounds.select("run", "run_end_ms")), "run")
        .where(F.col("end_ms") < F.col("run_end_ms"))
        .select(*eventlog.MEMBER, F.col("end_ms").alias("ts_ms"), F.lit(-1).alias("d"))
    )
    changes = (
        spans.select(*eventlog.MEMBER, F.col("start_ms").alias("ts_ms"), F.lit(1).alias("d"))
        .unionByName(ends)
        .withColumn("live", F.lit(None).cast("int"))
        .withColumn("k", F.lit(0))
        .unionByName(
            lifecycle.select(
                *eventlog.MEMBER,
                "ts_ms",
                F.lit(0).alias("d"),
                F.when(F.col("event") == "join", 1).otherwise(0).alias("live"),
                F.lit(0).alias("k"),
            )
        )
    )
    members = changes.select(*eventlog.MEMBER).distinct()
    probes = members.join(rounds.select("run", "ts_ms"), "run").select(
        *eventlog.MEMBER, "ts_ms", F.lit(0).alias("d"), F.lit(None).cast("int").alias("live"),
        F.lit(_MARKER).alias("k"),
    )
    so_far = (
        sql.Window.partitionBy(*eventlog.MEMBER)
        .orderBy("ts_ms", "k")
        .rowsBetween(sql.Window.unboundedPreceding, 0)
    )
    probed = (
        changes.unionByName(probes)
        .withColumn("running", F.sum("d").over(so_far).cast("long"))
        .withColumn("live", F.last("live", ignorenulls=True).over(so_far))
        .where(F.col("k") == _MARKER)
    )
    counted = (F.col("live") == 1) | (F.col("running") > 0)
    per_round = probed.groupBy("run", "ts_ms").agg(
        F.count(F.when(counted, 1)).cast("long").alias("members"),
        F.min(F.when(counted, F.col("running"))).alias("min_running"),
        F.max(F.when(counted, F.col("running"))).alias("max_running"),
    )
    return (
        rounds.join(per_round, ["run", "ts_ms"], "left")
        .select(
            "run",
            "ts_ms",
            "generation",
            F.coalesce("members", F.lit(0)).cast("long").alias("members"),
            F.coalesce("min_running", F.lit(0)).cast("long").alias("min_running"),
            F.coalesce("max_running", F.lit(0)).cast("long").alias("max_running"),
            F.coalesce(F.col("max_running") - F.col("min_running"), F.lit(0))
            .cast("long")
            .alias("imbalance"),
        )
    )
