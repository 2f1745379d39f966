"""Each transform on small hand-made logs (tests/analytics/scenarios.py), exact numbers.

All scenarios go through the pipeline once, as one multi-run log, and each table
is collected once: Spark's per-action overhead, not the data, is the cost here.
"""

from __future__ import annotations

from typing import Any

import pytest
from pyspark import sql
from pyspark.testing import assertDataFrameEqual, assertSchemaEqual
from tests.analytics import scenarios

from kooper.analytics import eventlog, schema, transforms
from kooper.sim import metrics

R = sql.Row


def pipeline(df: sql.DataFrame) -> dict[str, sql.DataFrame]:
    tables = transforms.analyze(df)
    return {
        "intervals": tables.intervals,
        "resources": tables.resources,
        "overlaps": tables.overlaps,
        "imbalance": tables.imbalance,
        "timeline": tables.running,
        "metrics": tables.metrics,
    }


@pytest.fixture(scope="module")
def frames(spark) -> dict[str, sql.DataFrame]:
    rows = [event.to_row() for event in scenarios.all_events()]
    return pipeline(spark.createDataFrame(rows, schema.EVENTS).cache())


@pytest.fixture(scope="module")
def tables(frames) -> dict[str, list[sql.Row]]:
    return {name: df.collect() for name, df in frames.items()}


def rows(tables: dict[str, list[sql.Row]], table: str, run: str, *columns: str) -> list[sql.Row]:
    picked = [row for row in tables[table] if row.run == run]
    return [R(**{c: row[c] for c in columns}) for row in picked] if columns else picked


def metric(tables: dict[str, list[sql.Row]], run: str) -> dict[str, Any]:
    (row,) = rows(tables, "metrics", run)
    return row.asDict()


@pytest.mark.parametrize(
    ("table", "expected"),
    [("intervals", schema.INTERVALS), ("resources", schema.RESOURCES),
     ("overlaps", schema.OVERLAPS), ("imbalance", schema.IMBALANCE),
     ("timeline", schema.TIMELINE), ("metrics", schema.METRICS)],
)
def test_every_table_has_its_declared_schema(frames, table, expected):
    assertSchemaEqual(frames[table].schema, expected)


def test_normalize_fills_defaults_widens_integers_and_orders_columns(spark):
    raw = spark.createDataFrame(
        [(5, "x", "start", "m", "r")],
        "ts_ms int, run string, event string, member string, resource string",
    )
    got = eventlog.normalize(raw)
    assertSchemaEqual(got.schema, schema.EVENTS)
    assertDataFrameEqual(
        got, [R(ts_ms=5, run="x", group="", member="m", resource="r", event="start",
                generation=-1, epoch=-1, protocol="", policy="")]
    )


def test_handover_pauses_500_ms_and_counts_one_move(tables):
    assertDataFrameEqual(
        rows(tables, "intervals", "handover"),
        [R(run="handover", group="g", resource="r", member="a", start_ms=10, end_ms=1000),
         R(run="handover", group="g", resource="r", member="b", start_ms=1500, end_ms=2000)],
    )
    assertDataFrameEqual(
        rows(tables, "resources", "handover"),
        [R(run="handover", group="g", resource="r", pause_ms=500, max_pause_ms=500,
           overlap_ms=0, moves=1, undisturbed=True, paused_ms=0)],
    )
    m = metric(tables, "handover")
    assert (m["total_pause_ms"], m["max_pause_ms"], m["moves"], m["overlaps"]) == (500, 500, 1, 0)
    assert (m["rounds"], m["events"], m["resources"], m["members"]) == (1, 6, 1, 2)
    assert (m["duration_ms"], m["converge_ms"]) == (2000, 500)  # first stop 1000 -> start 1500
    assert rows(tables, "overlaps", "handover") == []


def test_resource_running_on_two_members_is_listed_as_an_overlap(tables):
    assertDataFrameEqual(
        rows(tables, "overlaps", "overlap"),
        [R(run="overlap", group="g", resource="r", member="b", other_member="a",
           start_ms=500, end_ms=800)],
    )
    m = metric(tables, "overlap")
    assert (m["overlaps"], m["overlap_ms"], m["total_pause_ms"], m["moves"]) == (1, 300, 0, 1)


def test_a_start_on_the_logs_last_row_overlaps_what_still_runs_there(tables):
    # The end of the log cuts a's interval of r: a still runs r at the last row, so b
    # starting r there runs it twice though b's own interval is empty; so do b and d
    # both starting s there. q is no overlap: c's stop at 100 comes before its start
    # (same-instant order), but a had stopped q at 50.
    assertDataFrameEqual(
        rows(tables, "overlaps", "end_start", "resource", "member", "other_member",
             "start_ms", "end_ms"),
        [R(resource="r", member="b", other_member="a", start_ms=100, end_ms=100),
         R(resource="s", member="d", other_member="b", start_ms=100, end_ms=100)],
    )
    m = metric(tables, "end_start")
    assert (m["overlaps"], m["overlap_ms"]) == (2, 0)
    events = scenarios.to_events(scenarios.END_START, run="end_start",
                                 protocol="compatible", policy="kooper")
    assert metrics.run_metrics(events).overlaps == 2


