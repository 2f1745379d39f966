"""The Spark job and the simulator's pure-Python metrics agree on random logs.

``kooper.sim.metrics`` implements the same definitions (docs/events.md) without
Spark. Random logs with frequent ties, zombies, rejoins, stray stops, pauses and
resumes go through both; every per-run number must match. One Spark pipeline
runs for all logs, as separate runs of one DataFrame.
"""

from __future__ import annotations

import random

import pytest
from tests.analytics.test_transforms import pipeline

from kooper.analytics import schema
from kooper.core import events
from kooper.sim import metrics as sim_metrics

KINDS = ["start"] * 5 + ["stop"] * 3 + ["round", "join", "leave", "pause", "resume"]
WITH_RESOURCE = (events.Kind.START, events.Kind.STOP, events.Kind.PAUSE, events.Kind.RESUME)
COMPARED = ("protocol", "policy", "events", "resources", "total_pause_ms", "max_pause_ms",
            "undisturbed_resources", "undisturbed_pause_ms", "moves", "overlaps", "rounds",
            "converge_ms", "paused_ms")


def random_log(rng: random.Random, run: str) -> list[events.Event]:
    members = [f"m{i}" for i in range(rng.randint(1, 4))]
    resources = [f"A-{i}" for i in range(rng.randint(1, 4))]
    rows = [events.Event(0, run, "g", m, "", events.Kind.JOIN) for m in members]
    ts = 0
    for _ in range(rng.randint(5, 40)):
        ts += rng.choice([0, 0, 1, 5, 10, 50])  # many ties
        kind = events.Kind(rng.choice(KINDS))
        member = "" if kind is events.Kind.ROUND else rng.choice(members)
        resource = rng.choice(resources) if kind in WITH_RESOURCE else ""
        rows.append(events.Event(ts, run, "g", member, resource, kind,
                                 protocol=rng.choice(["eager", "compatible"]), policy="kooper"))
    return rows


@pytest.fixture(scope="module")
def logs() -> list[events.Event]:
    rng = random.Random(415)
    return [e for i in range(80) for e in random_log(rng, f"rand-{i:02d}")]


def test_spark_metrics_equal_simulator_metrics_on_random_logs(spark, logs):
    df = spark.createDataFrame([e.to_row() for e in logs], schema.EVENTS)
    got = {row["run"]: row.asDict() for row in pipeline(df)["metrics"].collect()}
    expected = {m.run: m for m in sim_metrics.by_run(logs)}
    assert sorted(got) == sorted(expected)
    mismatches = [
        (run, column, got[run][column], getattr(expected[run], column))
        for run in sorted(expected)
        for column in COMPARED
        if got[run][column] != getattr(expected[run], column)
    ]
    assert mismatches == []


def test_a_start_elsewhere_at_the_runs_last_instant_is_a_move(spark):
    """docs/events.md, "Move": every start counts, also one whose interval the run's end
    leaves empty (the Spark job summed moves over the resources with a non-empty interval
    only, and missed it)."""
    kinds = events.Kind
    rows = [events.Event(0, "last", "g", "m1", "", kinds.JOIN),
            events.Event(0, "last", "g", "m2", "", kinds.JOIN),
            events.Event(5, "last", "g", "m1", "A-0", kinds.START),
            events.Event(5, "last", "g", "m2", "A-0", kinds.START)]
    df = spark.createDataFrame([e.to_row() for e in rows], schema.EVENTS)
    [got] = pipeline(df)["metrics"].collect()
    assert got["moves"] == sim_metrics.run_metrics(rows).moves == 1
