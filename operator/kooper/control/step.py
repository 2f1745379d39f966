"""One controller step: ``step(inputs, memory, *, now_ms) -> Step`` (sans-I/O, like h11).

The operator (``shell.rounds``), the simulator (``sim.runner``) and ``kooper replay``
(``control.replay``) gather ``Inputs`` their own way and call this; nothing else
decides a round. A round runs the stages of ``control.decision``'s table in order
(observe, situation, plan, documents, learn, report: each a pure function of its own
module). A ``Step`` says what to do; ``Step.writes`` is the order
(``control/outputs.py`` holds the write types):

0. ``epochs_first``: a status write before the rest, in two cases. In a round that
   declares a departure whose work waits (lost, for a delay): the round's own status,
   so the lost set and its deadline are persisted before the member's ConfigMap is
   deleted (a death in between would leave that work looking unowned to a restarted
   operator, which would hand it out at once). In the first round after a restart
   that read larger epochs from ConfigMaps than the status holds: the status, raising
   ``memberEpoch`` and ``epochFloor``, so no later write can leave an issued epoch in
   no document (``control.epochs.unpersisted``);
1. ``deletes``: departed members' ConfigMaps, first, so that nothing a departed
   member's document still names is given to anyone before that document is gone;
2. ``configmap_writes``: each member's new Assignment (in parallel, each with a
   ``resourceVersion`` precondition);
3. ``status``: the WorkerGroup status, persisted planner state included (rendered
   with ``GroupStatus.document`` against the status the writer last saw);
4. ``events``, ``metrics``, ``connectors`` (the Connector statuses to refresh).

If some ConfigMap writes fail, the caller asks ``step.failed(members)`` for the
revised Step: those members keep their previous assignment in the persisted state
(the barrier still counts them) and their restarts stay pending.

``Memory`` is frozen. What in it changes a decision is persisted or re-read: the
planner state is ``status.state`` plus the ConfigMaps (``restored``), pod owners are
persisted in ``status.state.owners``, restart records in ``Connector.status.restart``,
members seen terminating (``terminating``, what makes a departure planned) in
``status.state.terminating``, what the group learned of returns and handoffs
(``learned``, ``control.adaptive``) in ``status.state.adaptive``; owners' replicas are
re-read. Four things live only in memory, and a restarted leader decides without
them: ``good_reports`` (a member whose report turns malformed keeps its last good
one; after a restart it is no member until it reports again), ``permanent`` (a judged
departure is re-judged from a fresh read: its facts are persisted), ``restarts_pending``
(a restart whose write failed is done again in full) and ``handing`` (handoffs being
timed: a restart loses those samples of ``learned``, never a decision). The rest
only dedupes Events (``reported``) or skips a round whose inputs did not change
(``last_key``). ``Caches`` hold indexes that make a round cheaper and never change
its result.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from kooper.control import (
    adaptive,
    claims,
    containment,
    departures,
    documents,
    elsewhere,
    epochs,
    events,
    learning,
    observe,
    planning,
    reporting,
    restarts,
    situation,
    state,
    status,
    views,
)
from kooper.control.decision import Decision
from kooper.control.inputs import (
    Caches,
    Inputs,
    Issued,
    Memory,
    Owner,
    OwnerFacts,
    RolloutFacts,
    leased_members,
    owners_to_read,
)
from kooper.control.outputs import (
    Connectors,
    DeleteConfigMap,
    GroupStatus,
    Metrics,
    Write,
    WriteConfigMap,
    WriteStatus,
)
from kooper.control.restore import restored
from kooper.core import ids, model
from kooper.protocol import messages

__all__ = ["Caches", "Connectors", "DeleteConfigMap", "GroupStatus", "Inputs", "Memory",
           "Metrics", "Owner", "OwnerFacts", "RolloutFacts", "Step", "Write", "WriteConfigMap",
           "WriteStatus", "leased_members", "owners_to_read", "restored", "step"]




_Condition = status.Condition  # ``Step.status`` hides the module in the class body


@dataclasses.dataclass(frozen=True, slots=True)
class Step:
    """What one step decided; ``plan`` is None when nothing needed doing."""

    memory: Memory
    wake_at_ms: int | None
    """Run again at this time even if nothing happens (a deadline or a Lease expiry)."""
    plan: model.Plan | None = None
    snapshot: model.Snapshot | None = None
    previous: model.PlanState | None = None
    configmap_writes: tuple[messages.Assignment, ...] = ()
    status: GroupStatus | None = None
    deletes: tuple[ids.WorkerId, ...] = ()
    events: tuple[events.Event, ...] = ()
    metrics: Metrics = dataclasses.field(default_factory=Metrics)
    connectors: Connectors | None = None
    failures: frozenset[ids.WorkerId] = frozenset()
    decision: Decision | None = None
    epochs_first: GroupStatus | None = None
    """A status write made before every other write (see the module docstring)."""
    refused: tuple[_Condition, ...] = ()
    """The group's spec cannot be acted on (``GroupView.invalid``): nothing is planned and
    nothing written but these conditions (``status.refused_conditions``)."""

    @property
    def writes(self) -> tuple[Write, ...]:
        """Every write, in the order they must be made (see the module docstring)."""
        ordered: list[Write] = [] if self.epochs_first is None else [
            WriteStatus(self.epochs_first)]
        ordered += [DeleteConfigMap(m) for m in self.deletes]
        ordered += [WriteConfigMap(a) for a in self.configmap_writes]
        if self.status is not None:
            ordered.append(WriteStatus(self.status))
        return tuple(ordered)

    def phases(self) -> tuple[tuple[Write, ...], ...]:
        """``writes`` cut into phases of one kind; a phase's writes may run in parallel."""
        result: list[list[Write]] = []
        for write in self.writes:
            if result and type(result[-1][0]) is type(write):
                result[-1].append(write)
            else:
                result.append([write])
        return tuple(tuple(phase) for phase in result)

    def failed(self, members: frozenset[ids.WorkerId], *, retry_ms: int = 1_000) -> Step:
        """This step again, knowing that the ConfigMap writes of ``members`` failed."""
        if not members or self.decision is None:
            return self
        return _finish(self.decision, members, retry_ms=retry_ms)