def test_eager_stops_on_undisturbed_members_count_as_undisturbed_pause(tables):
    assertDataFrameEqual(
        rows(tables, "resources", "eager_kill", "resource", "pause_ms", "moves", "undisturbed"),
        [R(resource="r1", pause_ms=100, moves=0, undisturbed=True),
         R(resource="r2", pause_ms=100, moves=0, undisturbed=True),
         R(resource="r3", pause_ms=100, moves=1, undisturbed=False)],
    )
    m = metric(tables, "eager_kill")
    assert (m["total_pause_ms"], m["undisturbed_pause_ms"], m["undisturbed_resources"]) == (
        300, 200, 2)
    assert (m["converge_ms"], m["protocol"], m["rounds"]) == (100, "eager", 2)


def test_cooperative_kill_pauses_only_the_departed_members_resource(tables):
    m = metric(tables, "coop_kill")
    assert (m["total_pause_ms"], m["max_pause_ms"], m["undisturbed_pause_ms"]) == (100, 100, 0)
    assert (m["moves"], m["overlaps"], m["converge_ms"], m["members"]) == (1, 0, 100, 3)


def test_leave_without_stop_ends_the_members_intervals(tables):
    assertDataFrameEqual(
        rows(tables, "intervals", "leave", "member", "start_ms", "end_ms"),
        [R(member="a", start_ms=0, end_ms=100), R(member="b", start_ms=400, end_ms=500)],
    )
    assert metric(tables, "leave")["total_pause_ms"] == 300


def test_zombie_that_stops_after_leaving_shows_as_overlap(tables):
    assertDataFrameEqual(
        rows(tables, "overlaps", "zombie", "member", "other_member", "start_ms", "end_ms"),
        [R(member="b", other_member="a", start_ms=200, end_ms=250)],
    )


def test_rejoin_ends_what_ran_before_and_restart_on_same_member_is_no_move(tables):
    assertDataFrameEqual(
        rows(tables, "intervals", "rejoin", "member", "start_ms", "end_ms"),
        [R(member="a", start_ms=0, end_ms=100), R(member="a", start_ms=130, end_ms=200)],
    )
    assertDataFrameEqual(
        rows(tables, "resources", "rejoin", "pause_ms", "moves", "undisturbed"),
        [R(pause_ms=30, moves=0, undisturbed=False)],
    )


def test_a_start_at_the_instant_of_a_rejoin_does_not_extend_the_interval_before_it(tables):
    # The join at 200 comes before the start at 200 (same-instant order): a's first
    # interval ends at its leave, so only a's second start overlaps b.
    assertDataFrameEqual(
        rows(tables, "intervals", "rejoin_start", "member", "start_ms", "end_ms"),
        [R(member="a", start_ms=0, end_ms=100), R(member="b", start_ms=150, end_ms=300),
         R(member="a", start_ms=200, end_ms=300)],
    )
    assertDataFrameEqual(
        rows(tables, "overlaps", "rejoin_start", "member", "other_member", "start_ms", "end_ms"),
        [R(member="a", other_member="b", start_ms=200, end_ms=300)],
    )
    events = scenarios.to_events(scenarios.REJOIN_START, run="rejoin_start",
                                 protocol="compatible", policy="kooper")
    assert sorted(span[2:] for span in metrics.intervals(events)) == [
        (0, 100), (150, 300), (200, 300)]


def test_handover_at_one_instant_is_no_pause(tables):
    m = metric(tables, "instant")
    assert (m["total_pause_ms"], m["max_pause_ms"], m["moves"], m["overlaps"]) == (0, 0, 1, 0)


def test_resource_stopped_for_good_pauses_until_the_runs_last_event(tables):
    assertDataFrameEqual(
        rows(tables, "resources", "stopped", "resource", "pause_ms", "max_pause_ms"),
        [R(resource="r", pause_ms=850, max_pause_ms=750),
         R(resource="s", pause_ms=0, max_pause_ms=0)],
    )
    m = metric(tables, "stopped")
    assert (m["total_pause_ms"], m["max_pause_ms"]) == (850, 750)


def test_runs_in_one_log_are_measured_separately(tables):
    got = [R(run=r.run, protocol=r.protocol, policy=r.policy, pause=r.total_pause_ms)
           for r in tables["metrics"] if r.run in ("handover", "overlap")]
    assertDataFrameEqual(
        got,
        [R(run="handover", protocol="compatible", policy="kooper", pause=500),
         R(run="overlap", protocol="eager", policy="kip415", pause=0)],
    )
    assert len(tables["metrics"]) == len(scenarios.SCENARIOS)
    keys = [(r.protocol, r.policy, r.run) for r in tables["metrics"]]
    assert keys == sorted(keys)


