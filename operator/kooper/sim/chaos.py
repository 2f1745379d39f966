"""Random fault schedules on small groups, and the checks every run must pass.

A chaos run draws a group (2-5 pods, a few connectors), a policy, a protocol, a
delay and a schedule of faults (kills, bounces, scale changes, operator restarts
mid-round, partitions from the API, protocol flips) plus message faults (lost
or slow reports, lost ConfigMap updates) until the last fault. Everything comes
from one seed, so ``run_one(seed)`` reproduces a failure exactly.

Checks: no resource ever ran on two members at once; once the faults stop and
the delay passes, every configured resource runs exactly once, each member runs
exactly its assignment, and the group is balanced.

``hard=True`` draws the fault families of issue 12 (members are real SDK
sessions): partitions drawn around the fence boundary (the worker fences at the
lease duration, the operator declares it departed at lease + margin: 12-23 s for
15 s + 5 s) and long ones, operator kills mid-round and mid-write-sequence,
slow stops (up to 8 s, past the 5 s the budget leaves a stop: the session ends
its process, which restarts), 3-8 pods and
message loss up to 0.5. Hard runs also record the operator's audit rows
(``control.audit.rows``, the very rows ``kooper run --audit-log`` writes, for every
round the operator planned, those of a round it died in marked ``cut``:
``runner.Result.audit``). ``check_log`` then checks the
workers' event log and those rows alone (it knows nothing of the simulator's
state): no resource on two members at once, per-task epochs that only grow across
members, quiescence within ``CONVERGE_BOUND_MS`` of the last fault plus the delay,
and every scheduled-rebalance delay honoured (``check_delays``: work lost by an
unplanned departure starts on no other member before the policy's promise ran out;
``delay_rules`` states the promise per policy, each exemption a rule of its table).

Since the second version of the families (``families=2``, the default), hard runs
also draw a clock offset per pod (up to 10 s either way) that its Lease's
``renewTime`` carries, and leave departures to the operator's own liveness rule:
a Lease stops changing when its pod is cut off, and the step declares the member
departed when that version, as *it observed it*, is older than lease + margin
(nothing is removed for it). Some members forge reports (claiming tasks that run
on other members, while their session runs nothing of the sort). ``families=1``
replays the first version exactly (the seeds in ``tests/sim/test_chaos_regressions``).
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from kooper.control import step as control
from kooper.control import views
from kooper.core import events as ev
from kooper.core import ids, model, ownership
from kooper.sdk import session as sdk_session
from kooper.sim import delay_rules, leaders, metrics, runner, scenarios

A = scenarios.Action
_ACTIONS = (
    A.RESTART, A.KILL, A.KILL, A.SCALE_UP, A.SCALE_DOWN, A.OPERATOR_RESTART, A.PROTOCOL,
    A.PARTITION, A.PARTITION,
)


@dataclasses.dataclass(frozen=True, slots=True)
class Outcome:
    """One chaos run: its seed, what went wrong, and how long convergence took."""

    seed: int
    violations: tuple[str, ...]
    converge_ms: int
    events: int


CONVERGE_BOUND_MS = 180_000
"""A run is quiet this long after its last fault and the rebalance delay."""


def draw_hard(seed: int) -> tuple[runner.Config, scenarios.Scenario]:
    """Chaos run ``seed`` of issue 12's fault families (see the module docstring)."""
    rng = random.Random(seed)
    size = rng.randint(3, 8)
    delay = rng.choice((0, 3_000, 20_000))
    # The SDK's default budget for a 15 s lease: stop timeout lease/3, margin lease/15.
    lat = runner.Latencies(stop=runner.Span(100, rng.choice((400, 3_000, 8_000))),
                           stop_timeout_ms=5_000, fence_margin_ms=1_000)
    steps = []
    for _ in range(rng.randint(2, 12)):
        action = rng.choice(_HARD_ACTIONS)
        fence, declare = lat.lease_ms, lat.lease_ms + lat.skew_ms
        if action is A.PARTITION and rng.random() < 0.8:
            down = rng.randint(fence - 3_000, declare + 3_000)  # around the fence boundary
        else:
            down = rng.choice((1_000, 5_000, 30_000, 120_000))
        steps.append(scenarios.Step(
            action, pod=rng.randrange(size + 1),
            delay_ms=rng.choice((0, 50, 500, 2_000, 10_000, 20_000)), down_ms=down,
            count=rng.randint(1, 2),
            protocols=(rng.choice(("eager", "compatible", "compatible"))
                       if action in (A.RESTART, A.PROTOCOL) else ""),
            mid_round=rng.random() < 0.7,
        ))
    scenario = scenarios.Scenario("chaos-hard", tuple(steps))
    horizon = 30_000 + sum(s.delay_ms for s in steps) + 120_000
    config = runner.Config(
        pods=size, connectors=rng.randint(1, 4), tasks=rng.randint(0, 5),
        policy=rng.choice(list(model.Policy)),
        protocol=rng.choice((model.Protocol.COMPATIBLE,) * 3 + (model.Protocol.EAGER,)),
        delay_ms=delay, seed=seed, latencies=lat,
        faults=runner.Faults(lose_doc=rng.choice((0.0, 0.1, 0.3, 0.5)),
                             lose_report=rng.choice((0.0, 0.1, 0.3, 0.5)),
                             slow_report=rng.choice((0.0, 0.2)), until_ms=horizon),
        run=f"chaos-hard-{seed}", sessions=True,
    )
    return config, scenario


