"""One controller step: ``step(inputs, memory, *, now_ms) -> Step`` (sans-I/O, like h11).

The operator (``shell.rounds``), the simulator (``sim.runner``) and ``kooper replay``
(``control.replay``) gather ``Inputs`` their own way and call this; nothing else
decides a round. A ``Step`` says what to do; ``Step.writes`` is the order
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
from collections.abc import Mapping, Sequence

from kooper.control import (
    adaptive,
    claims,
    containment,
    departures,
    epochs,
    events,
    failures,
    liveness,
    pacing,
    rails,
    reissue,
    restarts,
    rollout,
    settings,
    snapshot,
    state,
    status,
    views,
)
from kooper.control.inputs import (
    Caches,
    Inputs,
    Memory,
    Owner,
    OwnerFacts,
    RolloutFacts,
    Wanted,
    leased_members,
    owners_to_read,
    restored,
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
from kooper.core import assignor, delays, ids, model
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
    decision: _Decision | None = None
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


@dataclasses.dataclass(frozen=True, slots=True)
class _Decision:
    """A planned round before the writes' outcome is known."""

    inputs: Inputs
    memory: Memory
    now_ms: int
    key: object
    found: snapshot.Members
    snap: model.Snapshot
    plan: model.Plan
    restarts: Mapping[str, tuple[str, frozenset[str]]]
    recorder_entries: events.Reported
    problems: tuple[tuple[str, str], ...]
    bad_input: tuple[str, ...]
    early_events: tuple[events.Event, ...]
    pod_owners: Mapping[str, Owner]
    permanent: Mapping[str, bool]
    good_reports: Mapping[ids.WorkerId, messages.Report]
    wanted: Wanted
    judged: failures.Judgement
    observed: liveness.Observed
    every: Sequence[views.ConnectorView]
    """Every Connector of the group, rejected ones included (``inputs`` lacks those)."""
    rejected: Mapping[str, tuple[object, str]]
    hold: rails.Hold
    paced: pacing.Pacing
    carried: settings.Settings
    """Each connector's (config, state) as this round's documents carry them."""
    terminating: departures.Seen = frozenset()
    foreign: Mapping[ids.WorkerId, model.ConnectorsAndTasks] = dataclasses.field(
        default_factory=dict)
    """Claims on other members' work, left out of the snapshot (``control.claims``)."""
    vanished: Mapping[ids.WorkerId, liveness.Vanished] = dataclasses.field(
        default_factory=dict)
    """Members kept while their gone pod's process may run (``liveness.vanished``)."""


def step(inputs: Inputs, memory: Memory, *, now_ms: int, caches: Caches | None = None) -> Step:
    """Decide one round (see the module docstring).

    A connector that makes some member's document too large is rejected and the
    round planned again without it (``control.containment``): it fails alone. A
    WorkerGroup whose spec cannot be acted on (``GroupView.invalid``: a duration an older
    CRD admitted) is bad input like the others, not a failed round (``_refused``).
    """
    if inputs.group.invalid:
        return _refused(inputs.group, memory)
    if any(entry[0] == status.INVALID_SPEC for entry in memory.reported.entries):
        # Fixed: the same bad value written again later is reported again.
        memory = dataclasses.replace(memory, reported=events.Reported(frozenset(
            e for e in memory.reported.entries if e[0] != status.INVALID_SPEC)))
    caches = caches if caches is not None else Caches()
    members = frozenset(lease.member for lease in inputs.leases) if memory.rejected \
        else frozenset()
    rejected = containment.carried(memory.rejected, inputs.connectors, members)
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
    out = events.Recorder(memory.reported)
    if not persisted:
        out.once(status.INVALID_SPEC, group.invalid, degraded.message)
    return Step(memory=dataclasses.replace(memory, last_key=None, reported=events.Reported(
        frozenset(out.entries))), wake_at_ms=None, events=tuple(out.events),
        metrics=Metrics(bad_input=tuple(e.reason for e in out.events)), refused=conditions)


