"""The operator side of the simulator: its rounds, their writes, its restarts.

The operator runs the real controller step (``control.step``, the same one the kopf
operator and ``kooper replay`` run), debounced, after a report, a departure or a
config change, and at ``plan.next_round_at_ms``; it makes the step's writes in the
order ``Step.writes`` states, as the operator does, and records the round's audit rows.
An operator restart restores from what was persisted, exactly as the operator does.
"""

from __future__ import annotations

import dataclasses

from kooper.control import audit, modelled, state, views
from kooper.control import step as control
from kooper.core import assignor, ids, model
from kooper.core import events as ev
from kooper.protocol import codec, messages
from kooper.sim.world import World


class OperatorSide(World):
    """The operator process: the clock events it handles and the writes it makes."""

    gone_means_stopped = True
    """A pod that vanishes stops its process with it (``control.Inputs``): so do this
    simulator's crashes and kills."""

    def _deadline(self, epoch: int) -> None:
        if epoch == self.operator_epoch and self.deadline_at == self.clock.now_ms:
            self.deadline_at = None
            if not self.hooks.api_unreachable():
                self.trigger_round()  # (else the round the API's return runs does its work)

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
        self.emit(ev.Kind.ROUND, generation=plan.state.generation)
        writes = self._ordered(decided)
        if self._cut_short(decided, plan, writes):
            return
        for write in writes:
            self.execute(write)
        self.record_audit(decided, plan)
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
            self.execute(write)
        self.record_audit(decided, plan, cut=True, persisted=any(
            isinstance(w, control.WriteStatus) and w.status is decided.status for w in done))
        self._operator_down()
        return True

    def record_audit(self, decided: control.Step, plan: model.Plan, *,
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

    def execute(self, write: control.Write) -> None:
        """Make one write of a step (``Step.writes`` gives the order): it lands
        (``land``) unless the faults refuse it (``FaultHooks.lands``)."""
        if self.hooks.lands(write):
            self.land(write)

    def land(self, write: control.Write) -> None:
        """A write that landed: the API holds it (a ConfigMap written or deleted, the
        status persisted)."""
        if isinstance(write, control.DeleteConfigMap):
            self.written.pop(write.member, None)
        elif isinstance(write, control.WriteConfigMap):
            self.write_document(write.assignment)
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

    def write_document(self, message: messages.Assignment) -> None:
        """The ConfigMap write of ``message`` (as ``FaultHooks.document`` has it) landed:
        its member reads it after the propagation latency, or (a lost update) re-reads
        its ConfigMap after the resync."""
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
        self.suspend()
        self.clock.after(self.lat.operator_restart.draw(self.rng), "operator_up")

    def suspend(self) -> None:
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
        self.trigger_round()

    def _configmap(self, message: messages.Assignment) -> views.ConfigMapView:
        return views.ConfigMapView(
            namespace=modelled.NAMESPACE, name=views.configmap_name(message.member),
            group=self.config.group, member=message.member, resource_version="",
            text=codec.encode_assignment(message))