_HARD_ACTIONS = (
    A.PARTITION, A.PARTITION, A.PARTITION, A.KILL, A.RESTART, A.OPERATOR_RESTART,
    A.OPERATOR_RESTART, A.SCALE_UP, A.SCALE_DOWN, A.PROTOCOL,
)


def check_log(events: Sequence[ev.Event], *, last_fault_ms: int, delay_ms: int,
              end_ms: int, audit: Sequence[Mapping[str, Any]] = (),
              policy: model.Policy | None = None) -> list[str]:
    """The invariants the event log alone must show (see the module docstring).

    With the operator's ``audit`` rows and the run's ``policy``, also that every
    scheduled-rebalance delay was honoured (``check_delays``).
    """
    held = _holdings(events)
    doubled: dict[int, set[str]] = {}
    for i, j in ownership.overlaps(held):
        doubled.setdefault(j, set()).add(held[i].holder)
    problems: list[str] = []
    last_start: dict[str, tuple[str, int]] = {}
    starts = (e for e in sorted(events, key=lambda e: (e.ts_ms, e.event is not ev.Kind.STOP))
              if e.event is ev.Kind.START)
    for index, event in enumerate(starts):  # the order _holdings opens their intervals
        if index in doubled:
            problems.append(f"log: t={event.ts_ms} {event.resource} started on "
                            f"{event.member} while {', '.join(sorted(doubled[index]))} runs it")
        before = last_start.get(event.resource)
        if before is not None and event.epoch >= 0 and (
                event.epoch < before[1]
                or (event.epoch == before[1] and event.member != before[0])):
            problems.append(f"log: t={event.ts_ms} {event.resource} started on "
                            f"{event.member} at epoch {event.epoch} after epoch "
                            f"{before[1]} on {before[0]}")
        last_start[event.resource] = (event.member, event.epoch)
    if end_ms > last_fault_ms + delay_ms + CONVERGE_BOUND_MS:
        problems.append(f"log: quiet only at {end_ms} ms, {end_ms - last_fault_ms} ms after "
                        "the last fault")
    if policy is not None:
        problems += check_delays(audit, events, policy=policy, delay_ms=delay_ms)
    return problems


check_delays = delay_rules.check_delays
"""Every scheduled-rebalance delay honoured (``delay_rules``: the promise per policy, and
each exemption a rule of ``delay_rules.RULES``)."""
delays_exercised = delay_rules.delays_exercised


def _holdings(events: Sequence[ev.Event]) -> list[ownership.Interval]:
    """Who ran what when, by the workers' rows, one interval per ``start`` in time order
    (stops first at an instant): a member runs a resource until it stops it (or starts
    it again); a ``leave`` ends nothing: the simulated worker's own stop rows do."""
    out: list[ownership.Interval] = []
    running: dict[tuple[str, str], int] = {}
    for event in sorted(events, key=lambda e: (e.ts_ms, e.event is not ev.Kind.STOP)):
        if event.event in (ev.Kind.START, ev.Kind.STOP):
            index = running.pop((event.resource, event.member), None)
            if index is not None:
                out[index] = out[index]._replace(end_ms=event.ts_ms)
        if event.event is ev.Kind.START:
            running[(event.resource, event.member)] = len(out)
            out.append(ownership.Interval(event.resource, event.member, event.ts_ms, _OPEN))
    return out


