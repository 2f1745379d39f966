"""Failed connector instances and tasks: ``Failed`` in status, restarts with backoff (pure).

A member reports a resource it holds but cannot run (its start raised, or it died
by itself) in ``Report.failed`` / ``Report.failure_counts``. ``judge`` keeps one
``Record`` per failed resource and decides, each round, which to restart in place
(a new epoch on the same member, the way ``kooper.dev/restart`` does it):

* A new failure (first seen, or seen again after a restart was applied) schedules
  an automatic restart ``backoff_ms(restarts)`` later: ``initialBackoffSeconds``
  doubled per restart already made, capped at ``defaults.AUTO_RESTART_MAX_BACKOFF_S``
  (Strimzi's ``autoRestart``). After ``maxRestarts`` automatic restarts, or with
  ``autoRestart.enabled: false``, the resource stays Failed until someone restarts
  it (``kooper.dev/restart`` for the connector, ``kooper.dev/restart-task`` for tasks)
  or changes its config.
* A failure is "seen again" when the member reports it from a generation at or
  after the one that carried the restart, or with a greater ``failure_counts``.
* A record whose resource runs again keeps its restart count (so a crash loop
  still ends), and is dropped once the resource ran ``RESET_AFTER_MS`` without
  failing, when it moves to another member, or when its connector is deleted.

What a restarted operator needs is in ``Connector.status`` (each Failed task's
``error``, ``restarts`` and ``nextRestart``; the instance's in ``status.instance``):
``restore`` reads it back (an earlier kooper's ``FAILED`` as well). A restart that was
written just before the operator stopped is not known to the new one, so it may make one
more attempt (counted).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from kooper.control import events, status, views
from kooper.core import defaults, ids, model
from kooper.protocol import messages

RESTART_TASK_ANNOTATION = views.RESTART_TASK_ANNOTATION
RESET_AFTER_MS = 600_000
"""A resource that ran this long since its last failure starts again with a clean count."""


@dataclasses.dataclass(frozen=True, slots=True)
class Record:
    """One failed (or recently failed) resource."""

    connector: str
    member: str
    """The member it failed on; a record is about that placement only."""
    error: str
    restarts: int = 0
    """Automatic restarts made since the last manual one."""
    failures: int = 0
    """The member's ``failure_counts`` for it when last judged (0: unknown)."""
    next_at_ms: int | None = None
    """When the next automatic restart is due (None: none planned)."""
    restart_generation: int = 0
    """The generation that carried the last restart (0: none outstanding)."""
    failing: bool = True
    """False once the member reports it running again."""
    since_ms: int = 0
    """When it was last seen failing (or, once running, when it started running)."""


Book = Mapping[str, Record]
"""resource → its record."""


@dataclasses.dataclass(frozen=True, slots=True)
class Judgement:
    """What ``judge`` decided for one round."""

    book: dict[str, Record]
    due: frozenset[str]
    """Resources to restart in place this round (automatic restarts)."""
    manual: frozenset[str]
    """Resources a ``kooper.dev/restart-task`` value asks to restart this round."""
    task_restarts: dict[str, str]
    """connector → the ``kooper.dev/restart-task`` value acted on."""
    events: tuple[events.Event, ...]
    changed: frozenset[str]
    """Connectors whose records changed (their status needs a patch)."""
    wake_at_ms: int | None


def backoff_ms(connector: views.ConnectorView, restarts: int) -> int:
    """How long after a failure the next automatic restart waits."""
    cap = defaults.AUTO_RESTART_MAX_BACKOFF_S * 1000
    return min(cap, connector.initial_backoff_s * 1000 * (1 << min(restarts, 30)))


def requested_tasks(connector: views.ConnectorView, *, done: Mapping[str, str]) -> frozenset[str]:
    """The tasks a new ``kooper.dev/restart-task`` value names (``"0,3"`` or ``"0,3@again"``).

    A value is acted on once: to restart the same tasks again, change the part after
    ``@``. Numbers outside ``tasksMax`` are ignored.
    """
    value = connector.restart_task
    if not value:
        return frozenset()  # (most connectors, every round)
    handled = done.get(connector.name)
    if handled is None:
        record = connector.status.get("taskRestart")
        handled = str(record.get("observed", "")) if isinstance(record, Mapping) else ""
    if value == handled:
        return frozenset()
    tasks = 0 if connector.state == "stopped" else connector.tasks_max
    numbers = {int(n) for part in value.partition("@")[0].split(",")
               if (n := part.strip()).isdigit()}
    return frozenset(ids.task_id(connector.name, n) for n in numbers if n < tasks)


