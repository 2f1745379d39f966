"""The demo's plot: how many resources run at each moment, one panel per run."""

from __future__ import annotations

import pathlib
from collections.abc import Sequence

from kooper.core import events


def running_series(rows: Sequence[events.Event], *, start_ms: int
                   ) -> tuple[list[float], list[int]]:
    """Step series (seconds since ``start_ms``, resources running) from a time-ordered log."""
    owners: dict[str, set[str]] = {}
    times: list[float] = []
    counts: list[int] = []
    for row in rows:
        if row.event is events.Kind.START:
            owners.setdefault(row.resource, set()).add(row.member)
        elif row.event is events.Kind.STOP:
            owners.get(row.resource, set()).discard(row.member)
        else:
            continue
        times.append((row.ts_ms - start_ms) / 1000)
        counts.append(sum(1 for members in owners.values() if members))
    return times, counts


def plot_runs(runs: Sequence[tuple[str, Sequence[events.Event], int, int]],
              path: pathlib.Path, *, total: int) -> pathlib.Path:
    """Write a PNG: per run ``(label, rows, drill_start_ms, drill_end_ms)``, running over time.

    Time 0 is the start of the rolling restart; the dashed line is the number
    of resources that should run.
    """
    import matplotlib

    matplotlib.use("Agg")  # no display: the demo runs in terminals and CI
    from matplotlib import pyplot

    figure, axes = pyplot.subplots(len(runs), 1, sharex=True, squeeze=False,
                                   figsize=(9, 2.4 * len(runs)))
    for axis, (label, rows, start_ms, end_ms) in zip(axes[:, 0], runs, strict=True):
        # The demo's own shutdown after the window stops everything: not part of the drill.
        window = [row for row in rows if row.ts_ms <= end_ms]
        times, counts = running_series(window, start_ms=start_ms)
        axis.step(times, counts, where="post", label="running")
        axis.axhline(total, linestyle="--", linewidth=0.8, color="grey")
        axis.axvspan(0, (end_ms - start_ms) / 1000, alpha=0.08, color="tab:orange")
        axis.set_ylim(0, total + 1)
        axis.set_ylabel("running")
        axis.set_title(label, fontsize=10, loc="left")
    axes[-1, 0].set_xlabel("seconds since the rolling restart began")
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=100)
    pyplot.close(figure)
    return path
