"""Drill invariants, computed from event rows alone (``kooper.core.events``).

Every check takes the rows of one drill and returns the violations it found (empty
when the invariant holds), so a test can print them. They only read rows, which is
what lets them be unit-tested with small hand-made logs and reused on logs from the
simulator, the embedded cluster or kind.

Definitions, in the words of ``docs/events.md`` ("Interval"): a member *runs* a
resource from its ``start`` to its next ``start`` or ``stop`` of it, unless the member
joins again first; then to its ``leave`` (when no ``stop`` was seen) or its next ``join``
(a restarted member runs nothing it did not start again). A member that left but stops
the resource later (a zombie) runs it until that ``stop``. Resources and members are named
within their ``run`` and ``group``. Rows with the same timestamp are applied in
``events.SAME_INSTANT_ORDER`` (stops first), so a move seen within one poll (stop here,
start there) is not an overlap.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import cast

from kooper.core import events, ownership

Kind = events.Kind
_ORDER = events.SAME_INSTANT_ORDER


def ordered(rows: Iterable[events.Event]) -> list[events.Event]:
    """Rows by time; within a timestamp, in ``events.SAME_INSTANT_ORDER``."""
    return sorted(rows, key=lambda e: (e.ts_ms, _ORDER[e.event]))


@dataclasses.dataclass(frozen=True, slots=True)
class Overlap:
    """``resource`` was running on every one of ``members`` at ``ts_ms``."""

    ts_ms: int
    resource: str
    members: tuple[str, ...]


def running_at_end(rows: Iterable[events.Event]) -> dict[str, set[str]]:
    """resource -> the members that run it after the last row."""
    running: dict[str, set[str]] = {}
    for held in holdings(rows):
        if held.end_ms == _OPEN:
            running.setdefault(_name(held), set()).add(held.holder)
    return running


def overlaps(rows: Iterable[events.Event]) -> list[Overlap]:
    """Every moment a resource starts while another member still runs it."""
    held = holdings(rows)
    found: dict[int, set[str]] = {}
    for i, j in ownership.overlaps(held):
        found.setdefault(j, set()).add(held[i].holder)
    return [Overlap(held[j].start_ms, _name(held[j]),
                    tuple(sorted({*others, held[j].holder})))
            for j, others in sorted(found.items())]


_OPEN = ownership.OPEN


def _name(held: ownership.Interval) -> str:
    """The resource of a ``holdings`` interval, without its run and group."""
    _, _, resource = cast(tuple[str, str, str], held.resource)
    return resource


def holdings(rows: Iterable[events.Event]) -> list[ownership.Interval]:
    """Who runs what when, in the order they started (see the module docstring): each
    interval's resource is ``(run, group, resource)``; one nothing ended yet ends at
    ``_OPEN``."""
    out: list[ownership.Interval] = []
    # (run, group, resource, member) -> the index of its open interval in ``out``
    running: dict[tuple[str, str, str, str], int] = {}
    left: dict[tuple[str, str, str, str], int] = {}
    """Open intervals whose member left since they started -> that first ``leave``."""

    def end(place: tuple[str, str, str, str], ts_ms: int) -> None:
        index = running.pop(place, None)
        if index is not None:
            out[index] = out[index]._replace(end_ms=left.pop(place, ts_ms))

    for row in ordered(rows):
        place = (row.run, row.group, row.resource, row.member)
        if row.event in (Kind.START, Kind.STOP):
            left.pop(place, None)  # even after a leave: a zombie ran it until now
            end(place, row.ts_ms)
        if row.event is Kind.START:
            running[place] = len(out)
            out.append(ownership.Interval((row.run, row.group, row.resource), row.member,
                                          row.ts_ms, _OPEN))
        elif row.event in (Kind.LEAVE, Kind.JOIN):
            mine = [p for p in running if p[:2] == place[:2] and p[3] == row.member]
            for held in mine:
                if row.event is Kind.LEAVE:
                    left.setdefault(held, row.ts_ms)
                else:
                    end(held, row.ts_ms)
    for place in [p for p in running if p in left]:
        end(place, left[place])
    return out


def not_running(rows: Iterable[events.Event], expected: Iterable[str]) -> list[str]:
    """Expected resources that no member runs (exactly once) at the end."""
    end = running_at_end(rows)
    return sorted(r for r in expected if len(end.get(r, ())) != 1)


_TASK = re.compile(r"^.+-[0-9]+$")


def is_task(resource: str) -> bool:
    """A task id is ``<connector>-<number>``; anything else is a connector instance."""
    return bool(_TASK.match(resource))


def imbalance(rows: Iterable[events.Event], *, members: Iterable[str] = ()) -> int:
    """Max minus min number of tasks (``<connector>-<n>``) per member at the end.

    Members that joined and did not leave count even when they run nothing, and so
    do ``members`` (members the log may not show joining).
    """
    rows = ordered(rows)
    present: set[str] = set(members)
    for row in rows:
        if row.event is Kind.JOIN:
            present.add(row.member)
        elif row.event is Kind.LEAVE:
            present.discard(row.member)
    load = dict.fromkeys(present, 0)
    for resource, runners in running_at_end(rows).items():
        if is_task(resource):
            for member in runners:
                load[member] = load.get(member, 0) + 1
    return max(load.values()) - min(load.values()) if load else 0


def _windows(rows: Sequence[events.Event], settle_ms: int) -> dict[str, list[tuple[int, int]]]:
    """Per member, its disturbed intervals: a ``leave`` to ``settle_ms`` after the next ``join``."""
    out: dict[str, list[tuple[int, int]]] = {}
    open_since: dict[str, int] = {}
    for row in rows:
        if row.event is Kind.LEAVE and row.member not in open_since:
            open_since[row.member] = row.ts_ms
        elif row.event is Kind.JOIN and row.member in open_since:
            out.setdefault(row.member, []).append(
                (open_since.pop(row.member), row.ts_ms + settle_ms)
            )
    for member, since in open_since.items():
        out.setdefault(member, []).append((since, _OPEN))
    return out


def stops_on_undisturbed_members(
    rows: Iterable[events.Event], *, settle_ms: int = 0, lead_ms: int = 0
) -> list[events.Event]:
    """``stop`` rows on a member that was not being disturbed at the time.

    Under a cooperative protocol a member that is not restarting, dying or leaving
    keeps what it runs when others come and go (membership returning to the same set,
    or shrinking). ``lead_ms`` accepts stops just before the member's ``leave`` is seen
    (a graceful shutdown reports its stops before the pod is observed terminating).
    """
    rows = ordered(rows)
    windows = _windows(rows, settle_ms)
    bad = []
    for row in rows:
        if row.event is not Kind.STOP:
            continue
        spans = windows.get(row.member, [])
        if not any(start - lead_ms <= row.ts_ms <= end for start, end in spans):
            bad.append(row)
    return bad


def needless_stops(
    rows: Iterable[events.Event], *, settle_ms: int = 0, lead_ms: int = 0
) -> list[events.Event]:
    """Stops on undisturbed members that moved nothing.

    A cooperative rebalance stops a resource on a member that is not restarting only to
    start it on another one (a planned handoff is followed by balancing: the member that
    came back last takes its share). A stop whose resource next starts on the same
    member, or never again, moved nothing: that is what an eager rebalance does to
    every resource in every round.
    """
    rows = ordered(rows)
    needless = []
    for stop in stops_on_undisturbed_members(rows, settle_ms=settle_ms, lead_ms=lead_ms):
        after = (r for r in rows if r.ts_ms >= stop.ts_ms and r is not stop)
        following = next(
            (r for r in after if r.event is Kind.START and r.resource == stop.resource), None
        )
        if following is None or following.member == stop.member:
            needless.append(stop)
    return needless


class VacuousCheck(AssertionError):
    """The log lacks what an invariant is about, so a pass would prove nothing.

    An AssertionError, so a drill whose recording missed the event it provoked fails
    with this message instead of passing.
    """


def early_reassignments(
    rows: Iterable[events.Event],
    *,
    departed: str,
    delay_ms: int,
    tolerance_ms: int = 0,
    same_member_ok: bool = True,
) -> list[events.Event]:
    """Starts of ``departed``'s lost resources that came before the delay ran out.

    The resources ``departed`` ran at its first ``leave`` are lost; none of them may
    start on another member before ``leave + delay_ms - tolerance_ms``. With
    ``same_member_ok`` (the kooper policy's returning identity) the departed member
    itself may take them back at once.

    Raises ``VacuousCheck`` when the log cannot show the delay: ``departed`` never
    left, ran nothing when it left, or none of its lost work started again afterwards
    (a recording that ended too early, or that never saw the departure).
    """
    rows = ordered(rows)
    leave = next((r for r in rows if r.event is Kind.LEAVE and r.member == departed), None)
    if leave is None:
        raise VacuousCheck(f"{departed} never left in the log: no delay to check")
    lost = {
        r
        for r, m in running_at_end(x for x in rows if x.ts_ms < leave.ts_ms).items()
        if departed in m
    }
    stopped_by_departed = {
        r.resource
        for r in rows
        if r.event is Kind.STOP and r.member == departed and r.ts_ms >= leave.ts_ms
    }
    lost |= stopped_by_departed
    if not lost:
        raise VacuousCheck(f"{departed} ran nothing when it left: no lost work to check")
    restarts = [
        r for r in rows if r.event is Kind.START and r.resource in lost and r.ts_ms >= leave.ts_ms
    ]
    if not restarts:
        raise VacuousCheck(f"none of {departed}'s {len(lost)} lost resources started again")
    deadline = leave.ts_ms + delay_ms - tolerance_ms
    return [
        r
        for r in restarts
        if r.ts_ms < deadline and not (same_member_ok and r.member == departed)
    ]


def summary(rows: Iterable[events.Event]) -> Mapping[str, int]:
    """A few counts for a drill's one-line report."""
    rows = list(rows)
    return {
        "rows": len(rows),
        "rounds": sum(r.event is Kind.ROUND for r in rows),
        "starts": sum(r.event is Kind.START for r in rows),
        "stops": sum(r.event is Kind.STOP for r in rows),
        "overlaps": len(overlaps(rows)),
    }
