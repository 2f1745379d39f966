"""The real chaos run's invariants, from an event log the operator did not write.

Two sources, both independent of the operator:

* each worker *process* appends its own ``start``/``stop`` rows, stamped with its own
  clock, to its own file (``kooper worker --events-file``): one file per incarnation;
* the harness, which plays the kubelet, appends a ``ProcessRow`` whenever it signals a
  worker process (``sigkill``, ``sigstop``, ``sigcont``) and when ``waitpid`` says a
  process is gone (``exit``, whatever ended it).

A worker incarnation *runs* a resource from its ``start`` row to its ``stop`` row (or
its next ``start`` of it), or to the ``exit`` of its process when no ``stop`` came (a
SIGKILL, or the SDK ending the process on purpose). Nothing else ends a run: not the
operator declaring the member departed, not its Lease expiring, and not a SIGSTOP. A
frozen process still runs what it ran when it was frozen until it stops it or dies,
because when it is thawed its task threads carry on before anything else has a chance to
look at a clock. So the overlap check counts frozen members like any other; the freezes
are only used to say, in a violation's description, that one member was frozen at the
time.

Every function here is pure (rows in, findings out), so it is unit-tested with
hand-made logs in tests/chaos_real/test_chaos_log.py.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import pathlib
from collections.abc import Iterable, Mapping, Sequence

from kooper.core import events, ownership

K = events.Kind
STOPS = ("sigstop", "freeze")
CONTS = ("sigcont", "thaw")
OPEN = ownership.OPEN
"""The end of a run that has not ended (its process is alive and never stopped it)."""


@dataclasses.dataclass(frozen=True, slots=True)
class ProcessRow:
    """What the harness did to a worker process, or saw happen to it."""

    ts_ms: int
    incarnation: str
    pod: str
    what: str
    """``spawn``, ``sigkill``, ``sigstop``, ``sigcont`` or ``exit``; on kind, ``freeze`` and
    ``thaw`` when the process's node is paused and unpaused (a cgroup freeze: to the
    process, the same as SIGSTOP and SIGCONT)."""
    code: int | None = None
    """The exit status (``exit`` rows).

    An ``exit`` row is stamped once the process is seen gone, so it bounds the exit from
    above; an incarnation with several (``waitpid``, its runtime's ``finishedAt``, its
    pod's next container) ended by the earliest."""

    def to_json(self) -> str:
        """One JSON line."""
        return json.dumps(dataclasses.asdict(self), sort_keys=True)


def read_process_rows(path: pathlib.Path) -> list[ProcessRow]:
    """The harness's rows (an absent file has none)."""
    if not path.exists():
        return []
    return [ProcessRow(**json.loads(line)) for line in path.read_text().splitlines() if line]


@dataclasses.dataclass(frozen=True, slots=True)
class Run:
    """``incarnation`` (of ``pod``) ran ``resource`` from ``start_ms`` to ``end_ms``."""

    pod: str
    incarnation: str
    resource: str
    start_ms: int
    end_ms: int
    epoch: int
    ended_by: str
    """``stop``, ``exit``, ``open``, or ``start`` (the same process started it again
    without a stop row between: a new run begins there)."""


def runs(worker_rows: Mapping[str, Sequence[events.Event]],
         processes: Iterable[ProcessRow]) -> list[Run]:
    """Every run, from each incarnation's own rows and its process's ``exit``.

    ``worker_rows`` maps an incarnation to the rows its process wrote.
    """
    exits: dict[str, int] = {}
    for process in processes:  # every exit row is an upper bound: the earliest is the tightest
        if process.what == "exit":
            exits[process.incarnation] = min(exits.get(process.incarnation, OPEN),
                                             process.ts_ms)
    out: list[Run] = []
    for incarnation, rows in worker_rows.items():
        running: dict[str, events.Event] = {}
        # By time; within one millisecond, in the order the process wrote them (a start
        # and the stop written after it end the run; a stop and a start restart it).
        for row in sorted(rows, key=lambda r: r.ts_ms):
            if row.event in (K.START, K.STOP) and row.resource in running:
                start = running.pop(row.resource)
                out.append(Run(row.member, incarnation, row.resource, start.ts_ms, row.ts_ms,
                               start.epoch, str(row.event)))
            if row.event is K.START:
                running[row.resource] = row
        exit_ms = exits.get(incarnation)
        for resource, start in running.items():
            out.append(Run(start.member, incarnation, resource, start.ts_ms,
                           OPEN if exit_ms is None else max(exit_ms, start.ts_ms),
                           start.epoch, "open" if exit_ms is None else "exit"))
    return sorted(out, key=lambda r: (r.resource, r.start_ms, r.incarnation))


@dataclasses.dataclass(frozen=True, slots=True)
class Overlap:
    """``resource`` ran on two incarnations at once, from ``from_ms`` to ``to_ms``."""

    resource: str
    first: Run
    second: Run
    from_ms: int
    to_ms: int
    frozen: tuple[str, ...]
    """Incarnations of the two that were frozen at some point of the overlap."""

    def describe(self) -> str:
        """One line for a failure message."""
        frozen = f" (frozen: {', '.join(self.frozen)})" if self.frozen else ""
        return (f"{self.resource} on {self.first.incarnation} (epoch {self.first.epoch}) and "
                f"{self.second.incarnation} (epoch {self.second.epoch}) for "
                f"{self.to_ms - self.from_ms} ms from {self.from_ms}{frozen}")


def freezes(processes: Iterable[ProcessRow]) -> dict[str, list[tuple[int, int]]]:
    """incarnation -> its frozen spans (SIGSTOP to SIGCONT or exit; open when neither came)."""
    out: dict[str, list[tuple[int, int]]] = {}
    since: dict[str, int] = {}
    for row in sorted(processes, key=lambda p: p.ts_ms):
        if row.what in STOPS:
            since.setdefault(row.incarnation, row.ts_ms)
        elif row.what in (*CONTS, "exit") and row.incarnation in since:
            out.setdefault(row.incarnation, []).append((since.pop(row.incarnation), row.ts_ms))
    for incarnation, start in since.items():
        out.setdefault(incarnation, []).append((start, OPEN))
    return out


def overlaps(all_runs: Sequence[Run], processes: Iterable[ProcessRow] = ()) -> list[Overlap]:
    """Every pair of runs of one resource on two incarnations that share an instant.

    A run ending at the instant another starts is a hand-over, not an overlap. A run of
    less than a millisecond (a start and its stop, or its exit, stamped alike) still ran
    at its instant: inside another run, it is an overlap of no length. Frozen
    incarnations are not skipped (see the module docstring).
    """
    frozen = freezes(processes)
    pairs = ownership.overlaps([ownership.Interval(run.resource, run.incarnation, run.start_ms,
                                                   _reach(run)) for run in all_runs])
    found = []
    for i, j in sorted((min(pair), max(pair)) for pair in pairs):
        first, second = all_runs[i], all_runs[j]
        start, end = max(first.start_ms, second.start_ms), min(first.end_ms, second.end_ms)
        names = tuple(sorted(
            run.incarnation for run in (first, second)
            if any(a < end and start < b for a, b in frozen.get(run.incarnation, ()))))
        found.append(Overlap(first.resource, first, second, start, end, names))
    return sorted(found, key=lambda o: o.resource)  # stable: listed order within a resource


def _reach(run: Run) -> int:
    """Where ``run`` holds its resource to for the overlap check: its end, or one past its
    start for a run of less than a millisecond (not one its process restarted at once: the
    next run holds that instant)."""
    brief = run.end_ms == run.start_ms and run.ended_by != "start"
    return run.start_ms + 1 if brief else run.end_ms


def running_at(all_runs: Iterable[Run], ts_ms: int) -> dict[str, list[Run]]:
    """resource -> the runs that cover ``ts_ms`` (started at or before it, ended after it)."""
    out: dict[str, list[Run]] = {}
    for run in all_runs:
        if run.start_ms <= ts_ms < run.end_ms:
            out.setdefault(run.resource, []).append(run)
    return out


def lost(all_runs: Iterable[Run], expected: Iterable[str], *, at_ms: int = OPEN - 1) -> list[str]:
    """Expected resources that do not run exactly once at ``at_ms`` (default: at the end)."""
    now = running_at(all_runs, at_ms)
    return sorted(r for r in expected if len(now.get(r, ())) != 1)


def unexpected(all_runs: Iterable[Run], expected: Iterable[str], *,
               at_ms: int = OPEN - 1) -> list[str]:
    """Resources running at ``at_ms`` that nobody asked for."""
    return sorted(set(running_at(all_runs, at_ms)) - set(expected))


def epoch_regressions(all_runs: Sequence[Run]) -> list[tuple[Run, Run]]:
    """Consecutive starts of one resource whose per-task epoch went the wrong way.

    Every assignment of a task to a member carries an epoch that only grows, so a start
    on another incarnation at an epoch no higher than the start before it is a start
    under a stale assignment. The same incarnation may start a resource again at the
    same epoch (it fenced itself, stopping it as lost, and the operator, which never
    took it away, assigns it to the same member again), never at a lower one.
    """
    found = []
    by_resource: dict[str, list[Run]] = {}
    for run in all_runs:
        by_resource.setdefault(run.resource, []).append(run)
    for group in by_resource.values():
        ordered = sorted(group, key=lambda r: (r.start_ms, r.epoch))
        found.extend((a, b) for a, b in itertools.pairwise(ordered)
                     if b.epoch < a.epoch
                     or (b.epoch == a.epoch and b.incarnation != a.incarnation))
    return found


def settled_at(all_runs: Sequence[Run], expected: Iterable[str], *, after_ms: int,
               until_ms: int) -> int | None:
    """When the group last became whole between ``after_ms`` and ``until_ms``.

    Whole: every expected resource runs exactly once. The answer is the latest start
    (or ``after_ms``) of the runs that cover ``until_ms``; None when the group is not
    whole at ``until_ms``. A resource that never stopped counts from ``after_ms``.
    """
    wanted = list(expected)
    now = running_at(all_runs, until_ms)
    if any(len(now.get(r, ())) != 1 for r in wanted):
        return None
    return max([after_ms, *(now[r][0].start_ms for r in wanted)])


def while_frozen(overlap: Overlap, processes: Iterable[ProcessRow]) -> bool:
    """Whether ``overlap`` is a frozen member's work taken over, fenced by the epoch.

    That is: the run that started first belongs to an incarnation that was stopped
    (SIGSTOP) at the instant the other run started, and the other run's per-task epoch
    is higher, so anything the thawed process still does with the resource carries a
    stale epoch. No lease can prevent this overlap (a stopped process cannot fence
    itself); it is counted and reported, never skipped.
    """
    first, second = sorted((overlap.first, overlap.second), key=lambda r: r.start_ms)
    spans = freezes(processes).get(first.incarnation, ())
    return second.epoch > first.epoch and any(a <= second.start_ms < b for a, b in spans)


def thawed_at(incarnation: str, processes: Iterable[ProcessRow]) -> int | None:
    """When ``incarnation`` was last sent SIGCONT (None: never)."""
    times = [p.ts_ms for p in processes if p.incarnation == incarnation and p.what in CONTS]
    return max(times) if times else None


def generation_regressions(worker_rows: Mapping[str, Sequence[events.Event]]
                           ) -> list[tuple[events.Event, events.Event]]:
    """Consecutive rows of one incarnation (in the order it wrote them) whose assignment
    generation went down: a worker acts only on assignments newer than the last it
    accepted, so it never goes back to an older one."""
    return [(a, b) for rows in worker_rows.values() for a, b in itertools.pairwise(rows)
            if b.generation < a.generation]
