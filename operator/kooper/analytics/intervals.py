"""Who ran which resource when: intervals per member, their sweep, and overlaps."""

from __future__ import annotations

from pyspark import sql
from pyspark.sql import functions as F

from kooper.analytics import eventlog
from kooper.core import events as event_kinds


def intervals(events: sql.DataFrame, bounds: sql.DataFrame) -> sql.DataFrame:
    """Spans ``[start_ms, end_ms)`` in which a member ran a resource (``schema.INTERVALS``),
    with ``cut``: whether the run's end cut the span (the member still ran it then).

    A ``start`` ends at the first of: the next ``start``/``stop`` of the same
    resource on the same member, if it comes before the member rejoins (so a
    member that left but still stops the resource later, a zombie, shows as
    running until then); otherwise the member's next ``leave`` or ``join``;
    otherwise the run's last event. Empty spans are dropped, but for those begun
    at the run's last event (cut there: ``overlaps`` needs them, ``nonempty`` drops
    them); a ``stop`` without an earlier ``start`` is ignored.
    """
    ranked = events.withColumn("k", eventlog.kind_order())
    same_place = sql.Window.partitionBy(*eventlog.sort_key(*eventlog.RESOURCE, "member")).orderBy(
        "ts_ms", "k"
    )
    starts = (
        ranked.where(F.col("event").isin("start", "stop") & (F.col("resource") != ""))
        .withColumn("next_ms", F.lead("ts_ms").over(same_place))
        .withColumn("next_k", F.lead("k").over(same_place))
        .where(F.col("event") == "start")
    )
    lifecycle = events.where(F.col("event").isin("join", "leave") & (F.col("member") != ""))
    spans = (
        starts.join(F.broadcast(_later_lifecycle(lifecycle)), _in_segment(), "left")
        .drop(*(f"_{c}" for c in eventlog.MEMBER))
        .join(F.broadcast(bounds.select("run", "run_end_ms")), "run")
    )
    # At the rejoin's instant a stop still comes before the join, a start after it.
    before_rejoin = (F.col("next_ms") < F.col("rejoin_ms")) | (
        (F.col("next_ms") == F.col("rejoin_ms")) & (F.col("next_k") < F.lit(_JOIN_RANK))
    )
    own_end = F.col("next_ms").isNotNull() & (F.col("rejoin_ms").isNull() | before_rejoin)
    end = F.when(own_end, F.col("next_ms")).otherwise(
        F.least("leave_ms", "rejoin_ms", "run_end_ms")
    )
    cut = ~own_end & F.col("leave_ms").isNull() & F.col("rejoin_ms").isNull()
    return (
        spans.select(
            *eventlog.RESOURCE,
            "member",
            F.col("ts_ms").alias("start_ms"),
            F.least(end, F.col("run_end_ms")).alias("end_ms"),
            cut.alias("cut"),
        )
        .where((F.col("end_ms") > F.col("start_ms")) | F.col("cut"))
    )


def nonempty(spans: sql.DataFrame) -> sql.DataFrame:
    """``schema.INTERVALS`` of ``intervals``: the spans that are not empty."""
    return spans.where(F.col("end_ms") > F.col("start_ms")).drop("cut")


_JOIN_RANK = event_kinds.SAME_INSTANT_ORDER[event_kinds.Kind.JOIN]


def _later_lifecycle(lifecycle: sql.DataFrame) -> sql.DataFrame:
    """Per member, the times its ``join``/``leave`` rows happen (cuts), and for each cut
    the nearest ``join`` (``rejoin_ms``) and ``leave`` (``leave_ms``) at or after it, with
    the previous cut (``lo``).

    A ``start`` at ``s`` with ``lo <= s < cut`` has no join/leave of its member in
    ``(s, cut)``: the next ones are the cut's. (A join or leave at ``s`` itself
    comes before the start in the same-instant order, so it is not later.) Small
    (members x their joins and leaves): broadcast to every start instead of sorting
    the starts by member.
    """
    def here(kind: str) -> sql.Column:
        return F.min(F.when(F.col("event") == kind, F.col("ts_ms")))

    cuts = lifecycle.groupBy(*eventlog.MEMBER, "ts_ms").agg(
        here("join").alias("join_here"), here("leave").alias("leave_here")
    )
    by_time = sql.Window.partitionBy(*eventlog.MEMBER).orderBy("ts_ms")
    from_here = sql.Window.partitionBy(*eventlog.MEMBER).orderBy(F.col("ts_ms").desc()).rowsBetween(
        sql.Window.unboundedPreceding, sql.Window.currentRow
    )
    return cuts.select(
        *(F.col(c).alias(f"_{c}") for c in eventlog.MEMBER),
        F.lag("ts_ms").over(by_time).alias("_lo"),
        F.col("ts_ms").alias("_cut"),
        F.last("join_here", ignorenulls=True).over(from_here).alias("rejoin_ms"),
        F.last("leave_here", ignorenulls=True).over(from_here).alias("leave_ms"),
    )