def judge(*, connectors: Sequence[views.ConnectorView],
          reports: Mapping[ids.WorkerId, messages.Report],
          held: Mapping[ids.WorkerId, model.ConnectorsAndTasks], book: Book,
          task_restarts: Mapping[str, str], restarting: Iterable[str] = (),
          now_ms: int) -> Judgement:
    """Update the records from the members' reports and pick the restarts due now.

    ``held`` is what each member was last given; ``restarting`` the resources a
    ``kooper.dev/restart`` of their connector restarts this round (their counts reset).
    """
    by_name = {c.name: c for c in connectors}
    out = events.Recorder(events.Reported())
    result: dict[str, Record] = {}
    due: set[str] = set()
    failed_now: dict[str, list[str]] = {}
    for resource, (member, error, count, generation) in sorted(
            _failing(reports, held).items()):
        name = resource if resource in by_name and resource in held[
            ids.WorkerId(member)].connectors else ids.task_connector(resource)
        spec = by_name.get(name)
        if spec is None:
            continue
        record, new = _record(book.get(resource), spec, resource, member=member, error=error,
                              count=count, generation=generation, now_ms=now_ms, out=out)
        if new:
            failed_now.setdefault(name, []).append(f"{resource}: {error}")
        if record.next_at_ms is not None and record.next_at_ms <= now_ms:
            due.add(resource)
            record = dataclasses.replace(record, restarts=record.restarts + 1,
                                         next_at_ms=None)
        result[resource] = record
    result.update(_kept(book, result, by_name, reports=reports, held=held, now_ms=now_ms))
    for name, lines in sorted(failed_now.items()):
        out.event("TaskFailed", f"{len(lines)} resource(s) of {name} failed: "
                  + "; ".join(lines[:5]) + (" ..." if len(lines) > 5 else ""),
                  warning=True, connector=name)
    manual, done, changed = _manual(connectors, task_restarts, by_name, out)
    for resource in {*manual, *restarting}:
        if resource in result:
            due.discard(resource)
            result[resource] = dataclasses.replace(result[resource], restarts=0,
                                                   next_at_ms=None)
    for resource in due:
        record = result[resource]
        out.event("TaskRestarted",
                  f"{resource} failed on {record.member}; automatic restart "
                  f"{record.restarts}/{by_name[record.connector].max_restarts}: "
                  f"{record.error}", connector=record.connector)
    changed.update(r.connector for k, r in result.items() if book.get(k) != r)
    changed.update(r.connector for k, r in book.items() if k not in result
                   and r.connector in by_name)
    wake = [r.next_at_ms for r in result.values() if r.next_at_ms is not None]
    return Judgement(book=result, due=frozenset(due), manual=frozenset(manual),
                     task_restarts=done, events=tuple(out.events), changed=frozenset(changed),
                     wake_at_ms=min(wake) if wake else None)


def _failing(reports: Mapping[ids.WorkerId, messages.Report],
             held: Mapping[ids.WorkerId, model.ConnectorsAndTasks]
             ) -> dict[str, tuple[ids.WorkerId, str, int, int]]:
    """resource → (member, error, failure count, report generation) of every failure a
    member reports on work it was given. Only members that report failures are looked
    at: a round of a healthy 100,000-task group costs nothing here."""
    failing: dict[str, tuple[ids.WorkerId, str, int, int]] = {}
    for member, report in reports.items():
        if not report.failed and not report.failure_counts:
            continue
        mine = held.get(member, model.EMPTY)
        for resource in {*report.failed, *report.failure_counts}:
            if resource in mine.connectors or resource in mine.tasks:
                failing[resource] = (member, report.failed.get(resource, "failed"),
                                     report.failure_counts.get(resource, 0), report.generation)
    return failing


def _record(old: Record | None, spec: views.ConnectorView, resource: str, *, member: str,
            error: str, count: int, generation: int, now_ms: int, out: events.Recorder
            ) -> tuple[Record, bool]:
    """A reported failure's record, and whether it is a new failure (not the one on
    record: another member, a failure after a restart, or a higher count)."""
    if old is not None and old.member != member:
        old = None
    if old is None:
        new = True
    elif old.restart_generation:
        new = generation >= old.restart_generation or count > old.failures
    else:
        new = not old.failing or bool(old.failures and count > old.failures)
    if not new:
        assert old is not None
        return dataclasses.replace(old, error=error, failures=max(count, old.failures)), False
    restarts = old.restarts if old is not None else 0
    allowed = spec.auto_restart and restarts < spec.max_restarts
    if not allowed and spec.auto_restart:
        out.event("RestartsExhausted",
                  f"{resource} failed on {member} after {restarts} automatic "
                  f"restart(s) (autoRestart.maxRestarts={spec.max_restarts}); it "
                  f"stays failed until it is restarted by hand: {error}",
                  warning=True, connector=spec.name)
    return Record(connector=spec.name, member=member, error=error, restarts=restarts,
                  failures=count, since_ms=now_ms,
                  next_at_ms=now_ms + backoff_ms(spec, restarts) if allowed else None), True


