"""Scheduled-rebalance delay arithmetic (KIP-415's deferred resolution of imbalance).

``kip415`` mirrors ``handleLostAssignments`` of Kafka's ``IncrementalCooperativeAssignor``:

* no lost work: no delay;
* lost work, no delay pending, nobody departed this round: the loss cannot be a
  departure (e.g. a member missed an assignment), so reassign it now;
* lost work, no delay pending, a departure: schedule ``now + max_delay``;
* lost work, delay pending and not expired: keep the deadline (members are told
  the remaining ``d'``) and record members that joined empty as candidates;
* delay expired: hand lost work round-robin to the candidates still present,
  or, without candidates, release it to be balanced like new work.

One deadline serves every departure there: a member that leaves 290 s into a
300 s delay gets 10 s of grace. ``kooper`` gives *each departure its own grace*:
every lost origin (the member its work was lost from) keeps the deadline it got
when it departed (``Delay.departures``, persisted with the delay), and each lost
set is released on its own deadline while the others keep waiting. The grace of a
departure is ``Snapshot.grace_ms`` of the round it departed in (``control.adaptive``
may shorten it, to 0 when waiting is not worth it), never more than the configured
delay. ``Delay.deadline_ms`` is then the latest of them (what the group waits for
in all) and ``Delay.next_ms()`` the earliest (when the next round is due). A delay
rebuilt without per-departure deadlines (a rail's hold, an older status) makes
every origin wait until ``deadline_ms``; one cut short (a rail's release) cuts
every origin's.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Mapping, Sequence

from kooper.core import ids, model

Grants = dict[ids.WorkerId, model.ConnectorsAndTasks]


@dataclasses.dataclass(frozen=True, slots=True)
class Resolution:
    """What ``resolve`` decided for the lost work of one round."""

    delay: model.Delay | None
    """The delay still pending (None: nothing waits any more)."""
    grants: Grants
    """Lost work handed straight to candidates (``kip415`` at its deadline)."""
    released: frozenset[ids.WorkerId]
    """Lost origins placed this round (to candidates in ``grants``, or balanced as new
    work); the other origins keep waiting."""


def effective_grace_ms(policy: model.Policy, max_delay_ms: int, grace_ms: int | None) -> int:
    """How long the work of a member departing this round waits: under ``kooper`` the
    grace ``control.adaptive`` chose (``Snapshot.grace_ms``; None: the whole delay), kept
    within 0 and ``max_delay_ms``; under ``kip415`` the configured delay. The one place
    this is decided: the delay, the audit rows and the metric all read it here."""
    limit = max(0, max_delay_ms)
    if grace_ms is None or policy is not model.Policy.KOOPER:
        return limit
    return max(0, min(grace_ms, limit))


def resolve(
    *,
    lost: Mapping[ids.WorkerId, model.ConnectorsAndTasks],
    previous: model.Delay | None,
    departed: Collection[ids.WorkerId],
    max_delay_ms: int,
    now_ms: int,
    policy: model.Policy,
    live: Sequence[ids.WorkerId],
    empty_members: Sequence[ids.WorkerId],
    grace_ms: int | None = None,
) -> Resolution:
    """Decide the delay for this round (see the module docstring).

    ``departed`` names the members that departed this round; ``grace_ms`` is how long
    the work of those departures waits (``kooper`` only; None: ``max_delay_ms``).
    """
    everything = frozenset(lost)
    if not lost or max_delay_ms <= 0:
        return Resolution(None, {}, everything)
    if policy is model.Policy.KIP415:
        return _kip415(lost, previous, bool(departed), max_delay_ms=max_delay_ms,
                       now_ms=now_ms, live=live, empty_members=empty_members)
    grace = effective_grace_ms(policy, max_delay_ms, grace_ms)
    known = previous.departures if previous is not None else {}
    deadlines: dict[ids.WorkerId, int] = {}
    for origin in lost:
        if previous is not None and origin in known:
            due = min(known[origin], previous.deadline_ms)
        elif origin in departed:
            due = now_ms + grace
        elif previous is not None:
            due = previous.deadline_ms
        else:
            due = now_ms  # lost without a departure (a missed assignment): place it now
        if due > now_ms:
            deadlines[origin] = due
    released = everything.difference(deadlines)
    if not deadlines:
        return Resolution(None, {}, released)
    if previous is None:
        candidates = tuple(empty_members)
    else:
        seen = set(previous.candidates)
        candidates = previous.candidates + tuple(m for m in empty_members if m not in seen)
    return Resolution(
        model.Delay(max(deadlines.values()), candidates, deadlines), {}, released)


def _kip415(
    lost: Mapping[ids.WorkerId, model.ConnectorsAndTasks],
    previous: model.Delay | None,
    departed_now: bool,
    *,
    max_delay_ms: int,
    now_ms: int,
    live: Sequence[ids.WorkerId],
    empty_members: Sequence[ids.WorkerId],
) -> Resolution:
    """KIP-415 to the letter: one deadline for all lost work."""
    everything = frozenset(lost)
    if previous is None:
        if not departed_now:
            return Resolution(None, {}, everything)
        return Resolution(model.Delay(now_ms + max_delay_ms, tuple(empty_members)), {},
                          frozenset())
    if now_ms >= previous.deadline_ms:
        present = set(live)
        candidates = [member for member in previous.candidates if member in present]
        if candidates:
            return Resolution(None, round_robin(lost, candidates), everything)
        return Resolution(None, {}, everything)
    known = set(previous.candidates)
    joined = tuple(member for member in empty_members if member not in known)
    return Resolution(model.Delay(previous.deadline_ms, previous.candidates + joined), {},
                      frozenset())


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
