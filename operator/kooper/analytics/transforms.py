"""Pure DataFrame -> DataFrame steps from an event log to per-run metrics.

Nothing here opens a file or a session: ``job.py`` reads, caches and writes.
Every step uses window functions (``lag``/``lead``/running sums over a resource
or member ordered by time) and aggregates, never Python UDFs, so the plan runs
on the executors and scales with the cluster.

The pipeline, with the definitions that ``docs/events.md`` spells out:

1. ``normalize``: fill optional columns' defaults, widen integers to long.
2. ``intervals``: pair each ``start`` with the end of that run of the resource on
   that member (its next ``start``/``stop`` there, else the member's ``leave`` or
   rejoin, else the run's last event).
3. ``segments``: sweep the intervals of each resource: how many members ran it
   between consecutive change points.
4. ``resource_stats``: pause, longest pause and overlap time from the segments,
   plus ``moves`` and the ``undisturbed`` flag.
5. ``overlaps``, ``imbalance``, ``timeline``, ``convergence``, ``metrics``.

Events that share a timestamp are ordered stop, leave, round, join, start: a
hand-over at one instant is no pause, and a member that rejoins at ``t`` and
starts a resource at ``t`` started it in its new life.
"""

from __future__ import annotations

from pyspark import sql
from pyspark.sql import functions as F

from kooper.analytics import schema

RUN = ("run",)
RESOURCE = ("run", "group", "resource")
MEMBER = ("run", "group", "member")

_ORDER = {"stop": 0, "leave": 1, "round": 2, "join": 3, "start": 4}
_MARKER = 9  # imbalance probes sort after every real event of their timestamp


def _kind_order() -> sql.Column:
    order = F.lit(5)
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


def run_bounds(events: sql.DataFrame) -> sql.DataFrame:
    """Per run: ``run_start_ms`` and ``run_end_ms`` (first and last event of any kind)."""
    return events.groupBy("run").agg(
        F.min("ts_ms").alias("run_start_ms"), F.max("ts_ms").alias("run_end_ms")
    )


def intervals(events: sql.DataFrame, bounds: sql.DataFrame) -> sql.DataFrame:
    """Spans ``[start_ms, end_ms)`` in which a member ran a resource (``schema.INTERVALS``).

    A ``start`` ends at the first of: the next ``start``/``stop`` of the same
    resource on the same member, if it comes before the member rejoins (so a
    member that left but still stops the resource later, a zombie, shows as
    running until then); otherwise the member's next ``leave`` or ``join``;
    otherwise the run's last event. Empty spans are dropped; a ``stop``
    without an earlier ``start`` is ignored.
    """
    ranked = events.withColumn("k", _kind_order())
    same_place = sql.Window.partitionBy(*RESOURCE, "member").orderBy("ts_ms", "k")
    starts = (
        ranked.where(F.col("event").isin("start", "stop") & (F.col("resource") != ""))
        .withColumn("next_ms", F.lead("ts_ms").over(same_place))
        .where(F.col("event") == "start")
    )
    lifecycle = ranked.where(F.col("event").isin("join", "leave") & (F.col("member") != ""))
    both = starts.unionByName(lifecycle.withColumn("next_ms", F.lit(None).cast("long")))
    # Descending order with a growing frame: last() is the nearest later
    # join/leave, computed incrementally (an unbounded-following frame would be
    # quadratic). The frame includes the current row, which is harmless: only
    # start rows are kept, and their own join/leave value is null.
    later = sql.Window.partitionBy(*MEMBER).orderBy(
        F.col("ts_ms").desc(), F.col("k").desc()
    ).rowsBetween(sql.Window.unboundedPreceding, sql.Window.currentRow)
    when_kind = {
        kind: F.when(F.col("event") == kind, F.col("ts_ms")) for kind in ("join", "leave")
    }
    spans = (
        both.withColumn("rejoin_ms", F.last(when_kind["join"], ignorenulls=True).over(later))
        .withColumn("leave_ms", F.last(when_kind["leave"], ignorenulls=True).over(later))
        .where(F.col("event") == "start")
        .join(F.broadcast(bounds.select("run", "run_end_ms")), "run")
    )
    own_end = F.col("next_ms").isNotNull() & (
        F.col("rejoin_ms").isNull() | (F.col("next_ms") <= F.col("rejoin_ms"))
    )
    end = F.when(own_end, F.col("next_ms")).otherwise(
        F.least("leave_ms", "rejoin_ms", "run_end_ms")
    )
    return (
        spans.select(
            *RESOURCE,
            "member",
            F.col("ts_ms").alias("start_ms"),
            F.least(end, F.col("run_end_ms")).alias("end_ms"),
        )
        .where(F.col("end_ms") > F.col("start_ms"))
    )


