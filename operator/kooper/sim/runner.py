"""The discrete-event drill simulator: the real ``assignor.plan`` and modelled members.

Everything runs on a virtual clock (``sim.clock``) with seeded randomness, so a
run is a pure function of its ``Config``, ``Scenario`` and seed.

The operator runs the real controller step (``control.step``, the same one the
kopf operator and ``kooper replay`` run), debounced, after a report, a departure or
a config change, and at ``plan.next_round_at_ms``; it makes the step's writes in
the order ``Step.writes`` states, as the operator does. An operator
restart restores from what was persisted, exactly as the operator does.

A member applies its newest document after the propagation latency the way
``sdk.session`` does: stop what was revoked (one
batch taking the stop time), start what was assigned (the start time), then
report (the report latency). The member is modelled here rather than driven
through ``sdk.Session`` so that 1,000 pods x 100,000 tasks stay affordable; the
rules are the session's (newest generation only, stops before starts, report
after both, self-fence after the lease duration).
"""

from __future__ import annotations

import dataclasses
import gc
import random
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from kooper.control import adaptive, audit, modelled, state, views
from kooper.control import step as control
from kooper.core import assignor, defaults, ids, model
from kooper.core import events as ev
from kooper.protocol import codec, messages
from kooper.sdk import session as sdk_session
from kooper.sim import clock, scenarios
from kooper.sim import rollout as rollouts

Step = scenarios.Step
A = scenarios.Action


@dataclasses.dataclass(frozen=True, slots=True)
class Span:
    """A uniform latency ``[lo, hi]`` in milliseconds."""

    lo: int
    hi: int

    def draw(self, rng: random.Random) -> int:
        """One sample."""
        return self.lo if self.hi <= self.lo else rng.randint(self.lo, self.hi)


@dataclasses.dataclass(frozen=True, slots=True)
class Latencies:
    """The latency model (milliseconds)."""

    start: Span = Span(200, 800)
    stop: Span = Span(100, 400)
    report: Span = Span(20, 100)
    propagate: Span = Span(50, 300)
    debounce: Span = Span(100, 100)
    restart: Span = Span(8_000, 15_000)
    ready: Span = Span(500, 1_500)
    operator_restart: Span = Span(3_000, 8_000)
    pod_removal: Span = Span(500, 2_000)
    """A graceful stop: from the worker deleting its Lease to the kubelet removing the
    terminating pod (the process exits, the kubelet notices and deletes the pod)."""
    lease_ms: int = 15_000
    skew_ms: int = 5_000
    resync_ms: int = 10_000
    """A member that missed a document or whose report was lost retries after this."""
    stop_timeout_ms: int = 0
    fence_margin_ms: int = 0
    """SDK sessions' timing budget (``Session``): with both 0 they fence at the lease."""


@dataclasses.dataclass(frozen=True, slots=True)
class Faults:
    """Random message faults, active until ``until_ms``."""

    lose_doc: float = 0.0
    lose_report: float = 0.0
    slow_report: float = 0.0
    """Probability that a report takes ``slow_report_ms`` more."""
    slow_report_ms: int = 5_000
    until_ms: int = 0


@dataclasses.dataclass(frozen=True, slots=True)
class Config:
    """One simulated run."""

    pods: int = 6
    connectors: int = 3
    tasks: int = 4
    """Tasks per connector."""
    policy: model.Policy = model.Policy.KOOPER
    protocol: model.Protocol = model.Protocol.COMPATIBLE
    delay_ms: int = defaults.SCHEDULED_REBALANCE_MAX_DELAY_MS
    seed: int = 0
    latencies: Latencies = Latencies()
    faults: Faults = Faults()
    warmup_ms: int = 30_000
    horizon_ms: int = 24 * 3_600_000
    run: str = ""
    group: str = "sim"
    sessions: bool = False
    """Drive members through the real ``kooper.sdk.session.Session`` (slower)."""


@dataclasses.dataclass
class Pod:
    """One pod's process, as the simulator models it."""

    name: ids.WorkerId
    ordinal: int
    token: int
    incarnation: str
    protocols: frozenset[model.Protocol]
    running: set[str] = dataclasses.field(default_factory=set)
    generation: int = -1
    latest: messages.Assignment | None = None
    busy: bool = False
    alive: bool = True
    partitioned: bool = False
    fenced: bool = False
    report_seq: int = 0
    partitions: int = 0
    started_at: int = -1
    session: sdk_session.Session | None = None


@dataclasses.dataclass
class Result:
    """What a run produced: the event log and the safety violations seen."""

    events: list[ev.Event]
    violations: list[str]
    end_ms: int
    plan: model.Plan | None
    running: dict[str, set[str]]
    configured: model.ConnectorsAndTasks
    settings: model.Settings
    last_fault_ms: int
    audit: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    """The operator's audit rows (``control.audit.rows``) of every round it planned (a
    round it died in: marked ``cut``), when the run recorded them (``Sim.audit``);
    empty otherwise."""


ALL = frozenset(model.Protocol)
EAGER_ONLY = frozenset({model.Protocol.EAGER})