def step(inputs: Inputs, memory: Memory, *, now_ms: int, caches: Caches | None = None) -> Step:
    """Decide one round (see the module docstring).

    A connector that makes some member's document too large is rejected and the
    round planned again without it (``control.containment``): it fails alone. A
    WorkerGroup whose spec cannot be acted on (``GroupView.invalid``: a duration an older
    CRD admitted) is bad input like the others, not a failed round (``_refused``).
    """
    if inputs.group.invalid:
        return _refused(inputs.group, memory)
    if any(entry[0] == status.INVALID_SPEC for entry in memory.volatile.reported.entries):
        # Fixed: the same bad value written again later is reported again.
        memory = memory.replace(reported=events.Reported(frozenset(
            e for e in memory.volatile.reported.entries if e[0] != status.INVALID_SPEC)))
    caches = caches if caches is not None else Caches()
    members = frozenset(lease.member for lease in inputs.leases) if memory.volatile.rejected \
        else frozenset()
    rejected = containment.carried(memory.volatile.rejected, inputs.connectors, members)
    while True:
        decided = _step(inputs, memory, now_ms=now_ms, caches=caches, rejected=rejected)
        found = containment.oversized(decided.configmap_writes)
        if found is None or found[0] in rejected:
            return decided
        members = members or frozenset(lease.member for lease in inputs.leases)
        name, why = found
        spec = next(c for c in inputs.connectors if c.name == name)
        rejected = {**rejected, name: (containment.reason_key(spec, members), why)}


def _refused(group: views.GroupView, memory: Memory) -> Step:
    """A step that plans nothing from a guessed setting: ``Ready=False``/``Degraded=True``
    (``InvalidSpec``, naming the field and value) and, once per bad value, a Warning Event
    and a ``kooper_bad_inputs_total`` count. The memory is kept (the next valid spec plans
    from it); a condition already persisted for the same value counts as reported, so a
    restarted operator does not report it again."""
    conditions = status.refused_conditions(group.invalid)
    degraded = conditions[-1]
    persisted = any(isinstance(c, Mapping) and c.get("type") == degraded.type
                    and c.get("reason") == degraded.reason and c.get("message")
                    == degraded.message for c in group.status.get("conditions") or ())
    out = events.Recorder(memory.volatile.reported)
    if not persisted:
        out.once(status.INVALID_SPEC, group.invalid, degraded.message)
    return Step(memory=memory.replace(last_key=None, reported=events.Reported(
        frozenset(out.entries))), wake_at_ms=None, events=tuple(out.events),
        metrics=Metrics(bad_input=tuple(e.reason for e in out.events)), refused=conditions)


