"""What a decided round reports besides its documents (pure): the status's facts and
problems, its Events, and the counter updates ``shell.metrics`` makes."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

from kooper.control import adaptive, events, failures, pacing, rails, restarts, status
from kooper.control.decision import Decision
from kooper.control.outputs import Connectors, Metrics
from kooper.core import delays, ids, model


def facts(d: Decision, failing: list[str]) -> status.GroupFacts:
    """What the status says of the round: its problems first."""
    group, plan, snap = d.inputs.group, d.planned.plan, d.planned.snap
    problems = d.problems
    if d.now.hold.held:
        problems = (*problems, ("ReassignmentHeld",
                                d.now.hold.message(group.max_departed_fraction)))
    if d.rejected:
        first = sorted(d.rejected.items())[0][1][1]
        problems = (*problems, ("ConnectorRejected", f"{len(d.rejected)} connector(s) "
                                f"rejected ({', '.join(sorted(d.rejected)[:5])}): {first}"))
    if failing:
        problems = (*problems, ("ResourcesFailed", f"{len(failing)} resource(s) failed: "
                                + ", ".join(failing[:5]) + (" ..." if len(failing) > 5 else "")))
    pending = tuple(m for m, mp in plan.members.items()
                    if snap.members[m].generation < mp.generation)
    return status.GroupFacts(
        snapshot=snap, plan=plan, now_ms=d.now_ms, pods_matched=len(d.seen.found.pods),
        problems=problems, pending=pending, paced=d.planned.paced.pending,
        max_moves=pacing.cap(group.balancing_limit,
                             len(snap.connectors) + sum(snap.connectors.values())))


def round_events(d: Decision, restarted: Sequence[str], done: restarts.Done
                  ) -> events.Recorder:
    """The round's Events: restarts acted on, then ``events.round_events``."""
    out = events.Recorder(d.recorder_entries)
    by_name = {c.name: c for c in d.inputs.connectors}
    for name in restarted:
        connector = by_name[name]
        count = 0 if connector.state == "stopped" else connector.tasks_max
        record = done[name]
        out.event("ConnectorRestarted",
                  f"kooper.dev/restart={record['observed']!r}: the instance and {count} "
                  f"task(s) restart in place with new epochs (generation "
                  f"{record['rebalanceGeneration']})", connector=name)
    events.round_events(out, previous=d.memory.persisted.state, plan=d.planned.plan,
                        snap=d.planned.snap)
    return out


def alive(d: Decision, out: events.Recorder, new_state: model.PlanState
           ) -> frozenset[str] | set[str]:
    """Every name still around, when some reported problem names a member (else none)."""
    if not any(entry[2] for entry in out.entries):
        return frozenset()
    return {*d.planned.plan.members, *new_state.assignments, *new_state.lost,
            *d.seen.found.pods, *(lease.member for lease in d.inputs.leases)}


def metrics(d: Decision, failed: frozenset[ids.WorkerId], out: events.Recorder, *,
             choice: adaptive.Choice, restarted: int, failing: int) -> Metrics:
    """The round's counter updates (``shell.metrics`` makes them)."""
    conf, plan, judged = d.inputs.group.settings, d.planned.plan, d.now.judged
    return Metrics(
        bad_input=(*d.bad_input, *out.bad_input),
        ignored_leases=sum(1 for i in d.seen.found.issues if i.reason == "LeaseIdentityMismatch"),
        grace_ms=delays.effective_grace_ms(conf.policy, conf.max_delay_ms, choice.grace_ms),
        connector_restarts=restarted, failed_resources=failing,
        balancing_deferred=d.planned.paced.deferred, balancing_pending=d.planned.paced.pending,
        rejected_resources=sum(1 + (0 if c.state == "stopped" else c.tasks_max)
                               for c in d.every if c.name in d.rejected),
        resource_restarts=(
            ("automatic", len(judged.due - _on(failed, plan, judged.due))),
            ("manual", len(judged.manual - _on(failed, plan, judged.manual)))))


def _on(members: frozenset[ids.WorkerId], plan: model.Plan, resources: frozenset[str]
        ) -> frozenset[str]:
    """The ``resources`` assigned to ``members`` (whose writes failed)."""
    if not members or not resources:
        return frozenset()
    found: set[str] = set()
    for member in members:
        held = plan.members.get(member)
        if held is not None:
            found.update(r for r in resources if r in held.assigned.connectors
                         or r in held.assigned.tasks)
    return frozenset(found)


def every_event(d: Decision, out: events.Recorder) -> tuple[events.Event, ...]:
    """Every Event of the round, in order: those found before planning, failures, the
    hold, pacing, the round's own (``out``), and connectors newly rejected."""
    group, memory = d.inputs.group, d.memory
    return (*d.early_events, *d.now.judged.events,
            *rails.hold_events(d.now.hold, memory.volatile.held, group.max_departed_fraction),
            *pacing.paced_event(d.planned.paced, group.balancing_limit), *out.events,
            *(events.Event("ConnectorRejected", why, warning=True, connector=name)
              for name, (_, why) in sorted(d.rejected.items())
              if name not in memory.volatile.rejected))


def connectors(d: Decision, *, done: restarts.Done, book: failures.Book,
               task_restarts: Mapping[str, str], restarted: Collection[str],
               settled: bool) -> Connectors:
    """The Connector statuses to refresh after the round (the shell trails them)."""
    return Connectors(plan=d.planned.plan, snapshot=d.planned.snap, connectors=d.every,
                      rejected={n: why for n, (_, why) in d.rejected.items()},
                      restarts=done, failures=book, task_restarts=task_restarts,
                      dirty=frozenset(restarted) | d.now.judged.changed | frozenset(
                          set(d.rejected).symmetric_difference(d.memory.volatile.rejected)),
                      settled=settled)
