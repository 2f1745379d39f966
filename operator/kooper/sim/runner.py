"""The discrete-event drill simulator: the real ``assignor.plan`` and modelled members.

Everything runs on a virtual clock (``sim.clock``) with seeded randomness, so a
run is a pure function of its ``Config``, ``Scenario`` and seed.

``Sim`` is one run, put together from parts, each in a module named for what it holds:

* ``sim.config``: ``Config``, the latency model and the message faults;
* ``sim.pod``: ``Pod``, one pod's process;
* ``sim.world``: ``World``, the run's state and the steps every part takes;
* ``sim.member_side``: the workers (how a member applies its documents and reports);
* ``sim.operator_side``: the operator (its rounds, their writes, its restarts);
* ``sim.hooks``: ``FaultHooks``, what injected faults may change, and ``NoFaults``.

This module holds ``Sim`` itself (the clock's handlers, the scenario's steps, a
workload's controller's requests), ``Result`` and ``simulate``, and re-exports the
names callers use (``runner.Config``, ``runner.Pod``, ``runner.FaultHooks``, ...).
"""

from __future__ import annotations

import dataclasses
import gc
from collections.abc import Callable
from typing import Any

from kooper.core import events as ev
from kooper.core import ids, model
from kooper.sim import rollout as rollouts
from kooper.sim import scenarios
from kooper.sim.config import Config, Faults, Latencies, Span
from kooper.sim.hooks import FaultHooks, NoFaults
from kooper.sim.member_side import MemberSide
from kooper.sim.operator_side import OperatorSide
from kooper.sim.pod import ALL, EAGER_ONLY, Pod

__all__ = [
    "ALL", "EAGER_ONLY", "Config", "FaultHooks", "Faults", "Latencies", "NoFaults", "Pod",
    "Result", "Sim", "Span", "simulate",
]

Step = scenarios.Step
A = scenarios.Action


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


class Sim(MemberSide, OperatorSide):
    """One run. ``run()`` drives the clock until nothing is left to happen.

    ``hooks`` are the run's injected faults (``FaultHooks``: its extension points, all
    named there); none by default. They call only the model's public steps (listed in
    ``FaultHooks``)."""

    def __init__(self, config: Config, scenario: scenarios.Scenario,
                 hooks: FaultHooks | None = None) -> None:
        super().__init__(config, scenario, hooks)
        self.handlers: dict[str, Callable[..., None]] = {
            "up": self._up, "ready": self._ready, "doc": self._doc, "stopped": self._stopped,
            "started": self._started, "report": self._report, "gone": self._gone,
            "round": self._round, "deadline": self._deadline, "step": self._step,
            "operator_up": self._operator_up, "fence": self._fence, "declare": self._declare,
            "heal": self._heal, "reread": self._reread, "batch": self._batch,
            "exit_check": self._exit_check,
            "left": self._left, "pod_gone": self._pod_gone, "sigterm": self._sigterm,
        }
        if scenario.rollout is not None:
            self.roller = rollouts.Controller(
                scenario.rollout, group=config.group, replicas=config.pods,
                actions=rollouts.Actions(terminate=self._terminate, create=self._create))
        self.handlers.update(self.hooks.attach(self))

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
            self.spawn(ordinal, EAGER_ONLY if self.scenario.eager_only else ALL, 0, name=name)
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

    # -- the scenario ----------------------------------------------------------------------

    def _step(self) -> None:
        steps = self.scenario.steps
        step = steps[self.step_index]
        self.step_index += 1
        self.last_fault_ms = self.clock.now_ms
        touched = self.apply_step(step)
        if self.progress is not None:
            self.progress(self.step_index / len(steps))
        if self.step_index < len(steps):
            nxt = steps[self.step_index]
            if nxt.wait_ready and touched is not None:
                self.waiting_ready = touched
            else:
                self.clock.after(nxt.delay_ms, "step")

    def apply_step(self, step: Step) -> ids.WorkerId | None:
        """Play ``step`` (as the faults have it: ``FaultHooks.step``); the pod it touched."""
        return self.play(self.hooks.step(step))

    def respawn(self, step: Step, pod: Pod, down_ms: int | None = None) -> None:
        """The next process of ``pod``, which ``step`` restarts or deletes: up after
        ``down_ms`` (else the step's, else a drawn restart), with the step's protocols
        if it names them, else the pod's."""
        if down_ms is None:
            down_ms = step.down_ms if step.down_ms is not None else self.lat.restart.draw(self.rng)
        protocols = pod.protocols
        if step.protocols:
            protocols = ALL if step.protocols == "compatible" else EAGER_ONLY
        self.spawn(step.pod, protocols, down_ms)

    def play(self, step: Step) -> ids.WorkerId | None:
        """Play ``step`` as the simulator models it; returns the pod it touched."""
        name = ids.WorkerId(f"{self.config.group}-{step.pod}")
        pod = self.pods.get(name)
        down = step.down_ms if step.down_ms is not None else self.lat.restart.draw(self.rng)
        if step.action in (A.RESTART, A.KILL):
            if pod is None or name in self.permanent:
                return None
            if pod.alive:
                self._depart(pod, graceful=step.action is A.RESTART)
            else:
                pod.token = -1  # still coming up: that start is superseded
            self.respawn(step, pod, down)
            return name
        if step.action is A.SCALE_UP:
            top = max((p.ordinal for p in self.pods.values()), default=-1)
            for ordinal in range(top + 1, top + 1 + step.count):
                self.permanent.discard(ids.WorkerId(f"{self.config.group}-{ordinal}"))
                self.spawn(ordinal, ALL, self.lat.ready.draw(self.rng))
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
                self.trigger_round()
            else:
                self._operator_down()
            return None
        if step.action is A.PROTOCOL:
            self.settings = dataclasses.replace(
                self.settings, protocol=model.Protocol(step.protocols)
            )
            self.trigger_round()
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
        if self.roller is not None and self.live_pod(name, token) is not None:
            self.roller.ready(name)
        if self.waiting_ready == name and self.live_pod(name, token) is not None:
            self.waiting_ready = None
            self.clock.after(self.scenario.steps[self.step_index].delay_ms, "step")

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
        self.trigger_round()
        stopping = self.lat.stop.draw(self.rng)
        self.clock.after(min(stopping, grace_ms), "sigterm", name, pod.token,
                         stopping <= grace_ms)

    def _sigterm(self, name: ids.WorkerId, token: int, graceful: bool) -> None:
        pod = self.live_pod(name, token)
        if pod is None:
            return
        late = self.stop_all(pod)
        pod.alive = False
        self.emit(ev.Kind.LEAVE, pod.name, late_ms=late)
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
        self.spawn(number, protocols, after, name=name)
        self.modelled.pending(name)
        self.trigger_round()


def simulate(config: Config, scenario: scenarios.Scenario,
             progress: Callable[[float], None] | None = None) -> Result:
    """Run one drill."""
    return Sim(config, scenario).run(progress)
