"""Resources running over time: the exact step function and its downsampled form."""

from __future__ import annotations

from pyspark import sql
from pyspark.sql import functions as F


def running(segs: sql.DataFrame, bounds: sql.DataFrame) -> sql.DataFrame:
    """``schema.TIMELINE``: resources running on at least one member, as a step function.

    One row at the run's first event (usually 0 running) and one per change.
    Resources running at the run's last event are not counted down there: the
    log ended, they did not stop.
    """
    # Whether it ran just before ts_ms follows from the segment itself (running_on
    # - d members ran it then): no second sort of the segments by resource.
    up = (F.col("running_on") > 0).cast("long")
    was_up = ((F.col("running_on") - F.col("d")) > 0).cast("long")
    flips = (
        segs.withColumn("d", up - was_up)
        .where((F.col("d") != 0) & (F.col("next_ms") > F.col("ts_ms")))
        .select("run", "ts_ms", "d")
        .unionByName(
            bounds.select("run", F.col("run_start_ms").alias("ts_ms"), F.lit(0).alias("d"))
        )
        .groupBy("run", "ts_ms")
        .agg(F.sum("d").alias("d"))
    )
    so_far = (
        sql.Window.partitionBy("run").orderBy("ts_ms").rowsBetween(sql.Window.unboundedPreceding, 0)
    )
    return flips.select("run", "ts_ms", F.sum("d").over(so_far).cast("long").alias("running"))


def downsample(steps: sql.DataFrame, bounds: sql.DataFrame, points: int) -> sql.DataFrame:
    """``schema.RUNNING``: a timeline cut into at most ``points`` buckets per run.

    Each bucket keeps the value after its last change (``running``) and the
    lowest and highest values it changed to, so dips shorter than a bucket stay
    visible in the plots.
    """
    width = F.greatest(
        F.lit(1), F.ceil((F.col("run_end_ms") - F.col("run_start_ms") + 1) / F.lit(points))
    ).cast("long")
    bucket = F.floor((F.col("ts_ms") - F.col("run_start_ms")) / F.col("width")).cast("long")
    return (
        steps.join(F.broadcast(bounds), "run")
        .withColumn("width", width)
        .withColumn("bucket_ms", F.col("run_start_ms") + bucket * F.col("width"))
        .groupBy("run", "bucket_ms")
        .agg(
            F.max_by("running", "ts_ms").alias("running"),
            F.min("running").alias("min_running"),
            F.max("running").alias("max_running"),
        )
        .withColumnRenamed("bucket_ms", "ts_ms")
    )
