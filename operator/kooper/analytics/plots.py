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
from matplotlib import ticker

Rows = Sequence[Mapping[str, Any]]


SMALL_MULTIPLES = 12
"""Runs drawn in the imbalance figure (one panel each); the rest are in the Parquet file."""

_LEFT: dict[str, Any] = {"color": "tab:red", "linestyle": "--", "linewidth": 0.9, "alpha": 0.7}
_JOINED: dict[str, Any] = {"color": "tab:green", "linestyle": ":", "linewidth": 1.1, "alpha": 0.8}


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


def _mark_disruptions(ax: maxes.Axes, rows: Sequence[Mapping[str, Any]], start: int) -> None:
    """A vertical line at each member's leave (red, dashed) and late join (green, dotted)."""
    for kind, style, label in (("leave", _LEFT, "member left"),
                               ("join", _JOINED, "member (re)joined")):
        xs = sorted({(int(r["ts_ms"]) - start) / 1000 for r in rows if r["event"] == kind})
        for n, x in enumerate(xs):
            ax.axvline(x, label=label if n == 0 else None, **style)


def _integer_y(ax: maxes.Axes) -> None:
    ax.yaxis.set_major_locator(ticker.MaxNLocator(integer=True))


def _finish(
    ax: maxes.Axes,
    *,
    xlabel: str,
    ylabel: str,
    title: str,
    top: float | None = None,
    legend: bool = True,
) -> None:
    """Labels, a y axis from 0, title, grid and a legend of whatever was labelled."""
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_ylim(0, top)
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3)
    if legend and ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=8, loc="lower right")


def running_over_time(
    metric: Mapping[str, Any],
    steps: Rows,
    disruptions: Rows = (),
    start: int | None = None,
) -> mfigure.Figure:
    """Resources running on at least one member vs seconds since the run's first event,
    with members' departures and late joins marked."""
    fig, ax = _axes(3.5)
    if start is None:
        start = min((int(row["ts_ms"]) for row in steps), default=0)
    if steps:
        xs = [(int(row["ts_ms"]) - start) / 1000 for row in steps]
        end = start + int(metric["duration_ms"] or 0)
        xs_end = [*xs, (end - start) / 1000]
        ys = [int(row["running"]) for row in steps]
        ax.step(xs_end, [*ys, ys[-1]], where="post", color="tab:blue", label="resources running")
        # Buckets only exist where something changed: their range is a bar at
        # the bucket (like the benchmark's error bars), not a band to the next one.
        ranged = [r for r in steps if r["min_running"] != r["max_running"]]
        if ranged:
            ax.vlines(
                [(int(r["ts_ms"]) - start) / 1000 for r in ranged],
                [int(r["min_running"]) for r in ranged], [int(r["max_running"]) for r in ranged],
                color="tab:blue", alpha=0.35, linewidth=2, label="min-max within a time bucket",
            )
    _mark_disruptions(ax, disruptions, start)
    _integer_y(ax)
    top = max((int(r["max_running"]) for r in steps), default=0)
    _finish(
        ax,
        xlabel="time since the run's first event (s)",
        ylabel="resources running",
        title=f"Resources running: {_label(metric)}\n"
        f"total pause {int(metric['total_pause_ms']) / 1000:,.1f} task-s,"
        f" max pause {int(metric['max_pause_ms']) / 1000:,.1f} s,"
        f" {int(metric['overlaps'])} overlap(s)",
        top=top * 1.08 + 0.5,
    )
    return fig


def _pause_ecdf(ax: maxes.Axes, rows: Sequence[Mapping[str, Any]], label: str) -> None:
    values = sorted(int(row["pause_ms"]) / 1000 for row in rows)
    shares = [(i + 1) / len(values) for i in range(len(values))]
    ax.step([0.0, *values], [0.0, *shares], where="post", label=label)