def _step(inputs: Inputs, memory: Memory, *, now_ms: int, caches: Caches,
          rejected: Mapping[str, tuple[object, str]]) -> Step:
    every = inputs.connectors
    if rejected:
        inputs = dataclasses.replace(
            inputs, connectors=[c for c in inputs.connectors if c.name not in rejected])
    shared = elsewhere.taken(inputs.group, inputs.others, inputs.pods) if inputs.others \
        else {}
    if shared:  # an older group's selector matches them too: they are its pods
        inputs = dataclasses.replace(
            inputs, pods=[p for p in inputs.pods if p.name not in shared])
    if memory.persisted.issued.floor_pending:
        memory = epochs.floored(memory, inputs)
    seen = observe.observe(inputs, memory, now_ms=now_ms, caches=caches)
    held = seen.outside.connectors
    if held:  # their work still runs outside the group: as if not created yet
        inputs = dataclasses.replace(
            inputs, connectors=[c for c in inputs.connectors if c.name not in held])
    now = situation.situation(inputs, memory, seen, now_ms=now_ms, caches=caches)
    last = memory.volatile.last_plan
    due = last is not None and last.next_round_at_ms is not None \
        and last.next_round_at_ms <= now_ms
    judged, foreign = now.judged, now.foreign
    key = (now.snap, inputs.group.generation, seen.found.issues, len(seen.found.pods),
           now.wanted.key, tuple(sorted(judged.book.items())) if judged.book else (),
           now.hold, tuple(sorted(foreign.items())) if foreign else (), seen.seen)
    if key == memory.volatile.last_key and not inputs.edits and not due and last is not None:
        quiet = memory.replace(
            good_reports=seen.good, pod_owners=seen.owners, permanent=seen.permanent,
            failures=judged.book, task_restarts=judged.task_restarts, observed=seen.observed,
            rejected=rejected, terminating=seen.seen, vanished=seen.vanished)
        return Step(memory=quiet, wake_at_ms=_wake(last, seen.found.next_expiry_ms,
                                                   judged.wake_at_ms, seen.outside.until_ms))
    planned = planning.plan(inputs, memory, seen, now, now_ms=now_ms, caches=caches)
    out = events.Recorder(memory.volatile.reported)
    for member, how in sorted(inputs.edits.items()):
        name = views.configmap_name(member)
        if how == "deleted":
            out.once("ConfigMapDeleted", member, f"ConfigMap {name} was deleted; rewriting it",
                     member=member)
        elif how == "edited":  # ("unanswered": our own write, its answer lost)
            out.forget("ConfigMapEdited", member)
            out.once("ConfigMapEdited", member,
                     f"ConfigMap {name} was changed by someone else; rewriting it",
                     member=member)
    problems = claims.problems(out, found=seen.found, claims=now.unknown, foreign=foreign,
                               shared=bool(shared))
    problems = (*problems, *elsewhere.problems(
        out, seen.outside, elsewhere.strays(seen.vanished, inputs.pods, seen.found.pods),
        shared))
    decision = Decision(
        inputs=inputs, memory=memory, now_ms=now_ms, key=key, seen=seen, now=now,
        planned=planned, recorder_entries=events.Reported(frozenset(out.entries)),
        problems=problems, bad_input=tuple(out.bad_input), early_events=tuple(out.events),
        every=every, rejected=rejected)
    return _finish(decision, frozenset(), retry_ms=0)


def _wake(plan: model.Plan, expiry_ms: int | None, *more: int | None) -> int | None:
    times = [t for t in (plan.next_round_at_ms, expiry_ms, *more) if t is not None]
    return min(times) if times else None