def _kept(book: Book, result: Mapping[str, Record], by_name: Mapping[str, views.ConnectorView],
          *, reports: Mapping[ids.WorkerId, messages.Report],
          held: Mapping[ids.WorkerId, model.ConnectorsAndTasks], now_ms: int
          ) -> dict[str, Record]:
    """The records of resources not failing in a report now: recovered (running again
    where they failed), kept a while after, or not reported either way yet."""
    kept: dict[str, Record] = {}
    for resource, old in book.items():
        if resource in result or old.connector not in by_name:
            continue
        member = ids.WorkerId(old.member)
        mine = held.get(member, model.EMPTY)
        if resource not in mine.connectors and resource not in mine.tasks:
            continue  # It moved (or is unassigned): the failure was about that placement.
        latest = reports.get(member)
        owned = latest.owned if latest is not None else model.EMPTY
        if resource in owned.connectors or resource in owned.tasks:
            if old.failing:
                kept[resource] = dataclasses.replace(old, failing=False, next_at_ms=None,
                                                     restart_generation=0, since_ms=now_ms)
            elif now_ms - old.since_ms < RESET_AFTER_MS:
                kept[resource] = old
        else:
            kept[resource] = old  # Not reported either way yet (a restart in flight).
    return kept


def _manual(connectors: Sequence[views.ConnectorView], task_restarts: Mapping[str, str],
            by_name: Mapping[str, views.ConnectorView], out: events.Recorder
            ) -> tuple[set[str], dict[str, str], set[str]]:
    """Manual restarts (the ``kooper.dev/restart-task`` annotation): the tasks to restart,
    the annotation values acted on, and the connectors whose value changed."""
    manual: set[str] = set()
    changed: set[str] = set()
    done = {name: value for name, value in task_restarts.items() if name in by_name}
    for connector in connectors:
        tasks = requested_tasks(connector, done=task_restarts)
        if connector.restart_task and done.get(connector.name) != connector.restart_task:
            done[connector.name] = connector.restart_task
            changed.add(connector.name)
        if tasks:
            manual.update(tasks)
            out.event("TaskRestartRequested",
                      f"{RESTART_TASK_ANNOTATION}={connector.restart_task!r}: "
                      f"{', '.join(sorted(tasks, key=model.resource_sort_key))} restart in "
                      "place with new epochs", connector=connector.name)
    return manual, done, changed


def written(book: Book, restarted: Iterable[str], *, generation: int,
            failed_members: Iterable[ids.WorkerId], now_ms: int, retry_ms: int
            ) -> dict[str, Record]:
    """The records once the round's writes are known: restarts carried by ``generation``,
    or (for members whose write failed) due again after ``retry_ms``."""
    failed = set(failed_members)
    result = dict(book)
    for resource in restarted:
        record = result.get(resource)
        if record is None:
            continue
        if record.member in failed:
            result[resource] = dataclasses.replace(record, next_at_ms=now_ms + retry_ms,
                                                   restarts=max(0, record.restarts - 1))
        else:
            result[resource] = dataclasses.replace(record, restart_generation=generation)
    return result


def restore(connectors: Sequence[views.ConnectorView]) -> dict[str, Record]:
    """The records a restarted operator reads back from the Connector statuses."""
    book: dict[str, Record] = {}
    for connector in connectors:
        entries: list[Mapping[str, Any]] = [
            t for t in connector.status.get("tasks") or () if isinstance(t, Mapping)]
        instance = connector.status.get("instance")
        if isinstance(instance, Mapping):
            entries.append({**instance, "id": connector.name})
        for entry in entries:
            restarts = entry.get("restarts")
            failing = status.task_state(entry.get("state")) == status.FAILED
            if not failing and not restarts:
                continue
            next_at = views.parse_time_ms(entry.get("nextRestart"))
            book[str(entry.get("id"))] = Record(
                connector=connector.name, member=str(entry.get("worker", "")),
                error=str(entry.get("error", "")),
                restarts=restarts if isinstance(restarts, int) else 0,
                next_at_ms=next_at, failing=failing)
    return book


def restored_task_restarts(connectors: Sequence[views.ConnectorView]) -> dict[str, str]:
    """connector → the ``kooper.dev/restart-task`` value its status says was acted on."""
    result: dict[str, str] = {}
    for connector in connectors:
        record = connector.status.get("taskRestart")
        if isinstance(record, Mapping) and record.get("observed"):
            result[connector.name] = str(record["observed"])
    return result


def entry(record: Record | None, *, worker: str | None) -> dict[str, Any]:
    """The status fields of a resource with a record (``{}`` without one)."""
    if record is None or worker != record.member:
        return {}
    fields: dict[str, Any] = {"restarts": record.restarts}
    if record.failing:
        fields.update(state=status.FAILED, error=record.error)
        if record.next_at_ms is not None:
            fields["nextRestart"] = views.format_time(record.next_at_ms)
    return fields