def test_convergence_is_null_without_a_disruption(tables):
    m = metric(tables, "quiet")
    assert (m["converge_ms"], m["total_pause_ms"], m["moves"]) == (None, 0, 0)


def test_imbalance_is_measured_over_live_members_at_each_round(tables):
    assertDataFrameEqual(
        rows(tables, "imbalance", "balance", "ts_ms", "members", "min_running", "max_running",
             "imbalance"),
        [R(ts_ms=20, members=2, min_running=0, max_running=3, imbalance=3),
         R(ts_ms=50, members=2, min_running=1, max_running=2, imbalance=1),
         R(ts_ms=70, members=3, min_running=0, max_running=2, imbalance=2),
         R(ts_ms=90, members=2, min_running=0, max_running=2, imbalance=2)],
    )
    m = metric(tables, "balance")
    assert (m["max_imbalance"], m["final_imbalance"]) == (3, 2)


def test_a_start_on_the_logs_last_row_runs_at_a_round_of_that_instant(tables):
    # docs/events.md, "Imbalance": the state after every row at t; an interval cut by
    # the end of the log still runs at run_end, the empty one begun there too.
    assertDataFrameEqual(
        rows(tables, "imbalance", "end_round", "ts_ms", "members", "min_running",
             "max_running", "imbalance"),
        [R(ts_ms=20, members=2, min_running=1, max_running=1, imbalance=0)],
    )


def test_timeline_steps_with_resources_running_anywhere(tables):
    assertDataFrameEqual(
        rows(tables, "timeline", "timeline", "ts_ms", "running"),
        [R(ts_ms=0, running=0), R(ts_ms=10, running=1), R(ts_ms=1000, running=0),
         R(ts_ms=1500, running=2)],
    )


@pytest.mark.parametrize(("paused", "plain"), sorted(scenarios.PAUSED_TWINS.items()))
def test_pause_and_resume_rows_change_no_table_and_no_metric_but_events(tables, paused, plain):
    # A paused resource stays assigned to its member: it still runs for every metric.
    # Only ``paused_ms`` (time held paused) and ``events`` see the rows.
    for table in ("intervals", "resources", "overlaps", "imbalance", "timeline"):
        assertDataFrameEqual(
            [R(**{**row.asDict(), "run": plain, "paused_ms": 0}) if table == "resources"
             else R(**{**row.asDict(), "run": plain}) for row in rows(tables, table, paused)],
            rows(tables, table, plain),
        )
    with_flips, without = metric(tables, paused), metric(tables, plain)
    assert with_flips.pop("events") == without.pop("events") + len(scenarios.FLIPS[plain])
    assert with_flips.pop("paused_ms") == scenarios.PAUSED_MS[plain]
    assert without.pop("paused_ms") == 0
    assert {**with_flips, "run": plain} == without


def test_a_handover_with_pauses_still_pauses_500_ms(tables):
    m = metric(tables, "handover_paused")
    assert (m["total_pause_ms"], m["max_pause_ms"], m["undisturbed_pause_ms"], m["moves"],
            m["overlaps"], m["overlap_ms"]) == (500, 500, 500, 1, 0, 0)
    assert (m["rounds"], m["events"], m["resources"], m["members"]) == (1, 12, 1, 2)
    assert (m["duration_ms"], m["converge_ms"], m["paused_ms"]) == (2000, 500, 800)
    m = metric(tables, "coop_kill_paused")
    assert (m["total_pause_ms"], m["max_pause_ms"], m["undisturbed_pause_ms"],
            m["undisturbed_resources"], m["moves"], m["converge_ms"]) == (100, 100, 0, 2, 1, 100)
    assert rows(tables, "resources", "coop_kill_paused", "resource", "paused_ms") == [
        R(resource="r1", paused_ms=70), R(resource="r2", paused_ms=20),
        R(resource="r3", paused_ms=140),  # 90 on c until it left, 50 on a
    ]
    m = metric(tables, "zombie_paused")
    assert (m["overlaps"], m["overlap_ms"], m["total_pause_ms"]) == (1, 50, 0)


def test_a_log_without_flips_gives_the_same_tables_when_paused_is_skipped(spark):
    """``flips=False`` (no pause/resume row, as counted before Spark) skips ``paused``."""
    plain = [e for e in scenarios.all_events() if e.event not in ("pause", "resume")]
    df = spark.createDataFrame([e.to_row() for e in plain], schema.EVENTS).cache()
    full, skipped = transforms.analyze(df), transforms.analyze(df, flips=False)
    assertDataFrameEqual(skipped.resources, full.resources)
    assertDataFrameEqual(skipped.metrics, full.metrics)
    assertSchemaEqual(skipped.resources.schema, schema.RESOURCES)
