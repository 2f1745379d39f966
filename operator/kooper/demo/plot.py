"""The demo's plot: how many resources run at each moment, one panel per run."""

from __future__ import annotations

import pathlib
from collections import defaultdict
from collections.abc import Sequence

from kooper.core import events
from kooper.sim import metrics


def running_series(rows: Sequence[events.Event], *, start_ms: int, end_ms: int | None = None
                   ) -> tuple[list[float], list[int]]:
    """Step series (seconds since ``start_ms``, resources running) of one run's log.

    "Running" is ``kooper.sim.metrics``' definition (its intervals: a member runs
    a resource from its start to its stop, leave or next join); the series
    changes at every interval boundary, up to ``end_ms`` (default: the last row).
    """
    if not rows:
        return [], []
    run_end = max(row.ts_ms for row in rows) if end_ms is None else end_ms
    changes: dict[int, dict[metrics.Key, int]] = defaultdict(lambda: defaultdict(int))
    changes[run_end] = defaultdict(int)  # a point at the end: the last step reaches it
    for key, _, begin, end in metrics.intervals(rows, end_ms=end_ms):
        changes[begin][key] += 1
        if end < run_end:  # what still runs at the end stays drawn
            changes[end][key] -= 1
    active: dict[metrics.Key, int] = defaultdict(int)
    times: list[float] = []
    counts: list[int] = []
    for ts in sorted(changes):
        for key, delta in changes[ts].items():
            active[key] += delta
        times.append((ts - start_ms) / 1000)
        counts.append(sum(1 for n in active.values() if n > 0))
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
        times, counts = running_series(rows, start_ms=start_ms, end_ms=end_ms)
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