def _step(inputs: Inputs, memory: Memory, *, now_ms: int, caches: Caches,
          rejected: Mapping[str, tuple[object, str]]) -> Step:
    every = inputs.connectors
    if rejected:
        inputs = dataclasses.replace(
            inputs, connectors=[c for c in inputs.connectors if c.name not in rejected])
    group = inputs.group
    if memory.floor_pending:
        memory = epochs.floored(memory, inputs)
    previous = memory.state
    observed = liveness.observe(memory.observed, inputs.leases, now_ms=now_ms)
    found = snapshot.collect_members(group, pods=inputs.pods, leases=inputs.leases,
                                     last_good=memory.good_reports, now_ms=now_ms,
                                     memo=caches.members, observed=observed)
    vanished: Mapping[ids.WorkerId, liveness.Vanished] = {}
    if not inputs.gone_means_stopped:
        vanished = liveness.vanished(
            memory.vanished, state=previous, live=found.members, pods=found.pods,
            leases=inputs.leases, before=memory.observed, observed=observed,
            reports=memory.good_reports, now_ms=now_ms,
            documents=memory.given if memory.documents is not None else None,
            default_duration_s=group.lease_duration_s, skew_s=group.clock_skew_s)
        found = snapshot.with_vanished(found, vanished)
    good: Mapping[ids.WorkerId, messages.Report] = found.reports
    if len(found.reports) != len(inputs.leases):  # some Lease is not (yet) a member
        leased = {lease.member for lease in inputs.leases}
        good = {m: r for m, r in memory.good_reports.items() if m in leased}
        good.update(found.reports)
    owners: Mapping[str, Owner] = memory.pod_owners
    if any(owners.get(pod.name) != (pod.owner_kind, pod.owner_name)
           for pod in found.new_pods if pod.owner_kind):
        owners = {**owners, **{pod.name: (pod.owner_kind, pod.owner_name)
                               for pod in found.new_pods if pod.owner_kind}}
    seen = departures.terminating(found.pods, found.members, memory.terminating)
    permanent = departures.judge(inputs, memory, found.members, seen)
    wanted = caches.connectors_of(inputs.connectors)
    wanted_restarts = restarts.requested(inputs.connectors, done=memory.restarts_done,
                                         pending=memory.restarts_pending, counts=wanted.counts)
    restarting = {r for _, rs in wanted_restarts.values() for r in rs}
    judged = failures.judge(
        connectors=inputs.connectors, reports=found.reports, held=previous.assignments,
        book=memory.failures if memory.failures is not None
        else failures.restore(inputs.connectors),
        task_restarts=memory.task_restarts if memory.task_restarts is not None
        else failures.restored_task_restarts(inputs.connectors),
        restarting=restarting, now_ms=now_ms)
    hold = rails.judge(previous, found.members, fraction=group.max_departed_fraction,
                       override=group.release_hold, acted_on=memory.hold_released)
    revisions = rollout.judge(found.pods, found.members, inputs.rollouts)
    snap = snapshot.build(group, connectors=inputs.connectors, members=found.members,
                          outdated=revisions.outdated, updated=revisions.updated,
                          rolling=revisions.rolling,
                          departed_permanently=(ids.WorkerId(m) for m, p in permanent.items()
                                                if p and not hold.held),
                          restarts=(*restarting, *judged.due, *judged.manual),
                          counts=wanted.counts)
    configured = caches.configured_of(snap)
    unknown = claims.unknown(found.members, given=memory.given, configured=configured,
                             caches=caches)
    seen_members, foreign = claims.foreign(unknown, members=found.members,
                                           assigned=previous.assignments,
                                           lost=previous.lost,
                                           forgotten=previous.forgotten,
                                           assigned_at=previous.assigned_at,
                                           documented=claims.documented(
                                               found.members, memory.given,
                                               every=memory.documents is not None),
                                           untrue=claims.false(
                                               found.members, assigned=previous.assignments,
                                               assigned_at=previous.assigned_at,
                                               configured=configured))
    if foreign:
        snap = dataclasses.replace(snap, members=seen_members)
    if previous.forgotten and memory.documents is not None:
        adopted = epochs.unissued(snap.members, memory.documents)
        if adopted:
            snap = dataclasses.replace(snap, restarts=snap.restarts | adopted)
    last = memory.last_plan
    due = last is not None and last.next_round_at_ms is not None \
        and last.next_round_at_ms <= now_ms
    key = (snap, group.generation, found.issues, len(found.pods), wanted.key,
           tuple(sorted(judged.book.items())) if judged.book else (), hold,
           tuple(sorted(foreign.items())) if foreign else (), seen)
    if key == memory.last_key and not inputs.edits and not due and memory.last_plan is not None:
        quiet = dataclasses.replace(memory, good_reports=good, pod_owners=owners,
                                    permanent=permanent, failures=judged.book,
                                    task_restarts=judged.task_restarts, observed=observed,
                                    rejected=rejected, terminating=seen, vanished=vanished)
        return Step(memory=quiet, wake_at_ms=_wake(memory.last_plan, found.next_expiry_ms,
                                                   judged.wake_at_ms))
    choice = adaptive.choose(memory.learned, max_delay_ms=group.settings.max_delay_ms)
    if group.settings.policy is model.Policy.KOOPER and \
            choice.grace_ms != group.settings.max_delay_ms:
        # Not in ``key``: the grace only matters to a departure, which changes the key.
        snap = dataclasses.replace(snap, grace_ms=choice.grace_ms)
    planning = rails.planning_state(previous, hold, now_ms=now_ms,
                                    delay_ms=group.settings.max_delay_ms)
    if hold.held and planning.delay is not None and planning.delay.departures:
        # A hold keeps every lost set waiting: none is released on its own deadline.
        planning = dataclasses.replace(
            planning, delay=dataclasses.replace(planning.delay, departures={}))
    plan = assignor.plan(snap, planning, now_ms=now_ms, configured=configured,
                         cache=caches.assignor)
    plan, paced = pacing.pace(plan, previous, snap, configured=configured,
                              limit=group.balancing_limit, pending=memory.paced,
                              exempt={member for member, _ in seen})
    if foreign:  # after pacing: these members must be rewritten whatever pacing left
        plan = claims.revoke_foreign(plan, foreign, done=memory.revoked_claims)
    carried = settings.wanted(wanted.configs, wanted.states)
    plan = settings.rewrite(plan, settings.changed(memory.settings_written, carried))
    # A member starting a new membership (it fenced itself, or came back) must apply its
    # document even where its work did not change: a generation it has not accepted yet.
    plan = reissue.reissue(plan, epochs.member_epochs(memory, plan, good)[2])
    out = events.Recorder(memory.reported)
    for member, how in sorted(inputs.edits.items()):
        name = views.configmap_name(member)
        if how == "deleted":
            out.once("ConfigMapDeleted", member, f"ConfigMap {name} was deleted; rewriting it",
                     member=member)
        else:
            out.forget("ConfigMapEdited", member)
            out.once("ConfigMapEdited", member,
                     f"ConfigMap {name} was changed by someone else; rewriting it",
                     member=member)
    problems = claims.problems(out, found=found, claims=unknown, foreign=foreign)
    decision = _Decision(
        inputs=inputs, memory=memory, now_ms=now_ms, key=key, found=found, snap=snap, plan=plan,
        restarts=wanted_restarts, recorder_entries=events.Reported(frozenset(out.entries)),
        problems=problems, bad_input=tuple(out.bad_input), early_events=tuple(out.events),
        pod_owners=owners, permanent=permanent, good_reports=good, wanted=wanted,
        judged=judged, observed=observed, every=every, rejected=rejected, hold=hold,
        terminating=seen, foreign=foreign, paced=paced, carried=carried, vanished=vanished,
    )
    return _finish(decision, frozenset(), retry_ms=0)


