"""What a decided round learns once its writes are made (pure): the failure records
and manual task restarts after them (``control.failures``), and the returns and
handoffs ``control.adaptive`` learns its grace from."""

from __future__ import annotations

from collections.abc import Mapping

from kooper.control import adaptive, departures, failures
from kooper.control.decision import Decision
from kooper.core import ids


def book(d: Decision, failed: frozenset[ids.WorkerId], *, retry_ms: int
         ) -> tuple[failures.Book, dict[str, str]]:
    """The failure records and task-restart values after this round's writes."""
    judged, plan = d.now.judged, d.planned.plan
    book = failures.written(judged.book, {*judged.due, *judged.manual,
                                          *(r for _, rs in d.now.restarts.items() for r in rs[1])},
                            generation=plan.state.generation, failed_members=failed,
                            now_ms=d.now_ms, retry_ms=retry_ms)
    task_restarts = dict(judged.task_restarts)
    if failed and judged.manual:
        # A manual task restart whose member was not written is asked again next round.
        for member in failed:
            held = plan.members.get(member)
            for resource in judged.manual:
                if held is not None and resource in held.assigned.tasks:
                    owner = ids.task_connector(resource)
                    old = (d.memory.persisted.task_restarts or {}).get(owner)
                    if old is None:
                        task_restarts.pop(owner, None)
                    else:
                        task_restarts[owner] = old
    return book, task_restarts


def learn(d: Decision, failed: frozenset[ids.WorkerId]
           ) -> tuple[adaptive.Learned, Mapping[ids.WorkerId, tuple[int, int, str]]]:
    """What this round observed of returns and handoffs (``control.adaptive``)."""
    memory, snap, plan, now = d.memory, d.planned.snap, d.planned.plan, d.now_ms
    max_delay = d.inputs.group.settings.max_delay_ms
    learned = adaptive.returned(memory.persisted.learned, snap.members, now_ms=now,
                                max_delay_ms=max_delay)
    gone = memory.persisted.state.assignments.keys() - snap.members.keys()
    if gone:
        # Known-permanent departures (a scale-down) never return: they teach nothing.
        left = departures.said_left(d.seen.left, memory)
        learned = adaptive.departed(learned, sorted(
            m for m in gone if not d.seen.permanent.get(m)
            or departures.planned(m, d.seen.found.pods.get(m), d.seen.seen, left)), now_ms=now)
    handing: dict[ids.WorkerId, tuple[int, int, str]] = {}
    samples: list[int] = []
    for member, (generation, at, incarnation) in memory.volatile.handing.items():
        report = snap.members.get(member)
        if report is None or report.incarnation != incarnation:
            continue  # departed (or restarted) before it applied: no sample
        if report.generation >= generation:
            samples.append(now - at)
        else:
            handing[member] = (generation, at, incarnation)
    learned = adaptive.handed_off(learned, samples)
    for member in plan.newly_assigned:
        if member not in failed and member not in handing:
            handing[member] = (plan.members[member].generation, now,
                               snap.members[member].incarnation)
    return learned, handing
