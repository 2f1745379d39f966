"""What one simulated run holds, and the steps every part of the model takes.

``World`` is the base of ``runner.Sim``: the clock and the run's one random stream, the
truth (every pod's process, what runs where, the event log, the violations seen), the
operator's view and memory (what it reads from the API, what it persisted and wrote),
and the few steps both sides take: record an event (``emit``), find a live process
(``live_pod``), start a pod's process (``spawn``), ask for an operator round
(``trigger_round``). The member side (``sim.member_side``) and the operator side
(``sim.operator_side``) extend it; ``runner.Sim`` puts them together.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from typing import Any

from kooper.control import adaptive, modelled
from kooper.control import step as control
from kooper.core import assignor, ids, model
from kooper.core import events as ev
from kooper.protocol import messages
from kooper.sim import clock, scenarios
from kooper.sim import rollout as rollouts
from kooper.sim.config import Config
from kooper.sim.hooks import FaultHooks, NoFaults
from kooper.sim.pod import Pod


class World:
    """The state of one run, and the steps both sides of the model share."""

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
        crash, which the real operator never writes, marked ``cut`` (``record_audit``)."""
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
        self.roller: rollouts.Controller | None = None
        """The workload's controller when the scenario models one (``sim.rollout``; made by
        ``runner.Sim``, which carries out its requests)."""
        self.sigterm_at: dict[ids.WorkerId, int] = {}
        self.hooks: FaultHooks = hooks if hooks is not None else NoFaults()

    # -- the steps every part takes ---------------------------------------------------

    def emit(self, kind: ev.Kind, member: str = "", resource: str = "",
             generation: int = -1, epoch: int = -1, *, late_ms: int = 0) -> None:
        """Record an event of ``kind`` in the run's log, at now (``late_ms`` later)."""
        self.events.append(ev.Event(
            self.clock.now_ms + late_ms, self.run_id, self.config.group, member, resource, kind,
            generation, epoch, str(self.settings.protocol), str(self.settings.policy),
        ))

    def spawn(self, ordinal: int, protocols: frozenset[model.Protocol], after_ms: int, *,
              name: ids.WorkerId | None = None) -> None:
        """A new process of pod ``ordinal`` (named ``name``, else by its ordinal): a new
        token and incarnation; its worker comes up (the ``up`` event) after ``after_ms``."""
        self.tokens += 1
        name = name if name is not None else ids.WorkerId(f"{self.config.group}-{ordinal}")
        if self.roller is not None:
            facts = self.roller.pod_facts(name)
            self.modelled.describe(name, (facts.owner_kind, facts.owner_name), facts.labels)
        pod = Pod(name, ordinal, self.tokens, f"i{self.tokens}", protocols, alive=False)
        self.pods[name] = pod
        self.clock.after(after_ms, "up", name, pod.token)

    def live_pod(self, name: ids.WorkerId, token: int) -> Pod | None:
        """The live process ``name`` started as ``token``: its pod's, else one the faults
        keep running without its pod (``FaultHooks.orphan``); None if it is gone."""
        pod = self.pods.get(name)
        if pod is not None and pod.token == token and pod.alive:
            return pod
        return self.hooks.orphan(name, token)

    def trigger_round(self) -> None:
        """Ask the operator for a round: one runs after the debounce, unless one is
        already pending or the operator is down."""
        if self.operator_up and not self.round_pending:
            self.round_pending = True
            self.clock.after(self.lat.debounce.draw(self.rng), "round", self.operator_epoch)
