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

from matplotlib import axes as maxes
from matplotlib import figure as mfigure

Rows = Sequence[Mapping[str, Any]]


def _by_run(rows: Iterable[Mapping[str, Any]]) -> dict[str, list[Mapping[str, Any]]]:
    grouped: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for row in rows:
        grouped[str(row["run"])].append(row)
    return grouped


def _label(metric: Mapping[str, Any]) -> str:
    return f"{metric['run']} ({metric['protocol'] or '?'}/{metric['policy'] or '?'})"


def _axes(height: float) -> tuple[mfigure.Figure, maxes.Axes]:
    fig = mfigure.Figure(figsize=(8, height), layout="constrained")
    return fig, fig.add_subplot()


def _finish(
    ax: maxes.Axes,
    *,
    xlabel: str,
    ylabel: str,
    title: str,
    top: float | None = None,
    legend: bool = False,
) -> None:
    """Labels, a y axis from 0, title and grid; with ``legend``, a legend if a line was drawn."""
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_ylim(0, top)
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3)
    if legend and ax.lines:
        ax.legend(fontsize=8)


def _per_run(
    metrics: Rows,
    rows: Rows,
    draw: Callable[[maxes.Axes, list[Mapping[str, Any]], str], None],
    *,
    height: float,
    **labels: Any,
) -> mfigure.Figure:
    """Each run that has rows drawn by ``draw(ax, rows, label)`` in metrics order, a legend."""
    fig, ax = _axes(height)
    grouped = _by_run(rows)
    for metric in metrics:
        run_rows = grouped.get(str(metric["run"]), [])
        if run_rows:
            draw(ax, run_rows, _label(metric))
    _finish(ax, legend=True, **labels)
    return fig


def running_over_time(metric: Mapping[str, Any], steps: Rows) -> mfigure.Figure:
    """Resources running on at least one member vs seconds since the run's first event."""
    fig, ax = _axes(3.5)
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
    _finish(
        ax,
        xlabel="time since first event (s)",
        ylabel="resources running",
        title=f"{_label(metric)}: total pause {int(metric['total_pause_ms']) / 1000:.1f} task-s,"
        f" {int(metric['overlaps'])} overlaps",
    )
    return fig


def _pause_ecdf(ax: maxes.Axes, rows: list[Mapping[str, Any]], label: str) -> None:
    values = sorted(int(row["pause_ms"]) / 1000 for row in rows)
    shares = [(i + 1) / len(values) for i in range(len(values))]
    ax.step([0.0, *values], [0.0, *shares], where="post", label=label)


def pause_distribution(metrics: Rows, resources: Rows) -> mfigure.Figure:
    """Per run, the share of resources whose pause is at most x seconds (an ECDF)."""
    return _per_run(
        metrics, resources, _pause_ecdf, height=4, xlabel="pause per resource (s)",
        ylabel="share of resources", title="Distribution of per-resource pause", top=1.02,
    )


def _imbalance_steps(ax: maxes.Axes, rows: list[Mapping[str, Any]], label: str) -> None:
    start = min(int(row["ts_ms"]) for row in rows)
    ax.step(
        [(int(row["ts_ms"]) - start) / 1000 for row in rows],
        [int(row["imbalance"]) for row in rows],
        where="post", marker=".", label=label,
    )


def imbalance_over_time(metrics: Rows, imbalance: Rows) -> mfigure.Figure:
    """Per run, max - min resources per live member at each round."""
    return _per_run(
        metrics, imbalance, _imbalance_steps, height=3.5, xlabel="time since first round (s)",
        ylabel="imbalance (max - min per member)", title="Imbalance at each round",
    )


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