def pause_distribution(metrics: Rows, resources: Rows) -> mfigure.Figure:
    """Per run, the share of resources whose pause is at most x seconds (an ECDF)."""
    fig, ax = _axes(4)
    grouped = _by_run(resources)
    for metric in metrics:
        rows = grouped.get(str(metric["run"]), [])
        if rows:
            _pause_ecdf(ax, rows, _label(metric))
    _finish(ax, xlabel="pause per resource (s)", ylabel="share of resources",
            title="Distribution of per-resource pause (one line per run)", top=1.02)
    return fig


def imbalance_over_time(
    metrics: Rows,
    imbalance: Rows,
    disruptions: Rows = (),
    starts: Mapping[str, int] | None = None,
) -> mfigure.Figure:
    """Max - min resources per live member at each round: one panel per run (small
    multiples, the first ``SMALL_MULTIPLES`` runs), sharing the integer y axis."""
    grouped = _by_run(imbalance)
    lost = _by_run(disruptions)
    shown = [m for m in metrics if grouped.get(str(m["run"]))][:SMALL_MULTIPLES]
    with_rounds = sum(1 for m in metrics if grouped.get(str(m["run"])))
    panels = max(1, len(shown))
    fig = mfigure.Figure(figsize=(8, 1.2 + 1.9 * panels), layout="constrained")
    axes = fig.subplots(panels, 1, sharey=True, squeeze=False)[:, 0]
    top = max((int(r["imbalance"]) for r in imbalance), default=0)
    for ax, metric in zip(axes, shown, strict=False):
        run = str(metric["run"])
        rows = grouped[run]
        start = (starts or {}).get(run, min(int(r["ts_ms"]) for r in rows))
        xs = [(int(r["ts_ms"]) - start) / 1000 for r in rows]
        ys = [int(r["imbalance"]) for r in rows]
        end = max(xs[-1], int(metric["duration_ms"] or 0) / 1000)
        ax.step([*xs, end], [*ys, ys[-1]], where="post", color="tab:purple")
        ax.plot(xs, ys, ".", color="tab:purple", label="imbalance at a round")
        _mark_disruptions(ax, lost.get(run, []), start)
        _integer_y(ax)
        ax.set_xlim(0, end * 1.02 or 1)
        _finish(ax, xlabel="time since the run's first event (s)", ylabel="max - min",
                title=_label(metric), top=top + 0.5)
    if not shown:
        _finish(axes[0], xlabel="time since the run's first event (s)", ylabel="max - min",
                title="no rounds in any run")
    more = f" (first {len(shown)} of {with_rounds} runs)" if with_rounds > len(shown) else ""
    fig.suptitle("Imbalance at each round: max - min resources running per live member" + more,
                 fontsize=11)
    return fig


def all_figures(
    *,
    metrics: Rows,
    timeline: Rows,
    resources: Rows,
    imbalance: Rows,
    file_name: Callable[[str], str],
    disruptions: Rows = (),
    starts: Mapping[str, int] | None = None,
) -> dict[str, mfigure.Figure]:
    """Every figure of the report, keyed by its PNG file name."""
    figures: dict[str, mfigure.Figure] = {}
    steps = _by_run(timeline)
    lost = _by_run(disruptions)
    for metric in metrics:
        run = str(metric["run"])
        name, copy = f"running_{file_name(run)}", 1
        while f"{name}.png" in figures:  # "a/b" and "a b": one file name, two runs
            copy += 1
            name = f"running_{file_name(run)}-{copy}"
        figures[f"{name}.png"] = running_over_time(
            metric, steps.get(run, []), lost.get(run, []), (starts or {}).get(run)
        )
    figures["pause_distribution.png"] = pause_distribution(metrics, resources)
    figures["imbalance.png"] = imbalance_over_time(metrics, imbalance, disruptions, starts)
    return figures


def close(fig: mfigure.Figure) -> None:
    """Release a figure's memory (no pyplot registry to clean: just drop its artists)."""
    fig.clear()
