"""Pause and resume rows in the pure-Python metrics (``kooper.sim.metrics``).

A paused resource stays assigned to and held by its member: the rows are
accepted, ordered after the start they follow, and change nothing but
``events`` and ``paused_ms``, with or without a measuring window.
"""

from __future__ import annotations

import dataclasses
import pathlib
import random

import pytest
from tests.analytics import scenarios
from tests.analytics.test_against_simulator import random_log

from kooper.core import events
from kooper.sim import metrics as sim_metrics

FLIP_KINDS = (events.Kind.PAUSE, events.Kind.RESUME)


def log(run: str, *, twin_of: str | None = None) -> list[events.Event]:
    rows, protocol, policy = scenarios.SCENARIOS[run]
    return scenarios.to_events(rows, run=twin_of or run, protocol=protocol, policy=policy)


def without_events(metrics: sim_metrics.RunMetrics) -> sim_metrics.RunMetrics:
    return dataclasses.replace(metrics, events=0, paused_ms=0)


@pytest.mark.parametrize(("paused", "plain"), sorted(scenarios.PAUSED_TWINS.items()))
def test_flips_change_only_the_event_count(paused, plain):
    with_flips = sim_metrics.run_metrics(log(paused, twin_of=plain))
    without = sim_metrics.run_metrics(log(plain))
    assert with_flips.events == without.events + len(scenarios.FLIPS[plain])
    assert (with_flips.paused_ms, without.paused_ms) == (scenarios.PAUSED_MS[plain], 0)
    assert without_events(with_flips) == without_events(without)
    assert sim_metrics.intervals(log(paused, twin_of=plain)) == sim_metrics.intervals(log(plain))


def test_a_handover_with_pauses_has_the_handovers_exact_numbers():
    got = sim_metrics.run_metrics(log("handover_paused"))
    assert (got.events, got.resources, got.total_pause_ms, got.max_pause_ms,
            got.undisturbed_pause_ms, got.moves, got.overlaps, got.rounds,
            got.converge_ms, got.running_at_end, got.paused_ms
            ) == (12, 1, 500, 500, 500, 1, 0, 1, 500, 1, 800)


@pytest.mark.parametrize(
    ("start_ms", "end_ms", "paused_ms"),
    # Held paused in coop_kill: c 10-100, a's r1 50-120, a's r3 200-250, b's r2 280-300.
    [(100, 250, 20 + 50), (0, 120, 90 + 70), (250, 300, 20)],
)
def test_flips_change_no_windowed_metric_but_events(start_ms, end_ms, paused_ms):
    with_flips = sim_metrics.run_metrics(
        log("coop_kill_paused", twin_of="coop_kill"), start_ms=start_ms, end_ms=end_ms
    )
    without = sim_metrics.run_metrics(log("coop_kill"), start_ms=start_ms, end_ms=end_ms)
    flips = [row for row in scenarios.FLIPS["coop_kill"] if start_ms <= row[0] <= end_ms]
    assert with_flips.events == without.events + len(flips)
    assert (with_flips.paused_ms, without.paused_ms) == (paused_ms, 0)
    assert without_events(with_flips) == without_events(without)


def test_flips_inside_random_logs_change_no_metric_but_events():
    rng = random.Random(416)
    for i in range(300):
        plain = [e for e in random_log(rng, f"r{i}") if e.event not in FLIP_KINDS]
        first, last = plain[0].ts_ms, plain[-1].ts_ms
        members = sorted({e.member for e in plain if e.member})
        flips = [
            events.Event(rng.randint(first, last), f"r{i}", "g", rng.choice(members),
                         rng.choice(["A-0", "A-1", "B"]), rng.choice(FLIP_KINDS))
            for _ in range(rng.randint(1, 10))
        ]
        # Appended, not shuffled in: the random rows' protocols differ, and the run's
        # protocol is the first one found among rows of one instant.
        mixed = [*plain, *flips]
        with_flips = sim_metrics.run_metrics(mixed)
        without = sim_metrics.run_metrics(plain)
        assert with_flips.events == without.events + len(flips)
        assert without_events(with_flips) == without_events(without), i
        assert sim_metrics.running(mixed) == sim_metrics.running(plain)


def test_same_instant_rows_put_a_pause_after_the_start_it_follows():
    rows = scenarios.to_events(
        [(5, "a", "r", "resume"), (5, "a", "r", "pause"), (5, "a", "r", "start"),
         (5, "a", "r", "stop"), (5, "a", "", "join")],
        run="t", protocol="", policy="",
    )
    assert [e.event for e in sim_metrics._sorted(rows)] == [
        events.Kind.STOP, events.Kind.JOIN, events.Kind.START, events.Kind.PAUSE,
        events.Kind.RESUME,
    ]


def test_the_docs_example_with_its_pause_gives_the_numbers_the_docs_state():
    text = (pathlib.Path(__file__).parents[2] / "docs" / "events.md").read_text()
    block = text.split("## Example", 1)[1].split("```", 2)[1]
    rows = list(events.load_lines(block.splitlines()))
    assert {e.event for e in rows} >= set(FLIP_KINDS)
    got = sim_metrics.run_metrics(rows)
    assert (got.total_pause_ms, got.max_pause_ms, got.moves, got.overlaps, got.converge_ms,
            got.rounds, got.events, got.paused_ms) == (500, 500, 1, 0, 500, 1, 7, 200)
    plain = [e for e in rows if e.event not in FLIP_KINDS]
    assert without_events(sim_metrics.run_metrics(plain)) == without_events(got)
