"""The pipeline from an event log to the job's tables: pure DataFrame -> DataFrame steps.

Nothing here opens a file or a session: ``job.py`` reads and writes. Every step
uses window functions (``lag``/``lead``/running sums over a resource or member
ordered by time) and aggregates, never Python UDFs, so the plan runs on the
executors and scales with the cluster.

The steps, with the definitions that ``docs/events.md`` spells out:

1. ``eventlog.normalize``: fill optional columns' defaults, widen integers to long.
2. ``intervals.intervals``: pair each ``start`` with the end of that run of the
   resource on that member (its next ``start``/``stop`` there, else the member's
   ``leave`` or rejoin, else the run's last event).
3. ``intervals.segments``: sweep the intervals of each resource: how many members
   ran it between consecutive change points.
4. ``resources.stats``: pause, longest pause and overlap time from the segments,
   plus ``moves``, the ``undisturbed`` flag and ``paused_ms`` (``intervals.paused``:
   time held paused by ``pause`` rows, which are no pause of the resource).
5. ``intervals.overlaps``, ``balance.imbalance``, ``timeline.running``,
   ``runs.convergence``, ``runs.metrics``.

Events that share a timestamp are ordered stop, leave, round, join, start
(``eventlog.kind_order``): a hand-over at one instant is no pause, and a member
that rejoins at ``t`` and starts a resource at ``t`` started it in its new life.
"""

from __future__ import annotations

import dataclasses

from pyspark import sql, storagelevel

from kooper.analytics import balance, intervals, resources, runs, timeline

TIMELINE_POINTS = 1000
"""Buckets per run in ``timeline.parquet`` and the running-resources plots."""


@dataclasses.dataclass(frozen=True, slots=True)
class Tables:
    """The pipeline's outputs as DataFrames (persisted where several outputs share them)."""

    intervals: sql.DataFrame
    """``schema.INTERVALS``."""
    resources: sql.DataFrame
    """``schema.RESOURCES``."""
    overlaps: sql.DataFrame
    """``schema.OVERLAPS``."""
    imbalance: sql.DataFrame
    """``schema.IMBALANCE``."""
    running: sql.DataFrame
    """``schema.TIMELINE``: the exact step function."""
    timeline: sql.DataFrame
    """``schema.RUNNING``: ``running`` in at most ``points`` buckets per run."""
    metrics: sql.DataFrame
    """``schema.METRICS``."""
    bounds: sql.DataFrame
    """Per run: ``run_start_ms``, ``run_end_ms``."""
    disruptions: sql.DataFrame
    """``schema.DISRUPTIONS``: leaves and late joins, for the plots."""
    cached: tuple[sql.DataFrame, ...]
    """Persisted intermediates: unpersist them when the outputs are written."""


def analyze(events: sql.DataFrame, *, points: int = TIMELINE_POINTS, flips: bool = True) -> Tables:
    """Run every step on normalized ``events``, persisting the frames several steps reuse.

    ``flips=False`` says the log has no ``pause``/``resume`` row (``inputs.check``
    counted them): ``paused_ms`` is then 0 without a sort of the log for it.
    """

    def keep(df: sql.DataFrame) -> sql.DataFrame:
        return df.persist(storagelevel.StorageLevel.MEMORY_AND_DISK)

    bounds = keep(runs.bounds(events))
    reached = keep(intervals.intervals(events, bounds))
    spans = intervals.nonempty(reached)
    segs = keep(intervals.segments(spans, bounds))
    calm = resources.undisturbed(spans, resources.disturbed_members(events))
    held = intervals.paused(events, spans) if flips else None
    moved = keep(resources.moves(events))
    per_resource = keep(resources.stats(segs, moved, calm, held))
    overlapping = keep(intervals.overlaps(reached))
    per_round = keep(balance.imbalance(events, reached, bounds))
    converged = runs.convergence(events)
    steps = timeline.running(segs, bounds)
    return Tables(
        intervals=spans,
        resources=per_resource,
        overlaps=overlapping,
        imbalance=per_round,
        running=steps,
        timeline=timeline.downsample(steps, bounds, points),
        metrics=runs.metrics(events, per_resource, moved, overlapping=overlapping,
                             balance=per_round, converged=converged),
        bounds=bounds,
        disruptions=resources.disruptions(events),
        cached=(bounds, reached, segs, moved, per_resource, overlapping, per_round),
    )
