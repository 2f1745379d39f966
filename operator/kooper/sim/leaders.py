"""Control-side chaos for the simulator: leader terms, a stalled leader, API restarts.

Issue 22's fourth hard families (``chaos.run_hard(families=4)``). The operator runs in
**terms**, each with a leader epoch (the first is 1, each new one the last + 1, as
``leaseTransitions + 1``), and writes through ``sim.apiserver``: every ConfigMap and
the status have a ``resourceVersion``, and a term's writes are preconditioned on the
versions it holds. A new term (a takeover, an operator restart) first **fences**, as
``shell.writes.Writer.fence``: it re-issues every member's ConfigMap unchanged but for
its epoch (members see it: their sessions remember the newest leader epoch), occupies
the name of every member (by its Lease) without one with an empty ConfigMap under its
epoch, claims the status, reads every version, and only then restores and plans.

* **A stalled leader** (``Stall``): at the first round it plans at or after a drawn
  time, the leader freezes after a drawn prefix of the round's writes (SIGSTOP, a GC
  pause); a new term takes over after the leader Lease (``LEADER_LEASE_MS``) and a
  drawn acquire delay. The frozen term's remaining writes are attempted later: all at
  one drawn time, or (**interleaved**) each at its own, in their order, around and
  after the takeover, between the new term's writes. Those sent before the takeover
  land (the new term's fence then keeps them); after it they are refused.
* **An API restart** (``Outage``): for a drawn time nothing reaches the API. Every
  member is cut off (it cannot renew its Lease and misses the documents in flight; at
  the end its watch relists: it re-reads its ConfigMap), the operator plans nothing
  (its rounds wait for the API; a late write waits too), and an outage longer than the
  leader Lease ends the term: a new one takes over when the API is back.

``LeaderFaults.fencing=False`` is the negative control: documents carry no leader
epoch (workers accept any), nothing is re-issued, nothing preconditioned: a stalled
leader's late writes land over the new term's.

Every leader write is recorded with its verdict (``Terms.write_log``, ``explain``).
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Callable, Mapping

from kooper.control import modelled
from kooper.control import step as control
from kooper.core import model
from kooper.sim import apiserver, runner, scenarios

LEADER_LEASE_MS = 15_000
"""The operator's leader Lease (``kooper run --leader-election``'s default)."""
RESUME_MS = (-3_000, -500, -1, 0, 1, 100, 1_000, 5_000, 30_000)
"""When a stalled term's late writes are attempted, from the takeover."""
OUTAGE_MS = (2_000, 8_000, 16_000, 25_000)


@dataclasses.dataclass(frozen=True, slots=True)
class Stall:
    """A leader frozen part-way through a round's writes."""

    at_ms: int
    """It freezes in the first round it plans at or after this time."""
    prefix: float
    """The fraction (0..1) of the round's writes made before it froze."""
    takeover_ms: int
    """A new term starts this long after it froze (the leader Lease and an acquire)."""
    resume_ms: tuple[int, ...]
    """When its remaining writes are attempted, from the takeover (``RESUME_MS``): the
    first for all of them, or (``interleaved``) the first few sorted, each its own."""
    interleaved: bool


@dataclasses.dataclass(frozen=True, slots=True)
class Outage:
    """The API server down (restarted) from ``at_ms`` for ``down_ms``."""

    at_ms: int
    down_ms: int


@dataclasses.dataclass(frozen=True, slots=True)
class LeaderFaults:
    """The control-side faults of one run, and whether the leader fence is on."""

    stalls: tuple[Stall, ...] = ()
    outages: tuple[Outage, ...] = ()
    fencing: bool = True


def draw(seed: int, *, start_ms: int, span_ms: int, fencing: bool = True) -> LeaderFaults:
    """The stalls and outages of hard run ``seed`` (its own random stream), at times in
    ``[start_ms, start_ms + span_ms]`` (the scenario's faults)."""
    rng = random.Random(f"leaders-{seed}")
    stalls = []
    for _ in range(rng.choice((0, 1, 1, 1, 2))):
        stalls.append(Stall(
            at_ms=start_ms + rng.randint(0, span_ms), prefix=rng.random(),
            takeover_ms=LEADER_LEASE_MS + rng.randint(0, 2_000),
            resume_ms=tuple(rng.choice(RESUME_MS) for _ in range(32)),
            interleaved=rng.random() < 0.5))
    outages = [Outage(start_ms + rng.randint(0, span_ms), rng.choice(OUTAGE_MS))
               for _ in range(rng.choice((0, 0, 1)))]
    return LeaderFaults(tuple(sorted(stalls, key=lambda s: s.at_ms)), tuple(outages),
                        fencing)