class FaultHooks(Protocol):
    """The simulator's extension points: what a run's injected faults may change.

    ``Sim`` calls each at one point of its model; ``NoFaults`` is the run without any.
    A fault implementation (``sim.chaos.HardFaults``, ``sim.leaders.Terms``) is handed
    the ``Sim`` once (``attach``) and may read it and call its model's steps."""

    def attach(self, sim: Sim) -> Mapping[str, Callable[..., None]]:
        """Bind to ``sim`` (before ``run``); returns the clock events the faults schedule,
        by name, with their handlers."""
        ...

    def step(self, step: Step) -> Step:
        """The scenario step to play instead of ``step`` (a kill becomes a force delete)."""
        ...

    def force_delete(self, step: Step) -> ids.WorkerId | None:
        """Play a ``FORCE_DELETE`` step (which the simulator does not model itself); returns
        the pod it touched, as ``Sim`` does for a kill."""
        ...

    def partitioned(self, pod: Pod) -> None:
        """``pod`` was just cut off from the API by a scenario step."""
        ...

    def orphan(self, name: ids.WorkerId, token: int) -> Pod | None:
        """A live process named ``name`` started as ``token`` that is no longer its pod's
        (force-deleted, running on), or None."""
        ...

    def process_ends(self, pod: Pod) -> bool:
        """``pod``'s session ends its process at its deadline; True when the faults saw to
        it (an orphan's process just ends), False to restart it as the simulator does."""
        ...

    def batch(self, pod: Pod, actions: list[sdk_session.Action]) -> None:
        """``pod``'s session is about to run ``actions`` (stops or starts)."""
        ...

    def outgoing_report(self, pod: Pod, member: model.Member) -> model.Member:
        """What the report ``pod`` sends says (a forger claims more than ``member``)."""
        ...

    def report(self, name: ids.WorkerId, token: int) -> bool:
        """A report of ``name`` (as ``token``) reaches its Lease; False: it never lands."""
        ...

    def departing(self, name: ids.WorkerId) -> None:
        """``name``'s pod vanishes or its worker leaves (the operator may drop it next)."""
        ...

    def declare(self, pod: Pod) -> bool:
        """The cut-off ``pod`` is past lease + margin; True when the faults saw to it (the
        operator's own liveness rule), False to remove it as the simulator does."""
        ...

    def inputs(self, inputs: control.Inputs) -> control.Inputs:
        """What the operator reads from the API, given what the simulator models."""
        ...

    def api_unreachable(self) -> bool:
        """Whether the API is down now: the operator's rounds and deadlines wait."""
        ...

    def after_round(self, epoch: int) -> None:
        """A round event of operator process ``epoch`` was handled (planned or not)."""
        ...

    def stalls(self, decided: control.Step, plan: model.Plan,
               writes: tuple[control.Write, ...]) -> bool:
        """Whether the operator stalls part-way through this round's ``writes`` (the faults
        then made what it made); False to go on as the simulator does."""
        ...

    def lands(self, write: control.Write) -> bool:
        """Whether the operator's ``write`` lands (a fenced term's stale write does not)."""
        ...

    def new_term(self) -> bool:
        """A new operator process is about to restore; False: it waits (the faults start
        it again later). The faults may act first (a new leader's fence)."""
        ...

    def order(self, writes: tuple[control.Write, ...]) -> tuple[control.Write, ...]:
        """The order the operator makes a round's ``writes`` in (``Step.writes``)."""
        ...

    def crash_prefix(self, count: int) -> int | None:
        """How many of ``count`` writes an operator dying mid-sequence made; None: drawn."""
        ...

    def document(self, message: messages.Assignment) -> messages.Assignment:
        """The document the operator writes for ``message``."""
        ...


class NoFaults:
    """The run without injected faults: every ``FaultHooks`` point as the simulator models
    it. Fault implementations extend it (each calls ``super()`` where it adds to another
    implementation's effect)."""

    sim: Sim

    def attach(self, sim: Sim) -> Mapping[str, Callable[..., None]]:
        """See ``FaultHooks``."""
        self.sim = sim
        return {}

    def step(self, step: Step) -> Step:
        """See ``FaultHooks``."""
        return step

    def force_delete(self, step: Step) -> ids.WorkerId | None:
        """See ``FaultHooks``."""
        raise AssertionError(step.action)

    def partitioned(self, pod: Pod) -> None:
        """See ``FaultHooks``."""

    def orphan(self, name: ids.WorkerId, token: int) -> Pod | None:
        """See ``FaultHooks``."""
        return None

    def process_ends(self, pod: Pod) -> bool:
        """See ``FaultHooks``."""
        return False

    def batch(self, pod: Pod, actions: list[sdk_session.Action]) -> None:
        """See ``FaultHooks``."""

    def outgoing_report(self, pod: Pod, member: model.Member) -> model.Member:
        """See ``FaultHooks``."""
        return member

    def report(self, name: ids.WorkerId, token: int) -> bool:
        """See ``FaultHooks``."""
        return True

    def departing(self, name: ids.WorkerId) -> None:
        """See ``FaultHooks``."""

    def declare(self, pod: Pod) -> bool:
        """See ``FaultHooks``."""
        return False

    def inputs(self, inputs: control.Inputs) -> control.Inputs:
        """See ``FaultHooks``."""
        return inputs

    def api_unreachable(self) -> bool:
        """See ``FaultHooks``."""
        return False

    def after_round(self, epoch: int) -> None:
        """See ``FaultHooks``."""

    def stalls(self, decided: control.Step, plan: model.Plan,
               writes: tuple[control.Write, ...]) -> bool:
        """See ``FaultHooks``."""
        return False

    def lands(self, write: control.Write) -> bool:
        """See ``FaultHooks``."""
        return True

    def new_term(self) -> bool:
        """See ``FaultHooks``."""
        return True

    def order(self, writes: tuple[control.Write, ...]) -> tuple[control.Write, ...]:
        """See ``FaultHooks``."""
        return writes

    def crash_prefix(self, count: int) -> int | None:
        """See ``FaultHooks``."""
        return None

    def document(self, message: messages.Assignment) -> messages.Assignment:
        """See ``FaultHooks``."""
        return message


