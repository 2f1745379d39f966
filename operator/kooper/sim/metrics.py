"""Per-run drill metrics over event rows, in pure Python.

The definitions are those of ``kooper.analytics.transforms`` (PySpark) and
``docs/events.md``; the two implementations must agree on every log:

* Events that share a timestamp are ordered stop, leave, round, join, start,
  pause, resume.
* ``pause``/``resume`` rows change nothing above but ``events`` and the run's
  first and last row: a paused resource stays assigned to its member, so it
  still runs. They give ``paused_ms`` alone: a ``pause`` of a resource on a
  member, inside one of that member's intervals of it, holds it paused until the
  next ``pause``/``resume``/``start``/``stop`` of it there or the interval's end;
  ``paused_ms`` sums these stretches (task-milliseconds).
* An *interval* is a ``start`` of a resource on a member up to the next
  ``start``/``stop`` of it there, if that comes before the member's next
  ``join``; otherwise up to the member's next ``leave`` or ``join``; otherwise
  the run's last event. Empty intervals are dropped.
* A resource's *pause* is the time between its first interval and the run's
  last event during which it runs on no member. ``total_pause_ms`` sums over
  resources, ``max_pause_ms`` is the longest single pause.
* A member is *disturbed* if it has a ``leave``, or a ``join`` after the run's
  first ``start``. A resource is *undisturbed* if no member that ran it was
  disturbed; ``undisturbed_pause_ms`` sums their pauses.
* A *move* is a ``start`` on a member other than the one that last started it.
* An *overlap* is an interval that began while another member still ran the
  resource (counted per interval); one the end of the run cut still runs there, so
  a start on the run's last row overlaps it.
* ``rounds`` counts ``round`` events; ``converge_ms`` runs from the first
  disruption (first ``leave``, else first ``stop``) to the last ``start``
  (0 if that comes first, ``None`` without a disruption).
* ``running_at_end``: resources still running on some member at the run's end
  (intervals cut by the end of the log, the empty ones begun there too).

A *window* (``start_ms``/``end_ms``, e.g. a drill between its first disruption
and its convergence) measures one part of a run with the same definitions:
rows after ``end_ms`` are dropped and ``end_ms`` is the run's end, so the
intervals and who ran what come from the whole log up to there; then only what
happens in ``[start_ms, end_ms]`` counts: the pause time inside it, the starts
(moves), the intervals that begin (overlaps), the rounds and the ``leave``/
``join`` rows that disturb a member. ``converge_ms`` runs from ``start_ms`` (the
caller opens the window when it disrupts the group, e.g. the first pod's
SIGTERM) to the window's last ``start``, if the window holds a disruption.
Without a window the whole log is measured, as in ``docs/events.md`` and
``kooper analyze``.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Iterable, Sequence

from kooper.core import events as ev
from kooper.core import ownership

_ORDER = ev.SAME_INSTANT_ORDER


@dataclasses.dataclass(frozen=True, slots=True)
class RunMetrics:
    """The metrics of one run (see the module docstring for definitions)."""

    run: str
    protocol: str
    policy: str
    events: int
    resources: int
    total_pause_ms: int
    max_pause_ms: int
    undisturbed_resources: int
    undisturbed_pause_ms: int
    moves: int
    overlaps: int
    rounds: int
    converge_ms: int | None
    running_at_end: int = 0
    paused_ms: int = 0


Key = tuple[str, str]  # (group, resource) or (group, member)


def _sorted(events: Iterable[ev.Event]) -> list[ev.Event]:
    return sorted(events, key=lambda e: (e.ts_ms, _ORDER[e.event]))


def intervals(events: Sequence[ev.Event], *, end_ms: int | None = None
              ) -> list[tuple[Key, str, int, int]]:
    """``(resource key, member, start_ms, end_ms)`` spans of one run, empty ones dropped.

    ``end_ms`` ends the run there (later rows are ignored); by default the run
    ends at its last row.
    """
    return [span[:4] for span in _spans(_cut(_sorted(events), end_ms), end_ms)]


Span = tuple[Key, str, int, int, bool]
"""An interval plus whether the end of the run cut it (it was still running then)."""


def _cut(ordered: list[ev.Event], end_ms: int | None) -> list[ev.Event]:
    return ordered if end_ms is None else [e for e in ordered if e.ts_ms <= end_ms]


def _spans(ordered: Sequence[ev.Event], end_ms: int | None, *,
           cut_empty: bool = False) -> list[Span]:
    """Every interval, empty ones dropped; with ``cut_empty``, those begun at the run's end
    are kept (empty, and cut): the member still runs the resource there."""
    if not ordered and end_ms is None:
        return []
    run_end = ordered[-1].ts_ms if end_ms is None else end_ms
    spans: list[Span] = []
    # Open spans: (group, member, resource) -> [start_ms, first leave since then or -1].
    open_: dict[tuple[str, str, str], list[int]] = {}
    by_member: dict[Key, set[str]] = defaultdict(set)

    def close(place: tuple[str, str, str], end: int, *, cut: bool = False) -> None:
        start, _ = open_.pop(place)
        end = min(end, run_end)
        if end > start or (cut and cut_empty):
            spans.append(((place[0], place[2]), place[1], start, end, cut))

    for e in ordered:
        member_key = (e.group, e.member)
        if e.event in (ev.Kind.START, ev.Kind.STOP):
            if not e.resource:
                continue
            place = (e.group, e.member, e.resource)
            if place in open_:
                close(place, e.ts_ms)  # even after a leave: a zombie ran it until then
                by_member[member_key].discard(e.resource)
            if e.event is ev.Kind.START:
                open_[place] = [e.ts_ms, -1]
                by_member[member_key].add(e.resource)
        elif e.event is ev.Kind.LEAVE and e.member:
            for resource in by_member[member_key]:
                span = open_[(e.group, e.member, resource)]
                if span[1] < 0:
                    span[1] = e.ts_ms
        elif e.event is ev.Kind.JOIN and e.member:
            for resource in by_member.pop(member_key, set()):
                place = (e.group, e.member, resource)
                leave = open_[place][1]
                close(place, e.ts_ms if leave < 0 else leave)
    for place, (_, leave) in list(open_.items()):
        close(place, run_end if leave < 0 else leave, cut=leave < 0)
    return spans


def _pauses(spans: Sequence[Span], run_end: int) -> dict[Key, list[tuple[int, int]]]:
    """Per resource, each ``(from, to)`` stretch during which it ran nowhere."""
    deltas: dict[Key, dict[int, int]] = defaultdict(lambda: defaultdict(int))
    for key, _, start, end, _ in spans:
        deltas[key][start] += 1
        deltas[key][end] -= 1
    result: dict[Key, list[tuple[int, int]]] = {}
    for key, changes in deltas.items():
        pauses: list[tuple[int, int]] = []
        running = 0
        times = sorted(changes)
        for index, ts in enumerate(times):
            running += changes[ts]
            following = times[index + 1] if index + 1 < len(times) else run_end
            if running == 0 and following > ts:
                pauses.append((ts, following))
        result[key] = pauses
    return result


def _paused(ordered: Sequence[ev.Event], spans: Sequence[Span]) -> list[tuple[int, int]]:
    """Each ``(from, to)`` stretch in which a member held a resource it ran paused."""
    flips = (ev.Kind.START, ev.Kind.STOP, ev.Kind.PAUSE, ev.Kind.RESUME)
    per_place: dict[tuple[str, str, str], list[ev.Event]] = defaultdict(list)
    for e in ordered:
        if e.event in flips and e.resource:
            per_place[(e.group, e.member, e.resource)].append(e)
    by_place: dict[tuple[str, str, str], list[tuple[int, int]]] = defaultdict(list)
    for (group, resource), member, start, end, _ in spans:
        by_place[(group, member, resource)].append((start, end))
    stretches: list[tuple[int, int]] = []
    for place, rows in per_place.items():
        for index, e in enumerate(rows):
            if e.event is not ev.Kind.PAUSE:
                continue
            # Spans of one place never overlap; [start, end) matches the same-instant
            # order (a pause comes after the start it follows, after a stop that ends it).
            span_end = next(
                (end for start, end in by_place.get(place, ()) if start <= e.ts_ms < end), None
            )
            if span_end is None:
                continue
            following = rows[index + 1].ts_ms if index + 1 < len(rows) else span_end
            stretches.append((e.ts_ms, min(following, span_end)))
    return stretches


def _overlaps(spans: Sequence[Span], *, since_ms: int) -> int:
    """Intervals that began (at or after ``since_ms``) while an earlier one still ran
    (``core.ownership``; spans of one place never overlap, so another member's).

    An interval the run's end cut still runs at that end (one past it, here): one begun
    there, empty as it is, overlaps it.
    """
    intervals = [(key, member, start, end + 1 if cut else end)
                 for key, member, start, end, cut
                 in sorted(spans, key=lambda s: (s[0], s[2], s[1]))]
    later = {j for _, j in ownership.overlaps(intervals)}
    return sum(1 for j in later if intervals[j][2] >= since_ms)


def running(events: Sequence[ev.Event], *, at_ms: int | None = None) -> dict[Key, set[str]]:
    """``(group, resource) -> members`` running it at ``at_ms`` (default: the log's end).

    Same interval rules as the metrics: a member runs what it started until it
    stops it, leaves or joins again; one started at ``at_ms`` runs it there.
    """
    return _still_running(_spans(_cut(_sorted(events), at_ms), at_ms, cut_empty=True))


def run_metrics(events: Sequence[ev.Event], *, start_ms: int | None = None,
                end_ms: int | None = None) -> RunMetrics:
    """The metrics of one run's events (all rows should share ``run``).

    ``start_ms``/``end_ms`` measure a window of the run only (module docstring);
    either may be left out.
    """
    ordered = _cut(_sorted(events), end_ms)
    if not ordered:
        return RunMetrics("", "", "", 0, 0, 0, 0, 0, 0, 0, 0, 0, None)
    run_end = ordered[-1].ts_ms if end_ms is None else end_ms
    since = ordered[0].ts_ms if start_ms is None else start_ms
    at_end = _spans(ordered, end_ms, cut_empty=True)
    spans = [span for span in at_end if span[3] > span[2]]
    # Each stretch without a runner, clipped to the window.
    pauses = {
        key: [b - max(a, since) for a, b in stretches if b > max(a, since)]
        for key, stretches in _pauses(spans, run_end).items()
    }
    starts = [e for e in ordered if e.event is ev.Kind.START and e.resource]
    first_start = starts[0].ts_ms if starts else None
    windowed = [e for e in ordered if e.ts_ms >= since]
    disturbed = {
        (e.group, e.member)
        for e in windowed
        if e.member
        and (
            e.event is ev.Kind.LEAVE
            or (e.event is ev.Kind.JOIN and first_start is not None and e.ts_ms > first_start)
        )
    }
    calm: dict[Key, bool] = {}
    for key, member, _, end, _ in spans:
        # A member disturbed in the window disturbs what it still ran in the window.
        calm[key] = calm.get(key, True) and not (end > since and (key[0], member) in disturbed)
    moves = 0
    last_started: dict[Key, str] = {}
    for e in sorted(starts, key=lambda e: (e.ts_ms, e.member)):
        key = (e.group, e.resource)
        if last_started.get(key, e.member) != e.member and e.ts_ms >= since:
            moves += 1
        last_started[key] = e.member
    window_starts = [e for e in starts if e.ts_ms >= since]
    leaves = [e.ts_ms for e in windowed if e.event is ev.Kind.LEAVE]
    stops = [e.ts_ms for e in windowed if e.event is ev.Kind.STOP]
    disrupted = leaves[0] if leaves else (stops[0] if stops else None)
    if start_ms is not None and disrupted is not None:
        disrupted = start_ms  # a window opens when its caller disrupted the group
    converge = None
    if disrupted is not None:
        converge = max(0, window_starts[-1].ts_ms - disrupted) if window_starts else 0
    return RunMetrics(
        run=ordered[0].run,
        protocol=_first(ordered, "protocol"),
        policy=_first(ordered, "policy"),
        events=len(windowed),
        resources=len(pauses),
        total_pause_ms=sum(sum(p) for p in pauses.values()),
        max_pause_ms=max((max(p) for p in pauses.values() if p), default=0),
        undisturbed_resources=sum(1 for key in pauses if calm.get(key, True)),
        undisturbed_pause_ms=sum(sum(p) for key, p in pauses.items() if calm.get(key, True)),
        moves=moves,
        overlaps=_overlaps(at_end, since_ms=since),
        rounds=sum(1 for e in windowed if e.event is ev.Kind.ROUND),
        converge_ms=converge,
        running_at_end=len(_still_running(at_end)),
        paused_ms=sum(b - max(a, since) for a, b in _paused(ordered, spans) if b > max(a, since)),
    )


def _first(ordered: Sequence[ev.Event], column: str) -> str:
    """The run's first non-empty ``protocol``/``policy`` (by time, same-instant order, then
    the least: a run that names several reports one whatever the rows' order in the file)."""
    values = ((e.ts_ms, _ORDER[e.event], getattr(e, column)) for e in ordered)
    return min((value for value in values if value[2]), default=(0, 0, ""))[2]


def _still_running(spans: Sequence[Span]) -> dict[Key, set[str]]:
    """Members per resource whose interval the end of the run cut (still running)."""
    result: dict[Key, set[str]] = defaultdict(set)
    for key, member, _, _, cut in spans:
        if cut:
            result[key].add(member)
    return dict(result)


def by_run(events: Iterable[ev.Event]) -> list[RunMetrics]:
    """Metrics of every run in ``events``, sorted by protocol, policy and run."""
    runs: dict[str, list[ev.Event]] = defaultdict(list)
    for e in events:
        runs[e.run].append(e)
    result = [run_metrics(rows) for rows in runs.values()]
    return sorted(result, key=lambda m: (m.protocol, m.policy, m.run))


TABLE_COLUMNS = (
    "run", "protocol", "policy", "total_pause_ms", "max_pause_ms", "undisturbed_pause_ms",
    "moves", "overlaps", "rounds", "converge_ms",
)


def table(rows: Sequence[RunMetrics]) -> str:
    """A plain-text table of metrics, one line per run."""
    cells = [list(TABLE_COLUMNS)]
    for row in rows:
        values = dataclasses.asdict(row)
        cells.append(["-" if values[c] is None else str(values[c]) for c in TABLE_COLUMNS])
    widths = [max(len(line[i]) for line in cells) for i in range(len(TABLE_COLUMNS))]
    return "\n".join(
        "  ".join(cell.rjust(width) for cell, width in zip(line, widths, strict=True))
        for line in cells
    )