def _finish(d: Decision, failed: frozenset[ids.WorkerId], *, retry_ms: int) -> Step:
    """The writes, status, Events and next memory of a decided round."""
    memory, group, plan, snap = d.memory, d.inputs.group, d.planned.plan, d.planned.snap
    memberships = d.planned.memberships
    docs = documents.issue(d.inputs, memory, plan, memberships, d.now.wanted)
    new_state = state.merge_partial(memory.persisted.state, plan.state, failed)
    pending_restarts, done, restarted = restarts.written(
        d.now.restarts, done=memory.persisted.restarts_done, plan=plan, failed=failed,
        now_ms=d.now_ms, present=d.now.wanted.counts)
    book, task_restarts = learning.book(d, failed, retry_ms=retry_ms)
    failing = sorted(r for r, rec in book.items() if rec.failing)
    gone = tuple(sorted((set(d.inputs.configmaps) | memory.persisted.configmaps)
                        - set(plan.members)))
    owners = _owners(d, new_state)
    learned, handing = learning.learn(d, failed)
    choice = adaptive.choose(learned, max_delay_ms=group.settings.max_delay_ms)
    terminating = departures.forget(d.seen.seen, new_state, d.seen.found.pods)
    out = reporting.round_events(d, restarted, done)
    next_memory = Memory.of(
        state=new_state, good_reports=d.seen.good, pod_owners=owners,
        given=documents.given(memory.persisted.given, plan, docs.writes, failed),
        permanent={m: p for m, p in d.seen.permanent.items()
                   if m in new_state.assignments or m in new_state.lost},
        configmaps=frozenset(memory.persisted.configmaps.union(
            ids.WorkerId(w.member) for w in docs.writes if w.member not in failed
        ).difference(gone)),
        restarts_done=done, restarts_pending=pending_restarts,
        member_epochs=memberships.by_member, observed=d.seen.observed,
        issued=Issued(member_epoch=memberships.issued, epoch_floor=docs.floor,
                      written=(memberships.issued, docs.floor)),
        settings_written=memory.persisted.settings_written if failed else d.planned.carried,
        revoked_claims={m: r.union(memory.volatile.revoked_claims.get(m, model.EMPTY))
                        for m, r in d.now.foreign.items() if m not in failed},
        terminating=terminating,
        reported=out.reported(reporting.alive(d, out, new_state)),
        last_key=d.key if not failed else None, last_plan=plan,
        failures=book, task_restarts=task_restarts, rejected=d.rejected, held=d.now.hold.held,
        hold_released=group.release_hold if d.now.hold.released else memory.volatile.hold_released,
        paced=d.planned.paced.pending, learned=learned, handing=handing,
        vanished=d.seen.vanished)
    facts = reporting.facts(d, failing)
    written = GroupStatus(
        facts=facts, state=new_state, owners=owners, epoch_floor=docs.floor,
        generation=group.generation, member_epoch=memberships.issued, learned=learned,
        terminating=terminating, adaptive_status=adaptive.summary(learned, choice)
        if group.settings.policy is model.Policy.KOOPER else None)
    return Step(
        memory=next_memory,
        wake_at_ms=_wake(plan, d.seen.found.next_expiry_ms, d.seen.outside.until_ms,
                         d.now_ms + retry_ms if failed else None,
                         *(r.next_at_ms for r in book.values())),
        plan=plan, snapshot=snap, previous=memory.persisted.state, configmap_writes=docs.writes,
        status=written, deletes=tuple(ids.WorkerId(m) for m in gone),
        events=reporting.every_event(d, out),
        metrics=reporting.metrics(d, failed, out, choice=choice, restarted=len(restarted),
                                  failing=len(failing)),
        connectors=reporting.connectors(d, done=done, book=book, task_restarts=task_restarts,
                                        restarted=restarted, settled=not facts.pending),
        failures=failed, decision=d, epochs_first=_status_first(d, written, facts, gone, new_state),
    )


def _owners(d: Decision, new_state: model.PlanState) -> Mapping[str, Owner]:
    """The pod owners worth remembering: of members, lost work, or pods still there."""
    owners = d.seen.owners
    stale = (owners.keys() - d.planned.plan.members.keys() - new_state.lost.keys()
             - new_state.assignments.keys() - d.seen.found.pods.keys())
    return {m: o for m, o in owners.items() if m not in stale} if stale else owners


def _status_first(d: Decision, written: GroupStatus, facts: status.GroupFacts,
                  gone: tuple[str, ...], new_state: model.PlanState) -> GroupStatus | None:
    """The status write made before every other (module docstring, write 0), or None."""
    if any(ids.WorkerId(member) in new_state.lost for member in gone):
        # A departure whose work waits: the lost set and its deadline are persisted
        # before the departed member's ConfigMap is deleted, or a death in between
        # would leave a restarted operator seeing that work as unowned, new work.
        return written
    raise_first = epochs.unpersisted(d.memory)
    if raise_first is None:
        return None
    kept = d.memory.persisted
    return GroupStatus(facts=facts, state=kept.state, owners=kept.pod_owners,
                       generation=d.inputs.group.generation, member_epoch=raise_first[0],
                       epoch_floor=raise_first[1])