def key_and_kind(write: control.Write) -> tuple[str, apiserver.Kind]:
    """The object a step's write goes to, and its kind."""
    if isinstance(write, control.DeleteConfigMap):
        return str(write.member), apiserver.Kind.DELETE
    if isinstance(write, control.WriteConfigMap):
        return str(write.assignment.member), apiserver.Kind.PUT
    return apiserver.STATUS, apiserver.Kind.STATUS


def explain(log: list[apiserver.Record]) -> list[str]:
    """The leader writes in order, one line each: time, term, kind, object, verdict."""
    return [f"t={r.ts_ms} epoch {r.epoch}{' (stale)' if r.stale else ''}: {r.kind} "
            f"{r.key}: {r.verdict}" for r in log]


class Terms(runner.NoFaults):
    """Faults (``runner.FaultHooks``) of an operator that runs in fenced terms, with stalls
    and API restarts.

    Combined with ``chaos.HardFaults`` as ``chaos.HardLeaderFaults``; ``arm`` sets the
    faults, once attached to the simulator, before it runs.
    """

    def __init__(self) -> None:
        super().__init__()
        self.faults = LeaderFaults()
        self.store = apiserver.Store()
        self.term = apiserver.Term(1)
        self.write_log: list[apiserver.Record] = []
        self.pending_stalls: list[Stall] = []
        self.api_down_until = -1

    def attach(self, sim: runner.Sim) -> Mapping[str, Callable[..., None]]:
        """See ``runner.FaultHooks``."""
        handlers = dict(super().attach(sim))
        handlers.update(stale_write=self._stale_write, api_down=self._api_down,
                        api_up=self._api_up)
        return handlers

    def arm(self, faults: LeaderFaults) -> None:
        """Schedule ``faults`` (before ``run``)."""
        self.faults = faults
        self.pending_stalls = list(faults.stalls)
        for outage in faults.outages:
            self.sim.clock.at(outage.at_ms, "api_down", outage.down_ms)

    # -- writes --------------------------------------------------------------------------

    def inputs(self, inputs: control.Inputs) -> control.Inputs:
        """The operator's inputs name its term's leader epoch (with the fence on)."""
        inputs = super().inputs(inputs)
        epoch = self.term.epoch if self.faults.fencing else 0
        return dataclasses.replace(inputs, leader_epoch=epoch)

    def lands(self, write: control.Write) -> bool:
        """The current term's ``write`` lands unless the API refuses it."""
        return super().lands(write) and self._attempt(self.term, write)

    def _attempt(self, term: apiserver.Term, write: control.Write) -> bool:
        key, kind = key_and_kind(write)
        verdict = apiserver.attempt(self.store, term, key, kind=kind,
                                    fencing=self.faults.fencing,
                                    delete=kind is apiserver.Kind.DELETE)
        self.write_log.append(apiserver.Record(self.sim.clock.now_ms, term.epoch, kind, key,
                                               verdict, stale=term is not self.term))
        return verdict is apiserver.Verdict.LANDS

    def _stale_write(self, term: apiserver.Term, write: control.Write) -> None:
        sim = self.sim
        if sim.clock.now_ms < self.api_down_until:
            sim.clock.at(self.api_down_until, "stale_write", term, write)
            return
        sim.last_fault_ms = max(sim.last_fault_ms, sim.clock.now_ms)
        if self._attempt(term, write):
            sim.land(write)

    # -- a new term: the fence first ----------------------------------------------------------

    def new_term(self) -> bool:
        """A new term waits for the API; it fences the stale term's writes first."""
        if not super().new_term():
            return False
        sim = self.sim
        if sim.clock.now_ms < self.api_down_until:
            sim.clock.at(self.api_down_until, "operator_up")
            return False
        sim.last_fault_ms = max(sim.last_fault_ms, sim.clock.now_ms)
        self.term = term = apiserver.Term(self.term.epoch + 1)
        if self.faults.fencing:
            for member, message in sorted(sim.written.items()):
                current = self.store.get(member)
                if current is not None and current.epoch >= term.epoch:
                    continue
                self._log(term, apiserver.Kind.REISSUE, member, apiserver.attempt(
                    self.store, term, member, kind=apiserver.Kind.REISSUE))
                sim.write_document(dataclasses.replace(message, leader_epoch=term.epoch))
            # Every member (by its Lease) without a ConfigMap gets an empty one under the
            # new epoch, so a stalled term's create of its first document is refused.
            pods, leases = sim.modelled.current()
            group = modelled.group(sim.config.group, sim.settings)
            for name in control.leased_members(group, pods, leases):
                if name not in sim.written:
                    self._log(term, apiserver.Kind.REISSUE, name, apiserver.attempt(
                        self.store, term, name, kind=apiserver.Kind.REISSUE))
            self._log(term, apiserver.Kind.CLAIM, apiserver.STATUS, apiserver.attempt(
                self.store, term, apiserver.STATUS, kind=apiserver.Kind.CLAIM))
            term.held = self.store.snapshot()  # the watch shows the fence: restore now
        return True

    def _log(self, term: apiserver.Term, kind: apiserver.Kind, key: str,
             verdict: apiserver.Verdict) -> None:
        self.write_log.append(apiserver.Record(self.sim.clock.now_ms, term.epoch, kind, key,
                                               verdict))

    # -- a stalled leader -----------------------------------------------------------------------

    def stalls(self, decided: control.Step, plan: model.Plan,
               writes: tuple[control.Write, ...]) -> bool:
        """A stall due now: the term makes a prefix of ``writes`` and freezes; the next
        term takes over after the leader Lease, and the rest land late, stale."""
        stall = self._due_stall()
        if stall is None:
            return super().stalls(decided, plan, writes)
        sim = self.sim
        made = min(len(writes), int(stall.prefix * (len(writes) + 1)))
        done, rest = writes[:made], writes[made:]
        for write in done:
            sim.execute(write)
        sim.record_audit(decided, plan, cut=True, persisted=any(
            isinstance(w, control.WriteStatus) and w.status is decided.status for w in done))
        stale = self.term
        sim.suspend()
        sim.clock.after(stall.takeover_ms, "operator_up")
        takeover = sim.clock.now_ms + stall.takeover_ms
        offsets = (tuple(sorted(stall.resume_ms[:len(rest)])) if stall.interleaved
                   else (stall.resume_ms[0],) * len(rest))
        for write, offset in zip(rest, offsets, strict=True):
            sim.clock.at(takeover + offset, "stale_write", stale, write)
        sim.last_fault_ms = max(sim.last_fault_ms, sim.clock.now_ms)
        return True

    def _due_stall(self) -> Stall | None:
        if self.pending_stalls and self.pending_stalls[0].at_ms <= self.sim.clock.now_ms:
            return self.pending_stalls.pop(0)
        return None

    # -- an API restart -------------------------------------------------------------------------

    def _api_down(self, down_ms: int) -> None:
        sim = self.sim
        if sim.clock.now_ms < self.api_down_until:
            return
        self.api_down_until = sim.clock.now_ms + down_ms
        sim.last_fault_ms = max(sim.last_fault_ms, self.api_down_until)
        for pod in sorted(sim.pods.values(), key=lambda p: p.ordinal):
            if pod.alive and not pod.partitioned:
                sim.apply_step(scenarios.Step(scenarios.Action.PARTITION, pod=pod.ordinal,
                                              down_ms=down_ms))
        if down_ms >= LEADER_LEASE_MS and sim.operator_up:
            # The leader could not renew its Lease: its term ends; the next one starts
            # once the API is back (``new_term`` waits for it).
            sim.suspend()
            sim.clock.at(self.api_down_until, "operator_up")
        sim.clock.at(self.api_down_until, "api_up")

    def _api_up(self) -> None:
        if self.sim.operator_up:
            self.sim.round_pending = False
            self.sim.trigger_round()

    def api_unreachable(self) -> bool:
        """The operator's rounds and deadlines wait for the API (``_api_up`` runs one)."""
        return super().api_unreachable() or self.sim.clock.now_ms < self.api_down_until