def _in_segment() -> sql.Column:
    same = [F.col(c) == F.col(f"_{c}") for c in eventlog.MEMBER]
    inside = (F.col("_lo").isNull() | (F.col("_lo") <= F.col("ts_ms"))) & (
        F.col("ts_ms") < F.col("_cut")
    )
    condition = inside
    for equal in same:
        condition = condition & equal
    return condition


def paused(events: sql.DataFrame, spans: sql.DataFrame) -> sql.DataFrame:
    """Per resource: ``paused_ms``, the time members held it paused while they ran it.

    A ``pause`` of a resource on a member, inside one of that member's intervals
    of it (``[start_ms, end_ms)``, which matches the same-instant order), holds
    it paused until the next ``pause``/``resume``/``start``/``stop`` of it there,
    or the interval's end. Other flips are ignored.
    """
    ranked = events.withColumn("k", eventlog.kind_order())
    same_place = sql.Window.partitionBy(*eventlog.RESOURCE, "member").orderBy("ts_ms", "k")
    pauses = (
        ranked.where(
            F.col("event").isin("start", "stop", "pause", "resume") & (F.col("resource") != "")
        )
        .withColumn("next_ms", F.lead("ts_ms").over(same_place))
        .where(F.col("event") == "pause")
        .select(*eventlog.RESOURCE, "member", "ts_ms", "next_ms")
    )
    inside = (F.col("start_ms") <= F.col("ts_ms")) & (F.col("ts_ms") < F.col("end_ms"))
    end = F.least(F.coalesce("next_ms", "end_ms"), F.col("end_ms"))
    return (
        pauses.join(spans, [*eventlog.RESOURCE, "member"])
        .where(inside)
        .groupBy(*eventlog.RESOURCE)
        .agg(F.sum(end - F.col("ts_ms")).cast("long").alias("paused_ms"))
    )


def segments(spans: sql.DataFrame, bounds: sql.DataFrame) -> sql.DataFrame:
    """Sweep each resource's intervals: ``running_on`` members during ``[ts_ms, next_ms)``
    (``d`` of them more than just before ``ts_ms``); ``rk`` is the resource's hash key,
    by which the segments are partitioned.

    Segments start at the resource's first ``start`` and the last one reaches
    the run's last event, so a resource that stopped for good is paused until
    then.
    """
    deltas = spans.select(*eventlog.RESOURCE, F.col("start_ms").alias("ts_ms"), F.lit(1).alias("d"))
    deltas = deltas.unionByName(
        spans.select(*eventlog.RESOURCE, F.col("end_ms").alias("ts_ms"), F.lit(-1).alias("d"))
    )
    # One shuffle by resource (keyed by its hash, eventlog.sort_key) serves both the
    # sum per instant and the sweep: no exchange between them.
    keyed = deltas.withColumn("rk", F.xxhash64(*eventlog.RESOURCE)).repartition("rk")
    by_time = sql.Window.partitionBy("rk", *eventlog.RESOURCE).orderBy("ts_ms")
    return (
        keyed.groupBy("rk", *eventlog.RESOURCE, "ts_ms")
        .agg(F.sum("d").alias("d"))
        .join(F.broadcast(bounds.select("run", "run_end_ms")), "run")
        .select(
            "rk",
            *eventlog.RESOURCE,
            "ts_ms",
            F.coalesce(F.lead("ts_ms").over(by_time), F.col("run_end_ms")).alias("next_ms"),
            F.sum("d")
            .over(by_time.rowsBetween(sql.Window.unboundedPreceding, 0))
            .cast("long")
            .alias("running_on"),
            # the change at ts_ms: running_on - d members ran it just before
            F.col("d").cast("long").alias("d"),
        )
    )


def overlaps(spans: sql.DataFrame) -> sql.DataFrame:
    """``schema.OVERLAPS``: each interval that began while another member ran the resource.

    ``spans`` are ``intervals``, ``cut`` ones included: one the run's end cut still
    runs at that end, so one begun there (empty as it is) overlaps it, with an empty
    span.

    ``core.ownership.overlaps`` in PySpark, over the drill intervals (the simulator's
    metrics ask that function; ``tests/analytics/test_against_simulator.py`` holds the
    two to the same counts).

    ``other_member`` is the member whose earlier interval ends last; the row's
    span is the time both ran it.
    """
    by_start = sql.Window.partitionBy(*eventlog.sort_key(*eventlog.RESOURCE)).orderBy(
        "start_ms", "member"
    )
    so_far = by_start.rowsBetween(sql.Window.unboundedPreceding, sql.Window.currentRow)
    # The running max up to the previous row, as lag() of the running max: a
    # frame ending at -1 is noticeably slower in Spark than this pair.
    # A cut span reaches one past the run's end: it still runs there.
    reach = F.col("end_ms") + F.col("cut").cast("long")
    return (
        spans.withColumn("upto", F.max(F.struct(reach.alias("reach"), F.col("member")))
                         .over(so_far))
        .withColumn("latest", F.lag("upto").over(by_start))
        .where(F.col("latest.reach") > F.col("start_ms"))
        .select(
            *eventlog.RESOURCE,
            "member",
            F.col("latest.member").alias("other_member"),
            "start_ms",
            F.least("end_ms", "latest.reach").alias("end_ms"),
        )
    )