_OPEN = ownership.OPEN


@dataclasses.dataclass(frozen=True, slots=True)
class Extra:
    """What the second version of the hard families adds to a run."""

    offsets_ms: Mapping[int, int]
    """Pod ordinal → how far its clock is from the operator's (its ``renewTime``)."""
    forge: float
    """Probability that a report also claims tasks running on other members."""
    force_delete: float = 0.0
    """Probability that a kill is a force delete instead (``scenarios.Action.FORCE_DELETE``:
    the old process runs on until its budget fences it; the third families)."""
    gone_means_stopped: bool = True
    """Whether the step is told that a vanished pod's process stopped with it
    (``control.Inputs``); the third families leave that to the operator's own rule."""


OFFSET_MS = 10_000


def draw_extra(seed: int, *, families: int = 3) -> Extra:
    """The clock offsets, forgery rate and (``families >= 3``) force-delete rate of hard
    run ``seed`` (its own random stream: the second families' draws are unchanged)."""
    rng = random.Random(f"hard-extra-{seed}")
    offsets = {ordinal: rng.choice((0, rng.randint(-OFFSET_MS, OFFSET_MS)))
               for ordinal in range(16)}
    forge = rng.choice((0.0, 0.0, 0.05, 0.2))
    if families < 3:
        return Extra(offsets_ms=offsets, forge=forge)
    return Extra(offsets_ms=offsets, forge=forge, force_delete=rng.choice((0.0, 0.5, 1.0)),
                 gone_means_stopped=False)


