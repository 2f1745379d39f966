"""The demo's plot: how many resources run at each moment, one panel per run.

Each panel says what it shows without the docs: a title, a legend for the
running count, the dashed "wanted" line (every configured resource) and the
shaded drill window, and a mark where each pod went down (the member left) and
where it was back (it joined again). Counts are integers, so is the y axis.
"""

from __future__ import annotations

import dataclasses
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


@dataclasses.dataclass(frozen=True, slots=True)
class Disruption:
    """A member leaving (``left``: its pod went down) or joining again, for the plot."""

    seconds: float
    """Since the drill window's start."""
    member: str
    left: bool


def disruptions(rows: Sequence[events.Event], *, start_ms: int, end_ms: int) -> list[Disruption]:
    """Leaves and re-joins of members inside ``[start_ms, end_ms]``, in time order.

    A join counts only for a member that left before it (a pod coming back), not a
    member's first join: that is the group forming, not a disruption.
    """
    seen_leave: set[str] = set()
    found: list[Disruption] = []
    for row in sorted(rows, key=lambda r: r.ts_ms):
        if not row.member or row.event not in (events.Kind.LEAVE, events.Kind.JOIN):
            continue
        left = row.event is events.Kind.LEAVE
        if left:
            seen_leave.add(row.member)
        elif row.member not in seen_leave:
            continue
        if start_ms <= row.ts_ms <= end_ms:
            found.append(Disruption((row.ts_ms - start_ms) / 1000, row.member, left))
    return found


def plot_runs(runs: Sequence[tuple[str, Sequence[events.Event], int, int]],
              path: pathlib.Path, *, total: int,
              title: str = "Resources running through a rolling restart") -> pathlib.Path:
    """Write a PNG: per run ``(label, rows, drill_start_ms, drill_end_ms)``, running over time.

    Time 0 is the start of the drill window (the rolling restart); the dashed line is
    the number of resources that should run.
    """
    import matplotlib

    matplotlib.use("Agg")  # no display: the demo runs in terminals and CI
    from matplotlib import lines, patches, pyplot, ticker

    figure, axes = pyplot.subplots(len(runs), 1, sharex=True, squeeze=False,
                                   figsize=(10, 1.6 + 2.4 * len(runs)))
    styles = ((True, "tab:red", "v", "pod down (member left)"),
              (False, "tab:green", "^", "pod back (member joined)"))
    for axis, (label, rows, start_ms, end_ms) in zip(axes[:, 0], runs, strict=True):
        # The demo's own shutdown after the window stops everything: not part of the drill.
        times, counts = running_series(rows, start_ms=start_ms, end_ms=end_ms)
        axis.axvspan(0, (end_ms - start_ms) / 1000, alpha=0.08, color="tab:orange")
        axis.axhline(total, linestyle="--", linewidth=0.8, color="grey")
        axis.step(times, counts, where="post", color="tab:blue")
        marks = disruptions(rows, start_ms=start_ms, end_ms=end_ms)
        for left, color, marker, _ in styles:
            at = [d.seconds for d in marks if d.left is left]
            axis.vlines(at, 0, total + 1, colors=color, linewidth=0.6, alpha=0.5)
            axis.plot(at, [total + 0.5] * len(at), linestyle="none", marker=marker,
                      color=color, markersize=5)
        axis.set_ylim(0, total + 1)
        axis.yaxis.set_major_locator(ticker.MaxNLocator(integer=True))
        axis.set_ylabel("running")
        down = sum(1 for d in marks if d.left)
        axis.set_title(f"{label}: {down} pod(s) went down in the window", fontsize=10,
                       loc="left")
    axes[-1, 0].set_xlabel("seconds since the rolling restart began")
    # One legend for every panel: the same five things are drawn in each.
    handles = [
        patches.Patch(color="tab:orange", alpha=0.15, label="drill window (measured)"),
        lines.Line2D([], [], linestyle="--", linewidth=0.8, color="grey",
                     label=f"wanted: all {total} resources"),
        lines.Line2D([], [], color="tab:blue", label="resources running"),
        *(lines.Line2D([], [], linestyle="none", marker=marker, color=color, label=text)
          for _, color, marker, text in styles),
    ]
    figure.suptitle(title, fontsize=12)
    figure.legend(handles=handles, loc="upper center", ncols=len(handles), fontsize=8,
                  frameon=False, bbox_to_anchor=(0.5, 1 - 0.45 / figure.get_figheight()))
    figure.tight_layout(rect=(0, 0, 1, 1 - 0.6 / figure.get_figheight()))
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=100)
    pyplot.close(figure)
    return path