def segments(spans: sql.DataFrame, bounds: sql.DataFrame) -> sql.DataFrame:
    """Sweep each resource's intervals: ``running_on`` members during ``[ts_ms, next_ms)``.

    Segments start at the resource's first ``start`` and the last one reaches
    the run's last event, so a resource that stopped for good is paused until
    then.
    """
    deltas = spans.select(*RESOURCE, F.col("start_ms").alias("ts_ms"), F.lit(1).alias("d"))
    deltas = deltas.unionByName(
        spans.select(*RESOURCE, F.col("end_ms").alias("ts_ms"), F.lit(-1).alias("d"))
    )
    by_time = sql.Window.partitionBy(*RESOURCE).orderBy("ts_ms")
    return (
        deltas.groupBy(*RESOURCE, "ts_ms")
        .agg(F.sum("d").alias("d"))
        .join(F.broadcast(bounds.select("run", "run_end_ms")), "run")
        .select(
            *RESOURCE,
            "ts_ms",
            F.coalesce(F.lead("ts_ms").over(by_time), F.col("run_end_ms")).alias("next_ms"),
            F.sum("d")
            .over(by_time.rowsBetween(sql.Window.unboundedPreceding, 0))
            .cast("long")
            .alias("running_on"),
        )
    )


def moves(events: sql.DataFrame) -> sql.DataFrame:
    """Per resource: ``moves``, starts on a member other than the one that last started it."""
    by_time = sql.Window.partitionBy(*RESOURCE).orderBy("ts_ms", "member")
    previous = F.lag("member").over(by_time)
    return (
        events.where((F.col("event") == "start") & (F.col("resource") != ""))
        .withColumn("moved", (previous.isNotNull() & (previous != F.col("member"))).cast("long"))
        .groupBy(*RESOURCE)
        .agg(F.sum("moved").alias("moves"))
    )


def disturbed_members(events: sql.DataFrame) -> sql.DataFrame:
    """Members (``run``, ``group``, ``member``) disrupted in their run.

    A member is disturbed if it has a ``leave``, or a ``join`` later than the
    run's first ``start`` (a restart, or a member added after the group formed).
    """
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
        .select(*MEMBER)
        .distinct()
    )


def undisturbed(spans: sql.DataFrame, disturbed: sql.DataFrame) -> sql.DataFrame:
    """Per resource: ``undisturbed`` is true when no member that ran it was disturbed."""
    flagged = disturbed.withColumn("hit", F.lit(1))
    return (
        spans.join(flagged, list(MEMBER), "left")
        .groupBy(*RESOURCE)
        .agg((F.max(F.coalesce("hit", F.lit(0))) == 0).alias("undisturbed"))
    )


def resource_stats(
    segs: sql.DataFrame, moved: sql.DataFrame, calm: sql.DataFrame
) -> sql.DataFrame:
    """``schema.RESOURCES``: pause, longest pause, overlap time, moves, undisturbed flag."""
    length = F.col("next_ms") - F.col("ts_ms")
    paused = F.when(F.col("running_on") == 0, length)
    doubled = F.when(F.col("running_on") >= 2, length)
    stats = segs.groupBy(*RESOURCE).agg(
        F.coalesce(F.sum(paused), F.lit(0)).cast("long").alias("pause_ms"),
        F.coalesce(F.max(paused), F.lit(0)).cast("long").alias("max_pause_ms"),
        F.coalesce(F.sum(doubled), F.lit(0)).cast("long").alias("overlap_ms"),
    )
    return (
        stats.join(moved, list(RESOURCE), "left")
        .join(calm, list(RESOURCE), "left")
        .select(
            *RESOURCE,
            "pause_ms",
            "max_pause_ms",
            "overlap_ms",
            F.coalesce("moves", F.lit(0)).cast("long").alias("moves"),
            F.coalesce("undisturbed", F.lit(True)).alias("undisturbed"),
        )
    )


