"""Scheduled-rebalance delay arithmetic (KIP-415's deferred resolution of imbalance).

Mirrors ``handleLostAssignments`` of Kafka's ``IncrementalCooperativeAssignor``:

* no lost work: no delay;
* lost work, no delay pending, nobody departed this round: the loss cannot be a
  departure (e.g. a member missed an assignment), so reassign it now;
* lost work, no delay pending, a departure: schedule ``now + max_delay``;
* lost work, delay pending and not expired: keep the deadline (members are told
  the remaining ``d'``) and record members that joined empty as candidates;
* delay expired: hand lost work round-robin to the candidates still present
  (``kip415``), or release it to be balanced like new work (``kooper``, or
  ``kip415`` without candidates).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from kooper.core import ids, model

Grants = dict[ids.WorkerId, model.ConnectorsAndTasks]


def resolve(
    *,
    lost: Mapping[ids.WorkerId, model.ConnectorsAndTasks],
    previous: model.Delay | None,
    departed_now: bool,
    max_delay_ms: int,
    now_ms: int,
    policy: model.Policy,
    live: Sequence[ids.WorkerId],
    empty_members: Sequence[ids.WorkerId],
) -> tuple[model.Delay | None, Grants]:
    """Decide the delay for this round.

    Returns ``(delay, grants)``: the delay still pending (``None`` when the lost
    work is placed this round: handed to candidates in ``grants``, or else
    balanced like new work), and the lost work handed straight to candidates.
    """
    if not lost:
        return None, {}
    if max_delay_ms <= 0:
        return None, {}
    if previous is None:
        if not departed_now:
            return None, {}
        return model.Delay(now_ms + max_delay_ms, tuple(empty_members)), {}
    if now_ms >= previous.deadline_ms:
        if policy is model.Policy.KIP415:
            present = set(live)
            candidates = [member for member in previous.candidates if member in present]
            if candidates:
                return None, round_robin(lost, candidates)
        return None, {}
    known = set(previous.candidates)
    joined = tuple(member for member in empty_members if member not in known)
    return model.Delay(previous.deadline_ms, previous.candidates + joined), {}


def round_robin(
    lost: Mapping[ids.WorkerId, model.ConnectorsAndTasks], candidates: Sequence[ids.WorkerId]
) -> Grants:
    """Kafka's reassignment to candidates: connectors, then tasks, each from the first candidate."""
    connectors: set[str] = set()
    tasks: set[str] = set()
    for resources in lost.values():
        connectors.update(resources.connectors)
        tasks.update(resources.tasks)
    given_c: dict[ids.WorkerId, list[str]] = {member: [] for member in candidates}
    given_t: dict[ids.WorkerId, list[str]] = {member: [] for member in candidates}
    for index, connector in enumerate(sorted(connectors, key=model.resource_sort_key)):
        given_c[candidates[index % len(candidates)]].append(connector)
    for index, task in enumerate(sorted(tasks, key=model.resource_sort_key)):
        given_t[candidates[index % len(candidates)]].append(task)
    return {
        member: model.ConnectorsAndTasks.of(given_c[member], given_t[member])
        for member in candidates
    }
