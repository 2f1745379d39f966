"""Figures of ``kooper analyze`` (matplotlib, Agg backend, no pyplot global state).

Functions take the collected rows and return ``Figure`` objects; ``job`` saves
them. The running-resources plot mirrors the throughput-over-time figures of the
cooperative-rebalancing benchmark: a dip is a pause, its width the time to
recover.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import matplotlib

matplotlib.use("Agg")

from matplotlib import figure as mfigure

Rows = Sequence[Mapping[str, Any]]


def _by_run(rows: Iterable[Mapping[str, Any]]) -> dict[str, list[Mapping[str, Any]]]:
    grouped: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for row in rows:
        grouped[str(row["run"])].append(row)
    return grouped


def _label(metric: Mapping[str, Any]) -> str:
    return f"{metric['run']} ({metric['protocol'] or '?'}/{metric['policy'] or '?'})"


def running_over_time(metric: Mapping[str, Any], steps: Rows) -> mfigure.Figure:
    """Resources running on at least one member vs seconds since the run's first event."""
    fig = mfigure.Figure(figsize=(8, 3.5), layout="constrained")
    ax = fig.add_subplot()
    if steps:
        start = min(int(row["ts_ms"]) for row in steps)
        xs = [(int(row["ts_ms"]) - start) / 1000 for row in steps]
        end = start + int(metric["duration_ms"] or 0)
        xs_end = [*xs, (end - start) / 1000]
        ys = [int(row["running"]) for row in steps]
        ax.step(xs_end, [*ys, ys[-1]], where="post", color="tab:blue", label="running")
        # Buckets only exist where something changed: their range is a bar at
        # the bucket (like the benchmark's error bars), not a band to the next one.
        ranged = [r for r in steps if r["min_running"] != r["max_running"]]
        ax.vlines(
            [(int(r["ts_ms"]) - start) / 1000 for r in ranged],
            [int(r["min_running"]) for r in ranged], [int(r["max_running"]) for r in ranged],
            color="tab:blue", alpha=0.35, linewidth=2,
        )
    ax.set_xlabel("time since first event (s)")
    ax.set_ylabel("resources running")
    ax.set_ylim(bottom=0)
    ax.set_title(
        f"{_label(metric)}: total pause {int(metric['total_pause_ms']) / 1000:.1f} task-s,"
        f" {int(metric['overlaps'])} overlaps",
        fontsize=10,
    )
    ax.grid(alpha=0.3)
    return fig


def pause_distribution(metrics: Rows, resources: Rows) -> mfigure.Figure:
    """Per run, the share of resources whose pause is at most x seconds (an ECDF)."""
    fig = mfigure.Figure(figsize=(8, 4), layout="constrained")
    ax = fig.add_subplot()
    pauses = _by_run(resources)
    for metric in metrics:
        values = sorted(int(row["pause_ms"]) / 1000 for row in pauses.get(str(metric["run"]), []))
        if not values:
            continue
        shares = [(i + 1) / len(values) for i in range(len(values))]
        ax.step([0.0, *values], [0.0, *shares], where="post", label=_label(metric))
    ax.set_xlabel("pause per resource (s)")
    ax.set_ylabel("share of resources")
    ax.set_ylim(0, 1.02)
    ax.set_title("Distribution of per-resource pause", fontsize=10)
    ax.grid(alpha=0.3)
    if ax.lines:
        ax.legend(fontsize=8)
    return fig


def imbalance_over_time(metrics: Rows, imbalance: Rows) -> mfigure.Figure:
    """Per run, max - min resources per live member at each round."""
    fig = mfigure.Figure(figsize=(8, 3.5), layout="constrained")
    ax = fig.add_subplot()
    per_run = _by_run(imbalance)
    for metric in metrics:
        rows = per_run.get(str(metric["run"]), [])
        if not rows:
            continue
        start = min(int(row["ts_ms"]) for row in rows)
        ax.step(
            [(int(row["ts_ms"]) - start) / 1000 for row in rows],
            [int(row["imbalance"]) for row in rows],
            where="post", marker=".", label=_label(metric),
        )
    ax.set_xlabel("time since first round (s)")
    ax.set_ylabel("imbalance (max - min per member)")
    ax.set_ylim(bottom=0)
    ax.set_title("Imbalance at each round", fontsize=10)
    ax.grid(alpha=0.3)
    if ax.lines:
        ax.legend(fontsize=8)
    return fig


def all_figures(
    *,
    metrics: Rows,
    timeline: Rows,
    resources: Rows,
    imbalance: Rows,
    file_name: Callable[[str], str],
) -> dict[str, mfigure.Figure]:
    """Every figure of the report, keyed by its PNG file name."""
    figures: dict[str, mfigure.Figure] = {}
    steps = _by_run(timeline)
    for metric in metrics:
        run = str(metric["run"])
        figures[f"running_{file_name(run)}.png"] = running_over_time(metric, steps.get(run, []))
    figures["pause_distribution.png"] = pause_distribution(metrics, resources)
    figures["imbalance.png"] = imbalance_over_time(metrics, imbalance)
    return figures


def close(fig: mfigure.Figure) -> None:
    """Release a figure's memory (no pyplot registry to clean: just drop its artists)."""
    fig.clear()