class HardFaults(runner.NoFaults):
    """The hard families' faults (``runner.FaultHooks``): Lease times, per-pod clock
    offsets, forged reports and (third families) force deletes, whose processes run on as
    orphans.

    The operator sees each live Lease renewed at every round (``renewTime`` on the pod's
    own clock); a cut-off pod's Lease keeps the version of its last renewal. The step
    alone decides when that is too old (``control.liveness``), from when it observed it;
    the simulator only stops waiting for the cut-off member in a KIP-415 rejoin.
    """

    def __init__(self, extra: Extra) -> None:
        super().__init__()
        self.extra = extra
        self.cut_at: dict[ids.WorkerId, int] = {}
        """pod → when its current partition began (valid while it is partitioned)."""
        self.cuts: dict[ids.WorkerId, int] = {}
        self.wakes: set[int] = set()
        self.hidden: dict[ids.WorkerId, model.Member] = {}
        self.forged: list[tuple[int, str, str]] = []
        """(time, forger, resource) of every forged claim sent."""
        self.orphans: dict[tuple[ids.WorkerId, int], runner.Pod] = {}
        """(name, token) → the process of a force-deleted pod, running on without it."""

    def attach(self, sim: runner.Sim) -> Mapping[str, Callable[..., None]]:
        """See ``runner.FaultHooks``."""
        handlers = dict(super().attach(sim))
        self.forge_rng = random.Random(f"forge-{sim.config.seed}")
        self.force_rng = random.Random(f"force-{sim.config.seed}")
        sim.gone_means_stopped = self.extra.gone_means_stopped
        handlers["wake"] = self._wake
        return handlers

    # -- force deletes -------------------------------------------------------------------

    def step(self, step: scenarios.Step) -> scenarios.Step:
        """A kill is a force delete at the run's rate (``Extra.force_delete``)."""
        step = super().step(step)
        if step.action is A.KILL and self.extra.force_delete \
                and self.force_rng.random() < self.extra.force_delete:
            return dataclasses.replace(step, action=A.FORCE_DELETE)
        return step

    def force_delete(self, step: scenarios.Step) -> ids.WorkerId | None:
        """The pod and its Lease vanish; its process runs on, cut off from the API (its
        pod-bound token stopped working), until its session fences it; the pod is
        re-created under its name."""
        sim = self.sim
        name = ids.WorkerId(f"{sim.config.group}-{step.pod}")
        pod = sim.pods.get(name)
        if pod is None or name in sim.permanent or not pod.alive or pod.session is None \
                or pod.partitioned:
            return sim.play(dataclasses.replace(step, action=A.KILL))
        self.orphans[(name, pod.token)] = pod
        pod.partitioned = True
        pod.partitions += 1
        cut = (name, pod.token, pod.partitions)
        # Its last renewal went through just before the delete, unseen by the operator.
        pod.session.lease_renewed(sim.clock.now_ms)
        sim.clock.after(pod.session.fence_after_ms, "fence", *cut)
        if pod.session.deadline_ms is not None:
            sim.clock.after(pod.session.deadline_ms, "exit_check", *cut)
        if sim.visible.pop(name, None) is not None or self.hidden.pop(name, None) is not None:
            sim.visible_epochs.pop(name, None)
        sim.modelled.remove(name)
        sim.trigger_round()
        sim.respawn(step, pod)
        return name

    def orphan(self, name: ids.WorkerId, token: int) -> runner.Pod | None:
        """See ``runner.FaultHooks``."""
        orphan = self.orphans.get((name, token))
        if orphan is not None and orphan.alive:
            return orphan
        return super().orphan(name, token)

    def process_ends(self, pod: runner.Pod) -> bool:
        """An orphan's process ends for good: nothing re-creates it."""
        if (pod.name, pod.token) not in self.orphans:
            return super().process_ends(pod)
        late = self.sim.stop_all(pod)
        pod.alive = False
        self.sim.emit(ev.Kind.LEAVE, pod.name, late_ms=late)
        del self.orphans[(pod.name, pod.token)]
        return True

    def batch(self, pod: runner.Pod, actions: list[sdk_session.Action]) -> None:
        """Two processes under one name: the owner map (by name) cannot tell them apart,
        so a start of what the other one runs is checked here."""
        super().batch(pod, actions)
        if not self.orphans:
            return
        name = pod.name
        others = [p for p in (*self.orphans.values(), self.sim.pods.get(name))
                  if p is not None and p is not pod and p.name == name and p.alive]
        for action in actions:
            if isinstance(action, sdk_session.Start) and any(
                    action.resource in other.running for other in others):
                self.sim.violations.append(
                    f"t={self.sim.clock.now_ms}: {action.resource} started on {name} "
                    "while another process of that pod name (force-deleted) runs it")

    # -- Lease times and clock offsets ---------------------------------------------------------

    def partitioned(self, pod: runner.Pod) -> None:
        """The operator's watch sees the cut-off pod's Lease keep its last version."""
        super().partitioned(pod)
        name = pod.name
        if pod.partitions != self.cuts.get(name):
            self.cuts[name] = pod.partitions
            self.cut_at[name] = self.sim.clock.now_ms
            self.sim.trigger_round()

    def inputs(self, inputs: control.Inputs) -> control.Inputs:
        """Every Lease with its ``renewTime`` (on its pod's clock) and duration."""
        inputs = super().inputs(inputs)
        sim = self.sim
        now = sim.clock.now_ms
        leases = []
        for lease in inputs.leases:
            pod = sim.pods.get(ids.WorkerId(lease.member))
            offset = self.extra.offsets_ms.get(pod.ordinal, 0) if pod is not None else 0
            # A cut-off pod's Lease keeps the version of its last renewal.
            renewed = self.cut_at.get(pod.name, now) if pod is not None and pod.alive \
                and pod.partitioned else now
            leases.append(dataclasses.replace(
                lease, renew_ms=renewed + offset, duration_s=sim.lat.lease_ms // 1000))
        group = dataclasses.replace(inputs.group, lease_duration_s=sim.lat.lease_ms // 1000,
                                    clock_skew_s=sim.lat.skew_ms // 1000)
        return dataclasses.replace(inputs, leases=leases, group=group)

    def after_round(self, epoch: int) -> None:
        """Run again when a cut-off member's Lease expires (the step's ``wake_at_ms``), and
        when a vanished pod's member departs (its fence budget ran out)."""
        super().after_round(epoch)
        sim = self.sim
        if epoch != sim.operator_epoch or not sim.operator_up:
            return
        window = sim.lat.lease_ms + sim.lat.skew_ms
        for name in self.cut_at:
            pod = sim.pods.get(name)
            if pod is None or not pod.alive or not pod.partitioned:
                continue
            seen = sim.memory.volatile.observed.get(views.configmap_name(name))
            due = None if seen is None else seen[1] + window
            if due is not None and due >= sim.clock.now_ms and due not in self.wakes:
                self.wakes.add(due)
                sim.clock.at(due, "wake", sim.operator_epoch)
        for gone in sim.memory.volatile.vanished.values():
            if gone.until_ms >= sim.clock.now_ms and gone.until_ms not in self.wakes:
                self.wakes.add(gone.until_ms)
                sim.clock.at(gone.until_ms, "wake", sim.operator_epoch)

    def _wake(self, epoch: int) -> None:
        if epoch == self.sim.operator_epoch:
            self.sim.trigger_round()

    # -- departures: the operator's own liveness rule ----------------------------------------

    def declare(self, pod: runner.Pod) -> bool:
        """No removal: the operator's liveness rule declares it. A KIP-415 leader stops
        waiting for it in the rejoin barrier (Kafka's session timeout)."""
        sim = self.sim
        if pod.name in sim.visible:
            self.hidden[pod.name] = sim.visible.pop(pod.name)
            sim.visible_epochs.pop(pod.name, None)
            sim.trigger_round()
        return True

    def report(self, name: ids.WorkerId, token: int) -> bool:
        """A force-deleted pod's report written before the delete never lands (its Lease
        went with the pod); a live member's report ends its being hidden."""
        if (name, token) in self.orphans:
            return False
        if self.sim.live_pod(name, token) is not None:
            self.hidden.pop(name, None)
        return super().report(name, token)

    def departing(self, name: ids.WorkerId) -> None:
        """A hidden member is the operator's to drop again."""
        hidden = self.hidden.pop(name, None)
        if hidden is not None and name not in self.sim.visible:
            self.sim.visible[name] = hidden
        super().departing(name)

    # -- forged reports --------------------------------------------------------------------------

    def outgoing_report(self, pod: runner.Pod, member: model.Member) -> model.Member:
        """At the run's rate, the report also claims tasks other members run."""
        member = super().outgoing_report(pod, member)
        if self.extra.forge and self.forge_rng.random() < self.extra.forge:
            sim = self.sim
            theirs = sorted(r for p in sim.pods.values() if p.alive and p is not pod
                            for r in p.running if r not in sim.configured.connectors)
            if theirs:
                claimed = self.forge_rng.sample(theirs, min(len(theirs),
                                                            self.forge_rng.randint(1, 2)))
                for resource in claimed:
                    self.forged.append((sim.clock.now_ms, str(pod.name), resource))
                member = dataclasses.replace(member, owned=member.owned.union(
                    model.ConnectorsAndTasks(frozenset(), frozenset(claimed))))
        return member


class HardLeaderFaults(HardFaults, leaders.Terms):
    """``HardFaults`` with the operator in fenced leader terms, stalled leaders and API
    restarts (``sim.leaders``: the fourth families)."""


def hard_sim(seed: int, *, families: int = 3, fencing: bool = True) -> runner.Sim:
    """The simulator of hard run ``seed`` under ``families`` (``run_hard``), not yet run."""
    config, scenario = draw_hard(seed)
    if families < 2:
        return runner.Sim(config, scenario)
    extra = draw_extra(seed, families=families)
    if families < 4:
        return runner.Sim(config, scenario, HardFaults(extra))
    faults = HardLeaderFaults(extra)
    sim = runner.Sim(config, scenario, faults)
    faults.arm(leaders.draw(seed, start_ms=config.warmup_ms,
                            span_ms=sum(s.delay_ms for s in scenario.steps) + 10_000,
                            fencing=fencing))
    return sim


def run_hard(seed: int, *, families: int = 3, fencing: bool = True) -> Outcome:
    """Run hard chaos seed ``seed`` and check it (final state and the event log).

    ``families=1``: the first version of the draw (no clock offsets, no forged reports,
    departures removed by the simulator at lease + margin). ``families=2``: the second
    (the step is told that a vanished pod's process stopped with it). ``families=3``:
    force deletes too, and the step's own rule for vanished pods (``Extra``).
    ``families=4``: the operator runs in fenced leader terms, with stalled leaders, two
    terms' writes interleaved and API restarts (``sim.leaders``); ``fencing=False``
    switches the leader fence off (the negative control).
    """
    sim = hard_sim(seed, families=families, fencing=fencing)
    config = sim.config
    sim.audit = []
    result = sim.run()
    problems = check(result)
    problems += check_log(result.events, last_fault_ms=result.last_fault_ms,
                          delay_ms=config.delay_ms, end_ms=result.end_ms,
                          audit=result.audit, policy=config.policy)
    summary = metrics.run_metrics(result.events)
    if summary.overlaps:
        problems.append(f"event log shows {summary.overlaps} overlaps")
    return Outcome(seed, tuple(problems), summary.converge_ms or 0, len(result.events))


def draw(seed: int, *, pods: int | None = None,
         sessions: bool = False) -> tuple[runner.Config, scenarios.Scenario]:
    """The group, settings and fault schedule of chaos run ``seed``."""
    rng = random.Random(seed)
    size = pods if pods is not None else rng.randint(2, 5)
    delay = rng.choice((0, 3_000, 20_000))
    steps = []
    for _ in range(rng.randint(1, 8)):
        action = rng.choice(_ACTIONS)
        steps.append(scenarios.Step(
            action,
            pod=rng.randrange(size + 1),
            delay_ms=rng.choice((0, 50, 500, 2_000, 10_000)),
            down_ms=rng.choice((1_000, 5_000, 12_000, 30_000)),
            count=rng.randint(1, 2),
            protocols=(
                rng.choice(("eager", "compatible", "compatible")) if action in (A.RESTART,
                                                                                  A.PROTOCOL)
                else ""
            ),
            mid_round=rng.random() < 0.5,
        ))
    scenario = scenarios.Scenario("chaos", tuple(steps), eager_only=rng.random() < 0.1)
    horizon = 30_000 + sum(s.delay_ms for s in steps) + 60_000
    config = runner.Config(
        pods=size,
        connectors=rng.randint(1, 3),
        tasks=rng.randint(0, 4),
        policy=rng.choice(list(model.Policy)),
        protocol=rng.choice((model.Protocol.COMPATIBLE,) * 3 + (model.Protocol.EAGER,)),
        delay_ms=delay,
        seed=seed,
        faults=runner.Faults(
            lose_doc=rng.choice((0.0, 0.1, 0.3)),
            lose_report=rng.choice((0.0, 0.1, 0.3)),
            slow_report=rng.choice((0.0, 0.2)),
            until_ms=horizon,
        ),
        run=f"chaos-{seed}",
        sessions=sessions,
    )
    return config, scenario


def check(result: runner.Result) -> list[str]:
    """Problems with a finished run's final state (beyond the online overlap check)."""
    problems = list(result.violations)
    plan = result.plan
    running = result.running
    seen: dict[str, str] = {}
    for member, resources in sorted(running.items()):
        for resource in resources:
            if resource in seen:
                problems.append(f"end: {resource} runs on {seen[resource]} and {member}")
            seen[resource] = member
    wanted = set(result.configured.connectors) | set(result.configured.tasks)
    if running and set(seen) != wanted:
        missing = sorted(wanted - set(seen))[:5]
        extra = sorted(set(seen) - wanted)[:5]
        problems.append(f"end: not running {missing}, running unconfigured {extra}")
    if plan is None or not running:
        return problems
    for member, resources in running.items():
        part = plan.members.get(member)  # type: ignore[call-overload]
        assigned = set() if part is None else set(part.assigned.connectors) | set(
            part.assigned.tasks)
        if resources != assigned:
            problems.append(f"end: {member} runs {sorted(resources)} but is assigned "
                            f"{sorted(assigned)}")
    parts = [plan.members[m] for m in plan.members if m in running]
    if parts:
        # Cooperative rounds balance connectors and tasks each on their own under both
        # policies (kip415 as Kafka's current assignor); eager deals one pool round-robin.
        if plan.protocol is model.Protocol.COMPATIBLE:
            loads = [[len(p.assigned.connectors) for p in parts],
                     [len(p.assigned.tasks) for p in parts]]
        else:
            loads = [[len(p.assigned) for p in parts]]
        for load in loads:
            if max(load) - min(load) > 1:
                problems.append(f"end: unbalanced {load}")
    return problems


def run_one(seed: int, *, pods: int | None = None, sessions: bool = False) -> Outcome:
    """Run chaos seed ``seed`` and check it (``sessions``: members are real SDK sessions)."""
    config, scenario = draw(seed, pods=pods, sessions=sessions)
    result = runner.simulate(config, scenario)
    problems = check(result)
    summary = metrics.run_metrics(result.events)
    if summary.overlaps:
        problems.append(f"event log shows {summary.overlaps} overlaps")
    return Outcome(seed, tuple(problems), summary.converge_ms or 0, len(result.events))


def run_many(seeds: Sequence[int], *, pods: int | None = None,
             sessions: bool = False) -> list[Outcome]:
    """Run every seed in order."""
    return [run_one(seed, pods=pods, sessions=sessions) for seed in seeds]