def _wake(plan: model.Plan, expiry_ms: int | None, *more: int | None) -> int | None:
    times = [t for t in (plan.next_round_at_ms, expiry_ms, *more) if t is not None]
    return min(times) if times else None


def _finish(d: _Decision, failed: frozenset[ids.WorkerId], *, retry_ms: int) -> Step:
    """The writes, status, Events and next memory of a decided round."""
    inputs, memory, plan, snap, group = d.inputs, d.memory, d.plan, d.snap, d.inputs.group
    previous = memory.state
    member_epochs, member_epoch, fresh = epochs.member_epochs(memory, plan, d.good_reports)
    floor = memory.epoch_floor
    if plan.state.epochs is not previous.epochs and plan.state.epochs:
        floor = max(floor, *plan.state.epochs.values())
    to_write = set(plan.changed) | {m for m in inputs.edits if m in plan.members} | fresh
    states, configs = d.wanted.states, d.wanted.configs
    writes = tuple(state.assignment_message(
        group=group.name, member=member, plan=plan.members[member], protocol=plan.protocol,
        policy=str(group.settings.policy), delay_ms=plan.delay_ms, leader=inputs.leader,
        epochs=plan.state.epochs, configs=configs, states=states,
        incarnation=plan.state.incarnations.get(member, ""),
        member_epoch=member_epochs[member][1], rejoins=member_epochs[member][2],
        leader_epoch=inputs.leader_epoch,
    ) for member in sorted(to_write))
    new_state = state.merge_partial(previous, plan.state, failed)
    pending_restarts, done, restarted = restarts.written(
        d.restarts, done=memory.restarts_done, plan=plan, failed=failed, now_ms=d.now_ms,
        present=d.wanted.counts)
    pending = tuple(m for m, mp in plan.members.items()
                    if snap.members[m].generation < mp.generation)
    judged = d.judged
    book = failures.written(judged.book, {*judged.due, *judged.manual,
                                          *(r for _, rs in d.restarts.items() for r in rs[1])},
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
                    old = (memory.task_restarts or {}).get(owner)
                    if old is None:
                        task_restarts.pop(owner, None)
                    else:
                        task_restarts[owner] = old
    failing = sorted(r for r, rec in book.items() if rec.failing)
    problems = d.problems
    fraction = group.max_departed_fraction
    if d.hold.held:
        problems = (*problems, ("ReassignmentHeld", d.hold.message(fraction)))
    if d.rejected:
        first = sorted(d.rejected.items())[0][1][1]
        problems = (*problems, ("ConnectorRejected", f"{len(d.rejected)} connector(s) "
                                f"rejected ({', '.join(sorted(d.rejected)[:5])}): {first}"))
    if failing:
        problems = (*problems, ("ResourcesFailed", f"{len(failing)} resource(s) failed: "
                                + ", ".join(failing[:5]) + (" ..." if len(failing) > 5 else "")))
    facts = status.GroupFacts(snapshot=snap, plan=plan, now_ms=d.now_ms,
                              pods_matched=len(d.found.pods), problems=problems,
                              pending=pending, paced=d.paced.pending,
                              max_moves=pacing.cap(group.balancing_limit,
                                                   len(d.snap.connectors)
                                                   + sum(d.snap.connectors.values())))
    gone = tuple(sorted((set(inputs.configmaps) | memory.configmaps) - set(plan.members)))
    raise_first = epochs.unpersisted(memory)
    owners = d.pod_owners
    stale = (owners.keys() - plan.members.keys() - new_state.lost.keys()
             - new_state.assignments.keys() - d.found.pods.keys())
    if stale:
        owners = {m: o for m, o in owners.items() if m not in stale}
    given = dict(memory.given) if memory.given.keys() <= plan.members.keys() else {
        m: known for m, known in memory.given.items() if m in plan.members}
    for message in writes:
        member = ids.WorkerId(message.member)
        if member in failed:
            continue
        known = given.get(member)
        had = known[1] if known is not None and known[0] == message.incarnation else model.EMPTY
        given[member] = (message.incarnation,
                         had.union(message.assigned).union(message.revoked))
    learned, handing = _learn(d, failed)
    conf = group.settings
    choice = adaptive.choose(learned, max_delay_ms=conf.max_delay_ms)
    kooper = conf.policy is model.Policy.KOOPER
    terminating = departures.forget(d.terminating, new_state, d.found.pods)
    out = events.Recorder(d.recorder_entries)
    by_name = {c.name: c for c in inputs.connectors}
    for name in restarted:
        connector = by_name[name]
        count = 0 if connector.state == "stopped" else connector.tasks_max
        record = done[name]
        out.event("ConnectorRestarted",
                  f"kooper.dev/restart={record['observed']!r}: the instance and {count} "
                  f"task(s) restart in place with new epochs (generation "
                  f"{record['rebalanceGeneration']})", connector=name)
    events.round_events(out, previous=previous, plan=plan, snap=snap)
    alive: frozenset[str] | set[str] = frozenset()
    if any(entry[2] for entry in out.entries):
        alive = {*plan.members, *new_state.assignments, *new_state.lost, *d.found.pods,
                 *(lease.member for lease in inputs.leases)}
    next_memory = Memory(
        state=new_state, good_reports=d.good_reports, given=given, pod_owners=owners,
        permanent={m: p for m, p in d.permanent.items()
                   if m in new_state.assignments or m in new_state.lost},
        configmaps=frozenset(memory.configmaps.union(
            ids.WorkerId(w.member) for w in writes if w.member not in failed
        ).difference(gone)),
        restarts_done=done, restarts_pending=pending_restarts,
        member_epochs=member_epochs, member_epoch=member_epoch, observed=d.observed,
        epoch_floor=floor, persisted_epochs=(member_epoch, floor),
        settings_written=memory.settings_written if failed else d.carried,
        revoked_claims={m: r.union(memory.revoked_claims.get(m, model.EMPTY))
                        for m, r in d.foreign.items() if m not in failed},
        terminating=terminating,
        reported=out.reported(alive), last_key=d.key if not failed else None, last_plan=plan,
        failures=book, task_restarts=task_restarts, rejected=d.rejected, held=d.hold.held,
        hold_released=group.release_hold if d.hold.released else memory.hold_released,
        paced=d.paced.pending,
        learned=learned, handing=handing, vanished=d.vanished,
    )
    written = GroupStatus(facts=facts, state=new_state, owners=owners, epoch_floor=floor,
                         generation=group.generation, member_epoch=member_epoch,
                         learned=learned, terminating=terminating,
                         adaptive_status=adaptive.summary(learned, choice) if kooper else None)
    status_first: GroupStatus | None = None
    if any(ids.WorkerId(member) in new_state.lost for member in gone):
        # A departure whose work waits: the lost set and its deadline are persisted
        # before the departed member's ConfigMap is deleted, or a death in between
        # would leave a restarted operator seeing that work as unowned, new work.
        status_first = written
    elif raise_first is not None:
        status_first = GroupStatus(
            facts=facts, state=previous, owners=memory.pod_owners, generation=group.generation,
            member_epoch=raise_first[0], epoch_floor=raise_first[1])
    return Step(
        memory=next_memory,
        wake_at_ms=_wake(plan, d.found.next_expiry_ms, d.now_ms + retry_ms if failed else None,
                         *(r.next_at_ms for r in book.values())),
        plan=plan, snapshot=snap, previous=previous,
        configmap_writes=writes,
        status=written,
        deletes=tuple(ids.WorkerId(m) for m in gone),
        events=(*d.early_events, *judged.events, *rails.hold_events(d.hold, memory.held, fraction),
                *pacing.paced_event(d.paced, group.balancing_limit),
                *out.events, *(
            events.Event("ConnectorRejected", why, warning=True, connector=name)
            for name, (_, why) in sorted(d.rejected.items()) if name not in memory.rejected)),
        metrics=Metrics(bad_input=(*d.bad_input, *out.bad_input),
                        ignored_leases=sum(1 for i in d.found.issues
                                           if i.reason == "LeaseIdentityMismatch"),
                        grace_ms=delays.effective_grace_ms(conf.policy, conf.max_delay_ms,
                                                          choice.grace_ms),
                        connector_restarts=len(restarted), failed_resources=len(failing),
                        balancing_deferred=d.paced.deferred,
                        balancing_pending=d.paced.pending,
                        rejected_resources=sum(
                            1 + (0 if c.state == "stopped" else c.tasks_max)
                            for c in d.every if c.name in d.rejected),
                        resource_restarts=(
                            ("automatic", len(judged.due - _on(failed, plan, judged.due))),
                            ("manual", len(judged.manual - _on(failed, plan, judged.manual))))),
        connectors=Connectors(plan=plan, snapshot=snap, connectors=d.every,
                              rejected={n: why for n, (_, why) in d.rejected.items()},
                              restarts=done, failures=book, task_restarts=task_restarts,
                              dirty=frozenset(restarted) | judged.changed | frozenset(
                                  set(d.rejected).symmetric_difference(memory.rejected)),
                              settled=not pending),
        failures=failed, decision=d, epochs_first=status_first,
    )


def _learn(d: _Decision, failed: frozenset[ids.WorkerId]
           ) -> tuple[adaptive.Learned, Mapping[ids.WorkerId, tuple[int, int, str]]]:
    """What this round observed of returns and handoffs (``control.adaptive``)."""
    memory, snap, plan, now = d.memory, d.snap, d.plan, d.now_ms
    max_delay = d.inputs.group.settings.max_delay_ms
    learned = adaptive.returned(memory.learned, snap.members, now_ms=now,
                                max_delay_ms=max_delay)
    gone = memory.state.assignments.keys() - snap.members.keys()
    if gone:
        # Known-permanent departures (a scale-down) never return: they teach nothing.
        learned = adaptive.departed(learned, sorted(
            m for m in gone if not d.permanent.get(m)
            or departures.planned(m, d.found.pods.get(m), d.terminating)), now_ms=now)
    handing: dict[ids.WorkerId, tuple[int, int, str]] = {}
    samples: list[int] = []
    for member, (generation, at, incarnation) in memory.handing.items():
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