def overlaps(spans: sql.DataFrame) -> sql.DataFrame:
    """``schema.OVERLAPS``: each interval that began while another member ran the resource.

    ``other_member`` is the member whose earlier interval ends last; the row's
    span is the time both ran it.
    """
    by_start = sql.Window.partitionBy(*RESOURCE).orderBy("start_ms", "member")
    so_far = by_start.rowsBetween(sql.Window.unboundedPreceding, sql.Window.currentRow)
    # The running max up to the previous row, as lag() of the running max: a
    # frame ending at -1 is noticeably slower in Spark than this pair.
    return (
        spans.withColumn("upto", F.max(F.struct(F.col("end_ms"), F.col("member"))).over(so_far))
        .withColumn("latest", F.lag("upto").over(by_start))
        .where(F.col("latest.end_ms") > F.col("start_ms"))
        .select(
            *RESOURCE,
            "member",
            F.col("latest.member").alias("other_member"),
            "start_ms",
            F.least("end_ms", "latest.end_ms").alias("end_ms"),
        )
    )


def imbalance(events: sql.DataFrame, spans: sql.DataFrame, bounds: sql.DataFrame) -> sql.DataFrame:
    """``schema.IMBALANCE``: at each ``round``, max - min of resources running per live member.

    A member is live at ``t`` if its latest ``join``/``leave`` at or before ``t``
    is a ``join``, or if it runs something at ``t``. All groups of a run count
    together. The state probed is the one after every event of timestamp ``t``,
    except that intervals reaching the run's last event still count as running
    there (they were cut by the end of the log, not stopped).
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
        .select(*MEMBER, F.col("end_ms").alias("ts_ms"), F.lit(-1).alias("d"))
    )
    changes = (
        spans.select(*MEMBER, F.col("start_ms").alias("ts_ms"), F.lit(1).alias("d"))
        .unionByName(ends)
        .withColumn("live", F.lit(None).cast("int"))
        .withColumn("k", F.lit(0))
        .unionByName(
            lifecycle.select(
                *MEMBER,
                "ts_ms",
                F.lit(0).alias("d"),
                F.when(F.col("event") == "join", 1).otherwise(0).alias("live"),
                F.lit(0).alias("k"),
            )
        )
    )
    members = changes.select(*MEMBER).distinct()
    probes = members.join(rounds.select("run", "ts_ms"), "run").select(
        *MEMBER, "ts_ms", F.lit(0).alias("d"), F.lit(None).cast("int").alias("live"),
        F.lit(_MARKER).alias("k"),
    )
    so_far = (
        sql.Window.partitionBy(*MEMBER)
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


def timeline(segs: sql.DataFrame, bounds: sql.DataFrame) -> sql.DataFrame:
    """``schema.TIMELINE``: resources running on at least one member, as a step function.

    One row at the run's first event (usually 0 running) and one per change.
    Resources running at the run's last event are not counted down there: the
    log ended, they did not stop.
    """
    by_time = sql.Window.partitionBy(*RESOURCE).orderBy("ts_ms")
    up = (F.col("running_on") > 0).cast("long")
    flips = (
        segs.withColumn("d", up - F.coalesce(F.lag(up).over(by_time), F.lit(0)))
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
    overlapping: sql.DataFrame,
    balance: sql.DataFrame,
    converged: sql.DataFrame,
) -> sql.DataFrame:
    """``schema.METRICS``: one row per run, sorted by protocol, policy and run."""
    def some(name: str) -> sql.Column:
        return F.coalesce(F.max(F.when(F.col(name) != "", F.col(name))), F.lit("")).alias(name)

    runs = events.groupBy("run").agg(
        some("protocol"),
        some("policy"),
        F.count(F.lit(1)).alias("events"),
        F.countDistinct(F.when(F.col("member") != "", F.struct("group", "member"))).alias(
            "members"
        ),
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
        F.sum("moves").alias("moves"),
        F.sum("overlap_ms").alias("overlap_ms"),
    )
    overlap_count = overlapping.groupBy("run").agg(F.count(F.lit(1)).alias("overlaps"))
    balanced = balance.groupBy("run").agg(
        F.max("imbalance").alias("max_imbalance"),
        F.max_by("imbalance", "ts_ms").alias("final_imbalance"),
    )
    joined = (
        runs.join(per_resource, "run", "left")
        .join(overlap_count, "run", "left")
        .join(balanced, "run", "left")
        .join(converged, "run", "left")
    )
    zero_if_missing = {
        "resources", "total_pause_ms", "max_pause_ms", "undisturbed_resources",
        "undisturbed_pause_ms", "moves", "overlaps", "overlap_ms",
    }
    columns = []
    for field in schema.METRICS.fields:
        column = F.col(field.name)
        if field.name in zero_if_missing:
            column = F.coalesce(column, F.lit(0))
        columns.append(column.cast(field.dataType).alias(field.name))
    return joined.select(*columns).orderBy("protocol", "policy", "run")


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
