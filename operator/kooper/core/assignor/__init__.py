"""The assignor: one pure function, ``plan``, computes a rebalance round.

KIP-415, "incremental cooperative rebalancing with deferred resolution of imbalance"
(Design II), as a pipeline of named pure stages over one ``holdings.Round``, each in
its own module:

| # | stage | module | what it decides |
|---|---|---|---|
| 1 | holdings | ``holdings`` | who departed; what each live member holds |
| 2 | contested | ``contested`` | the barrier: what is held twice; what each member keeps |
| 3 | lost | ``lost`` | what departed members held, under one origin each |
| 4 | delay | ``delay`` | lost work waits, goes to candidates, or is released |
| 5 | free | ``free`` | what nobody holds and nothing waits for |
| 6 | revocations | ``revocations`` | whether balancing may revoke, and what |
| 7 | placement | ``placement`` | free work to the least loaded (then ``spread``) |
| 8 | outcome | ``outcome`` | the plan: generations, revocations told, epochs |

``cooperative`` runs them; ``eager`` is the eager protocol's round. The policies
(``kip415``, ``kooper``) are rows of ``rules.RULES``: a stage reads its rule, never
the policy's name. ``Cache`` (``indexes``) makes a round cost what changed since
the last one; it never changes a plan.

1. **Holdings.** Each live member holds what it may run (its assignment as last
   written), what it reports running, and what it was told to stop but has not yet
   acknowledged. A member whose process restarted (new incarnation) holds only what
   it reports.
2. **The barrier.** A resource held by two live members is in nobody's assignment; a
   resource held by anyone is never handed to someone else. A move therefore takes
   two rounds: revoke, wait for the owner's report (or its departure), then assign.
3. **Lost work.** What a departed member held is *lost*. With a delay ``d > 0`` and
   none pending, the leader schedules a rebalance at ``now + d`` and leaves lost work
   unassigned; members that join empty meanwhile are *candidates*. When the deadline
   passes, lost work goes round-robin to the candidates (or, without candidates, is
   balanced like new work). Every round in between reports the remaining delay ``d'``.
4. **Balance.** With no delay pending, members above their target revoke just enough
   for the group to end balanced; free work (new, released lost, or acknowledged
   revocations) goes to the least-loaded members (``balance``).
5. **Stickiness.** Nothing else moves: a round with no membership or configuration
   change returns the same assignment.

Policies. ``kip415`` reproduces the KIP text, its scenario tables being golden tests,
and Kafka's current assignor where they pin nothing (connectors and tasks balanced each
on their own; lost work placed as one pool, as the tables do). ``kooper`` adds the
rules of ``rules``: a returning identity, a permanent departure, a rollout's
receivers, spread connectors, least-moved revocations; and persisted leader state
(the shell keeps ``PlanState`` in WorkerGroup status; only ``forget`` models a
KIP-415 leader change).

Protocols. ``eager`` revokes everything on any change, waits until every member owns
nothing, then assigns from scratch (round-robin over sorted members, as Kafka's
``EagerAssignor``). ``compatible`` is cooperative while every member speaks it; an
eager-only member downgrades the group with one stop-the-world revocation (KIP-415's
double rebalance), and the group upgrades in the round after the last one leaves.
"""

from __future__ import annotations

from kooper.core import model
from kooper.core.assignor.cooperative import cooperative
from kooper.core.assignor.eager import eager
from kooper.core.assignor.holdings import Round
from kooper.core.assignor.indexes import Cache

__all__ = ["Cache", "forget", "group_protocol", "plan"]


def forget(state: model.PlanState) -> model.PlanState:
    """What a new KIP-415 leader knows: the generation and the pending delay, nothing else."""
    delay = model.Delay(state.delay.deadline_ms) if state.delay else None
    return model.PlanState(
        generation=state.generation,
        protocol=state.protocol,
        delay=delay,
        epochs=state.epochs,
        epoch_base=state.epoch_base,
        forgotten=True,
    )


def group_protocol(snapshot: model.Snapshot) -> model.Protocol:
    """The protocol the group runs: eager if configured so or if any member speaks only eager."""
    if snapshot.settings.protocol is model.Protocol.EAGER:
        return model.Protocol.EAGER
    compatible = model.Protocol.COMPATIBLE  # (``Member.cooperative``, without a call each)
    if any(compatible not in member.protocols for member in snapshot.members.values()):
        return model.Protocol.EAGER
    return model.Protocol.COMPATIBLE


def plan(
    snapshot: model.Snapshot,
    previous: model.PlanState,
    *,
    now_ms: int,
    configured: model.ConnectorsAndTasks | None = None,
    cache: Cache | None = None,
) -> model.Plan:
    """Compute one rebalance round. Pure: same inputs, same plan.

    ``configured`` may be passed when the caller already has ``snapshot.configured()``.
    ``cache`` (one per group, reused every round) makes a round cost what changed
    since the last one instead of the whole group; it never changes the plan.
    """
    wanted = configured if configured is not None else snapshot.configured()
    round_ = Round(snapshot, previous, now_ms, wanted,
                   cache if cache is not None else Cache(persistent=False))
    if group_protocol(snapshot) is model.Protocol.EAGER:
        return eager(round_)
    return cooperative(round_)