class Sim:
    """One run. ``run()`` drives the clock until nothing is left to happen.

    ``hooks`` are the run's injected faults (``FaultHooks``: its extension points, all
    named there); none by default."""

    gone_means_stopped = True
    """A pod that vanishes stops its process with it (``control.Inputs``): so do this
    simulator's crashes and kills."""

    def __init__(self, config: Config, scenario: scenarios.Scenario,
                 hooks: FaultHooks | None = None) -> None:
        self.config = config
        self.scenario = scenario
        self.rng = random.Random(config.seed)
        self.lat = config.latencies
        self.clock = clock.Clock()
        self.run_id = config.run or (
            f"{scenario.name}-{config.protocol}-{config.policy}-{config.seed}"
        )
        self.settings = model.Settings(config.protocol, config.policy, config.delay_ms)
        self.connectors = {f"c{i:02d}": config.tasks for i in range(config.connectors)}
        self.configured = model.Snapshot(self.connectors, {}).configured()
        self.pods: dict[ids.WorkerId, Pod] = {}
        self.tokens = 0
        # The operator's view and memory.
        self.visible: dict[ids.WorkerId, model.Member] = {}
        self.visible_epochs: dict[ids.WorkerId, int] = {}
        """member -> the membership epoch its visible report names (SDK sessions)."""
        self.seen_seq: dict[ids.WorkerId, tuple[int, int]] = {}
        self.permanent: set[ids.WorkerId] = set()
        self.memory = control.Memory()
        self.caches = control.Caches()
        self.modelled = modelled.Members(config.group)
        self.counts = modelled.connectors(config.group, self.connectors)
        self.persisted: model.PlanState = model.PlanState()
        """The planner state of the last WorkerGroup status write."""
        self.persisted_owners: Mapping[str, control.Owner] = {}
        self.persisted_member_epoch = 0
        self.persisted_epoch_floor = 0
        self.persisted_learned = adaptive.Learned()
        self.persisted_terminating: frozenset[tuple[str, str]] = frozenset()
        self.written: dict[ids.WorkerId, messages.Assignment] = {}
        """member -> the document in its ConfigMap."""
        self.steps: list[tuple[control.Inputs, control.Memory, int, control.Step]] | None = None
        """When a list: every planned step's (inputs, memory, now_ms, Step) (tests)."""
        self.audit: list[dict[str, Any]] | None = None
        """When a list: the audit rows the operator writes after each round whose writes
        it completed (as ``shell.rounds`` does), and those of a round cut short by a
        crash, which the real operator never writes, marked ``cut`` (``_record_audit``)."""
        self.rejoin_wait = False
        self.operator_up = True
        self.operator_epoch = 0
        self.round_pending = False
        self.deadline_at: int | None = None
        self.crash_mid_round = False
        self.last_plan: model.Plan | None = None
        self.cache = assignor.Cache()
        # The truth.
        self.owner: dict[str, ids.WorkerId] = {}
        self.events: list[ev.Event] = []
        self.violations: list[str] = []
        self.step_index = 0
        self.waiting_ready: ids.WorkerId | None = None
        self.last_fault_ms = 0
        self.progress: Callable[[float], None] | None = None
        self.handlers: dict[str, Callable[..., None]] = {
            "up": self._up, "ready": self._ready, "doc": self._doc, "stopped": self._stopped,
            "started": self._started, "report": self._report, "gone": self._gone,
            "round": self._round, "deadline": self._deadline, "step": self._step,
            "operator_up": self._operator_up, "fence": self._fence, "declare": self._declare,
            "heal": self._heal, "reread": self._reread, "batch": self._batch,
            "exit_check": self._exit_check,
            "left": self._left, "pod_gone": self._pod_gone, "sigterm": self._sigterm,
        }
        self.roller: rollouts.Controller | None = None
        """The workload's controller when the scenario models one (``sim.rollout``)."""
        self.sigterm_at: dict[ids.WorkerId, int] = {}
        if scenario.rollout is not None:
            self.roller = rollouts.Controller(
                scenario.rollout, group=config.group, replicas=config.pods,
                actions=rollouts.Actions(terminate=self._terminate, create=self._create))
        self.hooks: FaultHooks = hooks if hooks is not None else NoFaults()
        self.handlers.update(self.hooks.attach(self))

    # -- recording ------------------------------------------------------------------

    def _emit(self, kind: ev.Kind, member: str = "", resource: str = "",
              generation: int = -1, epoch: int = -1, *, late_ms: int = 0) -> None:
        self.events.append(ev.Event(
            self.clock.now_ms + late_ms, self.run_id, self.config.group, member, resource, kind,
            generation, epoch, str(self.settings.protocol), str(self.settings.policy),
        ))

    # -- driving -------------------------------------------------------------------------

    def run(self, progress: Callable[[float], None] | None = None) -> Result:
        """Form the group, play the scenario, run until quiet; return the log.

        ``progress`` is called with the fraction of scenario steps played so far.
        """
        self.progress = progress
        for ordinal in range(self.config.pods):
            name = self.roller.initial_name(ordinal) if self.roller is not None else None
            if self.roller is not None and name is not None:
                self.roller.add(name)
            self._spawn(ordinal, EAGER_ONLY if self.scenario.eager_only else ALL, 0, name=name)
        if self.scenario.steps:
            self.clock.at(self.config.warmup_ms, "step")
        pop = self.clock.pop
        handlers = self.handlers
        horizon = self.config.horizon_ms
        # Modelled members make next to no reference cycles, while a big run keeps
        # hundreds of thousands of objects alive (the event log, 100,000-task sets):
        # the cyclic collector's full passes over them were ~15% of a 1,000-pod roll.
        # Pause it for the run (SDK sessions do make cycles: keep it on for them).
        pause_gc = gc.isenabled() and not self.config.sessions
        if pause_gc:
            gc.disable()
        try:
            while (event := pop()) is not None:
                if self.clock.now_ms > horizon:
                    self.violations.append(f"no quiescence before {horizon} ms")
                    break
                handlers[event[0]](*event[1:])
        finally:
            if pause_gc:
                gc.enable()
        return Result(
            self.events, self.violations, self.clock.now_ms, self.last_plan,
            {str(p.name): set(p.running) for p in self.pods.values() if p.alive},
            self.configured, self.settings, self.last_fault_ms,
            self.audit if self.audit is not None else [],
        )

    def _spawn(self, ordinal: int, protocols: frozenset[model.Protocol], after_ms: int, *,
               name: ids.WorkerId | None = None) -> None:
        self.tokens += 1
        name = name if name is not None else ids.WorkerId(f"{self.config.group}-{ordinal}")
        if self.roller is not None:
            facts = self.roller.pod_facts(name)
            self.modelled.describe(name, (facts.owner_kind, facts.owner_name), facts.labels)
        pod = Pod(name, ordinal, self.tokens, f"i{self.tokens}", protocols, alive=False)
        self.pods[name] = pod
        self.clock.after(after_ms, "up", name, pod.token)

    def _pod(self, name: ids.WorkerId, token: int) -> Pod | None:
        pod = self.pods.get(name)
        if pod is not None and pod.token == token and pod.alive:
            return pod
        return self.hooks.orphan(name, token)

    # -- the scenario ----------------------------------------------------------------------

    def _step(self) -> None:
        steps = self.scenario.steps
        step = steps[self.step_index]
        self.step_index += 1
        self.last_fault_ms = self.clock.now_ms
        touched = self._apply_step(step)
        if self.progress is not None:
            self.progress(self.step_index / len(steps))
        if self.step_index < len(steps):
            nxt = steps[self.step_index]
            if nxt.wait_ready and touched is not None:
                self.waiting_ready = touched
            else:
                self.clock.after(nxt.delay_ms, "step")

    def _apply_step(self, step: Step) -> ids.WorkerId | None:
        """Play ``step`` (as the faults have it: ``FaultHooks.step``); the pod it touched."""
        return self._play(self.hooks.step(step))

    def _play(self, step: Step) -> ids.WorkerId | None:
        """Play ``step`` as the simulator models it; returns the pod it touched."""
        name = ids.WorkerId(f"{self.config.group}-{step.pod}")
        pod = self.pods.get(name)
        down = step.down_ms if step.down_ms is not None else self.lat.restart.draw(self.rng)
        if step.action in (A.RESTART, A.KILL):
            if pod is None or name in self.permanent:
                return None
            protocols = pod.protocols
            if step.protocols:
                protocols = ALL if step.protocols == "compatible" else EAGER_ONLY
            if pod.alive:
                self._depart(pod, graceful=step.action is A.RESTART)
            else:
                pod.token = -1  # still coming up: that start is superseded
            self._spawn(step.pod, protocols, down)
            return name
        if step.action is A.SCALE_UP:
            top = max((p.ordinal for p in self.pods.values()), default=-1)
            for ordinal in range(top + 1, top + 1 + step.count):
                self.permanent.discard(ids.WorkerId(f"{self.config.group}-{ordinal}"))
                self._spawn(ordinal, ALL, self.lat.ready.draw(self.rng))
            return None
        if step.action is A.SCALE_DOWN:
            live = sorted((p for p in self.pods.values() if p.name not in self.permanent),
                          key=lambda p: p.ordinal)
            for victim in live[len(live) - min(step.count, len(live) - 1):]:
                self.permanent.add(victim.name)
                if victim.alive:
                    self._depart(victim)
                victim.token = -1
            return None
        if step.action is A.OPERATOR_RESTART:
            if step.mid_round:
                self.crash_mid_round = True
                self._trigger()
            else:
                self._operator_down()
            return None
        if step.action is A.PROTOCOL:
            self.settings = dataclasses.replace(
                self.settings, protocol=model.Protocol(step.protocols)
            )
            self._trigger()
            return None
        if step.action is A.ROLLOUT:
            if self.roller is not None:
                self.roller.start()
            return None
        if step.action is A.PARTITION:
            if pod is None or not pod.alive or pod.partitioned:
                return None
            pod.partitioned = True
            pod.partitions += 1
            cut = (name, pod.token, pod.partitions)
            if pod.session is not None:
                # Its last renewal went through just before the cut; the session fences
                # by its timing budget and asks to end the process if stops outlast it.
                pod.session.lease_renewed(self.clock.now_ms)
                self.clock.after(pod.session.fence_after_ms, "fence", *cut)
                if pod.session.deadline_ms is not None:
                    self.clock.after(pod.session.deadline_ms, "exit_check", *cut)
            else:
                self.clock.after(self.lat.lease_ms, "fence", *cut)
            self.clock.after(self.lat.lease_ms + self.lat.skew_ms, "declare", *cut)
            self.clock.after(down, "heal", *cut)
            self.hooks.partitioned(pod)
            return None
        if step.action is A.FORCE_DELETE:
            return self.hooks.force_delete(step)
        raise AssertionError(step.action)

    def _ready(self, name: ids.WorkerId, token: int) -> None:
        if self.roller is not None and self._pod(name, token) is not None:
            self.roller.ready(name)
        if self.waiting_ready == name and self._pod(name, token) is not None:
            self.waiting_ready = None
            self.clock.after(self.scenario.steps[self.step_index].delay_ms, "step")

    # -- pods ---------------------------------------------------------------------------------

    def _up(self, name: ids.WorkerId, token: int) -> None:
        pod = self.pods.get(name)
        if pod is None or pod.token != token:
            return
        pod.alive = True
        self._emit(ev.Kind.JOIN, name)
        if self.config.sessions:
            pod.session = sdk_session.Session(
                member_name=name, incarnation=pod.incarnation, protocols=pod.protocols,
                lease_duration_ms=self.lat.lease_ms, stop_timeout_ms=self.lat.stop_timeout_ms,
                fence_margin_ms=self.lat.fence_margin_ms)
            pod.session.join(self.clock.now_ms)
            self._pump(pod)
        else:
            self._send_report(pod)
        self.clock.after(self.lat.ready.draw(self.rng), "ready", name, token)

    def _depart(self, pod: Pod, *, graceful: bool = False) -> None:
        """The process is gone: everything it ran stops at once.

        ``graceful`` is a kubelet-driven stop (a rolling restart): the pod gets a
        ``deletionTimestamp`` first, the worker leaves (``Worker.leave``: stops
        everything, deletes its Lease), then the kubelet removes the pod. Otherwise
        (a crash, a kill) the pod and its Lease just vanish.
        """
        if graceful:
            self.modelled.terminating(pod.name)
            self._trigger()
        late = self._stop_all(pod)
        pod.alive = False
        self._emit(ev.Kind.LEAVE, pod.name, late_ms=late)
        self.clock.after(self.lat.report.draw(self.rng), "left" if graceful else "gone",
                         pod.name, pod.incarnation)

    def _stop_all(self, pod: Pod) -> int:
        """Stop everything at once; returns how late (ms) the stops were recorded."""
        # A start that completed this very millisecond is recorded 1 ms before its stop:
        # the event log orders stops before starts within a millisecond.
        late = 1 if pod.started_at == self.clock.now_ms else 0
        for resource in sorted(pod.running):
            self._emit(ev.Kind.STOP, pod.name, resource, pod.generation, late_ms=late)
            if self.owner.get(resource) == pod.name:
                del self.owner[resource]
        pod.running.clear()
        return late

    def _doc(self, name: ids.WorkerId, token: int, doc: messages.Assignment) -> None:
        pod = self._pod(name, token)
        if pod is None or pod.partitioned:
            return
        if pod.session is not None:
            # The document names the incarnation it was planned for; the session
            # itself ignores one meant for a previous life of this pod.
            pod.session.receive_assignment(doc)
            self._pump(pod)
            return
        if doc.incarnation and doc.incarnation != pod.incarnation:
            return  # a document planned for a previous life of this pod is not ours
        newest = pod.latest.generation if pod.latest is not None else -1
        if doc.generation <= max(newest, pod.generation):
            return
        pod.latest = doc
        if not pod.busy:
            self._apply(pod)

    def _apply(self, pod: Pod) -> None:
        doc = pod.latest
        assert doc is not None
        pod.busy = True
        to_stop = pod.running.difference(doc.assigned.connectors, doc.assigned.tasks)
        if to_stop:
            self.clock.after(self.lat.stop.draw(self.rng), "stopped", pod.name, pod.token, doc,
                             to_stop)
        else:
            self._start_phase(pod, doc)

    def _stopped(self, name: ids.WorkerId, token: int, doc: messages.Assignment,
                 to_stop: set[str]) -> None:
        pod = self._pod(name, token)
        if pod is None or pod.fenced:
            return
        for resource in sorted(to_stop & pod.running):
            self._emit(ev.Kind.STOP, name, resource, doc.generation)
            if self.owner.get(resource) == name:
                del self.owner[resource]
        pod.running -= to_stop
        self._start_phase(pod, doc)

    def _start_phase(self, pod: Pod, doc: messages.Assignment) -> None:
        to_start = set(doc.assigned.connectors).union(doc.assigned.tasks) - pod.running
        if to_start:
            self.clock.after(self.lat.start.draw(self.rng), "started", pod.name, pod.token, doc,
                             to_start)
        else:
            self._applied(pod, doc)

    def _started(self, name: ids.WorkerId, token: int, doc: messages.Assignment,
                 to_start: set[str]) -> None:
        pod = self._pod(name, token)
        if pod is None or pod.fenced:
            return
        epochs = self.memory.persisted.state.epochs
        for resource in sorted(to_start):
            holder = self.owner.get(resource)
            if holder is not None and holder != name:
                self.violations.append(
                    f"t={self.clock.now_ms}: {resource} started on {name} while {holder} runs it")
            self.owner[resource] = name
            self._emit(ev.Kind.START, name, resource, doc.generation, epochs.get(resource, -1))
        pod.running |= to_start
        pod.started_at = self.clock.now_ms
        self._applied(pod, doc)

    def _applied(self, pod: Pod, doc: messages.Assignment) -> None:
        pod.generation = doc.generation
        pod.busy = False
        self._send_report(pod)
        if pod.latest is not None and pod.latest.generation > pod.generation:
            self._apply(pod)

    # -- members driven by the real SDK session ------------------------------------------------

    def _pump(self, pod: Pod) -> None:
        """Run the session's next batches: reports at once, stops/starts after their time."""
        session = pod.session
        assert session is not None
        if pod.busy:
            return
        while actions := session.next_actions():
            first = actions[0]
            if isinstance(first, sdk_session.Stop | sdk_session.Start):
                pod.busy = True
                span = self.lat.stop if isinstance(first, sdk_session.Stop) else self.lat.start
                self.clock.after(span.draw(self.rng), "batch", pod.name, pod.token, actions)
                return
            for action in actions:
                if isinstance(action, sdk_session.WriteReport):
                    if pod.partitioned:
                        session.done(action, error="the API is unreachable")
                        return  # retried after lease_renewed
                    report = action.report
                    self._send_report(pod, model.Member(
                        pod.name, report.owned, report.generation, report.protocols,
                        report.incarnation, fenced=report.fenced, rejoins=report.rejoins),
                        report.member_epoch)
                session.done(action)

    def _batch(self, name: ids.WorkerId, token: int, actions: list[sdk_session.Action]) -> None:
        pod = self._pod(name, token)
        if pod is None or pod.session is None:
            return
        self.hooks.batch(pod, actions)
        for action in actions:
            if isinstance(action, sdk_session.Stop):
                self._emit(ev.Kind.STOP, name, action.resource, action.generation)
                if self.owner.get(action.resource) == name:
                    del self.owner[action.resource]
                pod.running.discard(action.resource)
            elif isinstance(action, sdk_session.Start):
                holder = self.owner.get(action.resource)
                if holder is not None and holder != name:
                    self.violations.append(f"t={self.clock.now_ms}: {action.resource} started "
                                           f"on {name} while {holder} runs it")
                self.owner[action.resource] = name
                self._emit(ev.Kind.START, name, action.resource, action.generation,
                           action.epoch)  # the epoch its document gave it
                pod.running.add(action.resource)
                pod.started_at = self.clock.now_ms
            pod.session.done(action)
        pod.generation = pod.session.applied_generation
        pod.busy = False
        self._pump(pod)

    def _send_report(self, pod: Pod, member: model.Member | None = None,
                     member_epoch: int = 0) -> None:
        if pod.partitioned:
            return
        if member is not None:
            member = self.hooks.outgoing_report(pod, member)
        pod.report_seq += 1
        if member is None:
            running = pod.running
            owned = model.ConnectorsAndTasks(
                frozenset(r for r in running if r in self.configured.connectors),
                frozenset(r for r in running if r not in self.configured.connectors),
            )
            member = model.Member(pod.name, owned, pod.generation, pod.protocols,
                                  pod.incarnation)
        delay = self.lat.report.draw(self.rng)
        faults = self.config.faults
        if self.clock.now_ms < faults.until_ms:
            roll = self.rng.random()
            if roll < faults.lose_report:
                delay += self.lat.resync_ms  # lost; the next Lease renewal carries it
            elif roll < faults.lose_report + faults.slow_report:
                delay += faults.slow_report_ms
        self.clock.after(delay, "report", pod.name, pod.token, pod.report_seq, member,
                         member_epoch)

    def _report(self, name: ids.WorkerId, token: int, seq: int, member: model.Member,
                member_epoch: int) -> None:
        if not self.hooks.report(name, token):
            return
        pod = self._pod(name, token)
        if pod is None:
            return  # (a report written before a partition still lands)
        if self.seen_seq.get(name, (0, 0)) >= (token, seq):
            return  # an older report arriving late: the Lease already holds a newer one
        self.seen_seq[name] = (token, seq)
        self.visible[name] = member
        self.modelled.update(member, member_epoch)
        self.visible_epochs[name] = member_epoch
        self._trigger()

    def _gone(self, name: ids.WorkerId, incarnation: str) -> None:
        self.hooks.departing(name)
        seen = self.visible.get(name)
        if seen is not None and seen.incarnation == incarnation:
            del self.visible[name]
            self.visible_epochs.pop(name, None)
            self.modelled.remove(name)
            self._trigger()

    def _left(self, name: ids.WorkerId, incarnation: str) -> None:
        """A graceful leave: the Lease is deleted; the kubelet removes the pod after."""
        self.hooks.departing(name)
        seen = self.visible.get(name)
        if seen is not None and seen.incarnation == incarnation:
            del self.visible[name]
            self.modelled.leave(name)
            self._trigger()
        self.clock.after(self.lat.pod_removal.draw(self.rng), "pod_gone", name,
                         f"{name}/{incarnation}")

    def _pod_gone(self, name: ids.WorkerId, uid: str) -> None:
        self.modelled.pod_gone(name, uid)
        self._trigger()
        if self.roller is not None:
            self.roller.gone(name)

    # -- a workload's controller (``sim.rollout``) ---------------------------------------------

    def _terminate(self, name: ids.WorkerId, grace_ms: int) -> None:
        """The controller deletes pod ``name``: deletionTimestamp, SIGTERM, grace period.

        The worker stops what it runs (the stop latency) and leaves; one still stopping
        when the grace period ends is killed, and its Lease goes with the pod.
        """
        pod = self.pods.get(name)
        if pod is None or not pod.alive:
            if pod is not None:
                pod.token = -1  # still coming up: that start is superseded
            self.clock.after(0, "pod_gone", name, f"{name}/pending")
            return
        self.sigterm_at[name] = self.clock.now_ms
        self.modelled.terminating(pod.name)
        self._trigger()
        stopping = self.lat.stop.draw(self.rng)
        self.clock.after(min(stopping, grace_ms), "sigterm", name, pod.token,
                         stopping <= grace_ms)

    def _sigterm(self, name: ids.WorkerId, token: int, graceful: bool) -> None:
        pod = self._pod(name, token)
        if pod is None:
            return
        late = self._stop_all(pod)
        pod.alive = False
        self._emit(ev.Kind.LEAVE, pod.name, late_ms=late)
        if graceful:
            self.clock.after(self.lat.report.draw(self.rng), "left", pod.name, pod.incarnation)
        else:  # killed at the grace period: the pod is removed, its Lease collected with it
            removal = self.lat.pod_removal.draw(self.rng)
            self.clock.after(removal, "gone", pod.name, pod.incarnation)
            self.clock.after(removal, "pod_gone", pod.name, f"{pod.name}/{pod.incarnation}")

    def _create(self, name: ids.WorkerId, number: int) -> None:
        """The controller creates pod ``name``; its worker joins after the restart time.

        A StatefulSet pod re-created under its name counts its restart time from its
        predecessor's SIGTERM (the restart spans the whole replacement)."""
        restart = self.lat.restart.draw(self.rng)
        since = self.sigterm_at.pop(name, None)
        after = restart if since is None else max(0, since + restart - self.clock.now_ms)
        protocols = self.pods[name].protocols if name in self.pods else ALL
        self._spawn(number, protocols, after, name=name)
        self.modelled.pending(name)
        self._trigger()

    # -- partitions ---------------------------------------------------------------------------

    def _cut(self, name: ids.WorkerId, token: int, cut: int) -> Pod | None:
        pod = self._pod(name, token)
        return pod if pod is not None and pod.partitioned and pod.partitions == cut else None

    def _fence(self, name: ids.WorkerId, token: int, cut: int) -> None:
        pod = self._cut(name, token, cut)
        if pod is not None and pod.session is not None:
            pod.session.tick(self.clock.now_ms)  # the session fences itself
            pod.fenced = True
            self._pump(pod)
        elif pod is not None and not pod.fenced:
            pod.fenced = True
            self._stop_all(pod)

    def _exiting(self, name: ids.WorkerId, token: int, cut: int) -> Pod | None:
        """The pod whose session's deadline has come with a stop still running (its process
        ends), else None (a session that needs nothing more is pumped instead)."""
        pod = self._cut(name, token, cut)
        if pod is None or pod.session is None:
            return None
        pod.session.tick(self.clock.now_ms)
        if pod.session.exit_reason is None:
            self._pump(pod)
            return None
        return pod

    def _exit_check(self, name: ids.WorkerId, token: int, cut: int) -> None:
        """The session's deadline: a stop still running ends the process (it restarts)."""
        pod = self._exiting(name, token, cut)
        if pod is None or self.hooks.process_ends(pod):
            return
        protocols = pod.protocols
        self._depart(pod)
        self._spawn(pod.ordinal, protocols, self.lat.restart.draw(self.rng), name=pod.name)

    def _declare(self, name: ids.WorkerId, token: int, cut: int) -> None:
        pod = self._cut(name, token, cut)
        if pod is not None and not self.hooks.declare(pod):
            self._gone(name, pod.incarnation)

    def _heal(self, name: ids.WorkerId, token: int, cut: int) -> None:
        pod = self._cut(name, token, cut)
        if pod is None:
            return
        if pod.session is not None:
            # The session rejoins by itself once its Lease is renewed.
            pod.partitioned = False
            pod.fenced = False
            pod.session.lease_renewed(self.clock.now_ms)
            # The renewal writes the Lease, and the Lease carries the session's report.
            report = pod.session.report()
            self._send_report(pod, model.Member(
                pod.name, report.owned, report.generation, report.protocols,
                report.incarnation, fenced=report.fenced, rejoins=report.rejoins),
                report.member_epoch)
            self._pump(pod)
            self._reread(name, token)
            return
        if pod.fenced:
            # Fenced: the process restarts its membership as a new incarnation.
            self._emit(ev.Kind.LEAVE, name)  # its stops were recorded at the fence
            pod.alive = False
            self._spawn(pod.ordinal, pod.protocols, 0, name=pod.name)
            return
        pod.partitioned = False
        self._send_report(pod)
        self._reread(name, token)

    def _reread(self, name: ids.WorkerId, token: int) -> None:
        written = self.written.get(name)
        if written is not None:
            self._doc(name, token, written)

    # -- the operator ---------------------------------------------------------------------------

    def _trigger(self) -> None:
        if self.operator_up and not self.round_pending:
            self.round_pending = True
            self.clock.after(self.lat.debounce.draw(self.rng), "round", self.operator_epoch)

    def _deadline(self, epoch: int) -> None:
        if epoch == self.operator_epoch and self.deadline_at == self.clock.now_ms:
            self.deadline_at = None
            if not self.hooks.api_unreachable():
                self._trigger()  # (else the round the API's return runs does its work)

    def _round(self, epoch: int) -> None:
        if not self.hooks.api_unreachable():
            self._plan_round(epoch)
        self.hooks.after_round(epoch)

    def _plan_round(self, epoch: int) -> None:
        if epoch != self.operator_epoch or not self.operator_up:
            return
        self.round_pending = False
        if self.rejoin_wait:
            # A new KIP-415 leader plans only once every member rejoined (JoinGroup's
            # barrier): each has reported applying the last document written to it.
            for name, member in self.visible.items():
                written = self.written.get(name)
                if (written is not None and written.incarnation == member.incarnation
                        and member.generation < written.generation
                        and not (written.member_epoch and (
                            written.rejoins != member.rejoins
                            or (member.fenced
                                and written.member_epoch <= self.visible_epochs.get(name, 0))))):
                    # (A member that fenced itself since its last document was issued, or
                    # in that document's epoch, ignores it: it rejoins with the new epoch
                    # the next round gives it.)
                    return  # the next report or departure triggers the round again
            self.rejoin_wait = False
        inputs = self._inputs()
        memory = self.memory
        decided = control.step(inputs, memory, now_ms=self.clock.now_ms, caches=self.caches)
        self.memory = decided.memory
        plan = decided.plan
        if plan is None:
            return  # nothing changed since the last round
        if self.steps is not None:
            self.steps.append((inputs, memory, self.clock.now_ms, decided))
        self.last_plan = plan
        self._emit(ev.Kind.ROUND, generation=plan.state.generation)
        writes = self._ordered(decided)
        if self._cut_short(decided, plan, writes):
            return
        for write in writes:
            self._execute(write)
        self._record_audit(decided, plan)
        if plan.next_round_at_ms is not None and plan.next_round_at_ms != self.deadline_at:
            self.deadline_at = plan.next_round_at_ms
            self.clock.at(plan.next_round_at_ms, "deadline", self.operator_epoch)

    def _cut_short(self, decided: control.Step, plan: model.Plan,
                   writes: tuple[control.Write, ...]) -> bool:
        """Whether the operator stops part-way through the round's ``writes`` (it dies after
        a prefix of them: ``crash_mid_round``, or as the faults stall it); it made that
        prefix if so."""
        if self.hooks.stalls(decided, plan, writes):
            return True
        if not self.crash_mid_round:
            return False
        self.crash_mid_round = False
        done = writes[: self._crash_prefix(len(writes))]
        for write in done:
            self._execute(write)
        self._record_audit(decided, plan, cut=True, persisted=any(
            isinstance(w, control.WriteStatus) and w.status is decided.status for w in done))
        self._operator_down()
        return True

    def _record_audit(self, decided: control.Step, plan: model.Plan, *,
                      cut: bool = False, persisted: bool = False) -> None:
        """The round's audit rows (when recorded). ``cut``: the operator died part-way
        through its writes, so the real one wrote none; they are kept, marked ``cut``,
        because workers may act on the documents it did write (an eager round ends
        every wait); ``persisted`` when its status was written first (a departure
        whose work waits: ``Step.epochs_first``), so its promises were kept."""
        if self.audit is None:
            return
        rows = audit.rows(
            previous=decided.previous or model.PlanState(), plan=plan,
            group=self.config.group, policy=str(self.settings.policy), run=self.run_id,
            now_ms=self.clock.now_ms, snapshot=decided.snapshot)
        for row in rows:
            if cut:
                row["cut"] = True
                if persisted:
                    row["persisted"] = True
            self.audit.append(row)

    def _ordered(self, decided: control.Step) -> tuple[control.Write, ...]:
        """The step's writes in the order they are made: the step's own (``FaultHooks.order``)."""
        return self.hooks.order(decided.writes)

    def _crash_prefix(self, count: int) -> int:
        """How many of a step's ``count`` writes an operator dying mid-sequence made."""
        made = self.hooks.crash_prefix(count)
        return self.rng.randint(0, count - 1) if made is None else made  # never the status

    def _execute(self, write: control.Write) -> None:
        """One write of a step (``Step.writes`` gives the order), if it lands."""
        if self.hooks.lands(write):
            self._land(write)

    def _land(self, write: control.Write) -> None:
        """A write that landed: the API holds it."""
        if isinstance(write, control.DeleteConfigMap):
            self.written.pop(write.member, None)
        elif isinstance(write, control.WriteConfigMap):
            self._write(write.assignment)
        else:
            self.persisted = write.status.state
            self.persisted_owners = write.status.owners
            self.persisted_member_epoch = write.status.member_epoch
            self.persisted_epoch_floor = write.status.epoch_floor
            self.persisted_learned = write.status.learned
            self.persisted_terminating = write.status.terminating

    def _inputs(self) -> control.Inputs:
        """What the operator would read from the API now."""
        pods, leases = self.modelled.current()
        inputs = control.Inputs(
            group=modelled.group(self.config.group, self.settings), pods=pods, leases=leases,
            connectors=self.counts, gone_means_stopped=self.gone_means_stopped)
        owners = {owner: control.OwnerFacts(exists=ids.WorkerId(owner[1]) not in self.permanent)
                  for owner in control.owners_to_read(inputs, self.memory)}
        if self.roller is not None:
            owners = {owner: control.OwnerFacts(True, self.roller.replicas_of(owner))
                      for owner in owners}
            return self.hooks.inputs(
                dataclasses.replace(inputs, owners=owners, rollouts=self.roller.facts()))
        return self.hooks.inputs(dataclasses.replace(inputs, owners=owners) if owners else inputs)

    def _write(self, message: messages.Assignment) -> None:
        message = self.hooks.document(message)
        name = ids.WorkerId(message.member)
        self.written[name] = message
        pod = self.pods.get(name)
        if pod is None or not pod.alive:
            return
        faults = self.config.faults
        if self.clock.now_ms < faults.until_ms and self.rng.random() < faults.lose_doc:
            # The member misses this update; a newer document or its resync supersedes it.
            self.clock.after(self.lat.resync_ms, "reread", name, pod.token)
            return
        self.clock.after(self.lat.propagate.draw(self.rng), "doc", name, pod.token, message)

    def _operator_down(self) -> None:
        self._suspend()
        self.clock.after(self.lat.operator_restart.draw(self.rng), "operator_up")

    def _suspend(self) -> None:
        """The operator process plans nothing more (dead, frozen, or cut off from the API
        past its leader Lease)."""
        self.operator_up = False
        self.operator_epoch += 1
        self.round_pending = False
        self.deadline_at = None

    def _operator_up(self) -> None:
        """A new operator process: it knows only what the API holds."""
        if not self.hooks.new_term():
            return
        self.operator_up = True
        status = {"state": state.encode(self.persisted, owners=self.persisted_owners,
                                        member_epoch=self.persisted_member_epoch,
                                        epoch_floor=self.persisted_epoch_floor,
                                        learned=self.persisted_learned,
                                        terminating=self.persisted_terminating)}
        group = modelled.group(self.config.group, self.settings, status=status)
        configmaps = {str(name): self._configmap(message)
                      for name, message in self.written.items()}
        self.memory = control.restored(group, configmaps)
        self.caches = control.Caches()
        if self.settings.policy is model.Policy.KIP415:
            # Kafka's new leader: only the delay survives, and it waits for every member.
            self.memory = self.memory.replace(state=assignor.forget(self.memory.persisted.state))
            self.rejoin_wait = True
        if self.memory.persisted.state.delay is not None:
            self.deadline_at = self.memory.persisted.state.delay.deadline_ms
            self.clock.at(self.deadline_at, "deadline", self.operator_epoch)
        self._trigger()

    def _configmap(self, message: messages.Assignment) -> views.ConfigMapView:
        return views.ConfigMapView(
            namespace=modelled.NAMESPACE, name=views.configmap_name(message.member),
            group=self.config.group, member=message.member, resource_version="",
            text=codec.encode_assignment(message))


def simulate(config: Config, scenario: scenarios.Scenario,
             progress: Callable[[float], None] | None = None) -> Result:
    """Run one drill."""
    return Sim(config, scenario).run(progress)
