"""WorkerGroup status documents, built from a plan, and the conditions both kinds use
(pure; a Connector's status is ``control.connector_status``).

Conditions follow the API conventions: ``type``, ``status``, ``reason``
(CamelCase), a plain-English ``message``, ``observedGeneration`` and a
``lastTransitionTime`` that only moves when ``status`` flips.

* ``Ready``: every configured resource is assigned and the group has converged.
* ``Rebalancing``: revocations are out, members have not applied their latest
  assignment yet, or a scheduled-rebalance delay is pending.
* ``Degraded``: work is unassigned, or the input is wrong (a selector that matches
  no pod, malformed reports, members claiming work they were never given, a spec
  the operator cannot act on: ``refused_conditions``).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from kooper.control import views
from kooper.core import backoff, ids, model

REASON = re.compile(r"[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?")
"""metav1.Condition's ``reason`` (the CRDs' pattern): the API server refuses any other."""
MESSAGE_MAX = 32768
"""metav1.Condition's ``message`` limit (the CRDs' ``maxLength``)."""
TASK_STATES = ("Running", "Paused", "Unassigned", "Failed")
"""A resource's ``state`` in ``Connector.status`` (``tasks[].state``, ``instance.state``),
CamelCase as Kubernetes' enums are. Earlier kooper versions wrote them upper-case;
``task_state`` reads both, and the CRD still admits the old values."""
RUNNING, PAUSED, UNASSIGNED, FAILED = TASK_STATES


def task_state(value: object) -> str:
    """A persisted resource state as this version writes it (``FAILED`` -> ``Failed``);
    ``""`` for anything else."""
    if isinstance(value, str):
        for known in TASK_STATES:
            if value in (known, known.upper()):
                return known
    return ""


@dataclasses.dataclass(frozen=True, slots=True)
class Condition:
    """One condition before its timestamps are settled."""

    type: str
    status: bool
    reason: str
    message: str

    def __post_init__(self) -> None:
        """A reason the CRD would refuse is our bug: fail here, not at the API server."""
        if not REASON.fullmatch(self.reason) or len(self.reason) > 1024:
            raise ValueError(f"condition {self.type}: reason {self.reason!r} is not CamelCase")


def conditions(
    wanted: Iterable[Condition],
    *,
    previous: Sequence[Mapping[str, Any]],
    generation: int,
    now: str,
) -> list[dict[str, Any]]:
    """metav1.Conditions; ``lastTransitionTime`` kept from ``previous`` unless status flips."""
    before = {c.get("type"): c for c in previous if isinstance(c, Mapping)}
    result = []
    for condition in wanted:
        status = "True" if condition.status else "False"
        old = before.get(condition.type)
        moved = old is None or old.get("status") != status
        result.append(
            {
                "type": condition.type,
                "status": status,
                "reason": condition.reason,
                "message": condition.message[:MESSAGE_MAX],
                "observedGeneration": max(0, generation),
                "lastTransitionTime": now if moved else old.get("lastTransitionTime", now),  # type: ignore[union-attr]
            }
        )
    return result


def imbalance(plan: model.Plan) -> int:
    """Max minus min of resources (instances + tasks) held by live members."""
    loads = [len(member.assigned) for member in plan.members.values()]
    return max(loads) - min(loads) if loads else 0


def describe(resources: model.ConnectorsAndTasks) -> str:
    """``"3 tasks and 1 connector"``."""
    tasks = len(resources.tasks)
    connectors = len(resources.connectors)
    parts = []
    if tasks:
        parts.append(f"{tasks} task{'s' if tasks != 1 else ''}")
    if connectors:
        parts.append(f"{connectors} connector{'s' if connectors != 1 else ''}")
    return " and ".join(parts) or "nothing"


@dataclasses.dataclass(frozen=True, slots=True)
class GroupFacts:
    """What a round knows beyond the plan, for the WorkerGroup status."""

    snapshot: model.Snapshot
    plan: model.Plan
    now_ms: int
    pods_matched: int
    problems: tuple[tuple[str, str], ...] = ()
    """(reason, message) pairs of bad input seen this round."""
    pending: tuple[ids.WorkerId, ...] = ()
    """Members that have not yet applied their latest assignment."""
    paced: int = 0
    """Balancing moves left for later rounds by ``spec.balancing.maxMovesPerRound``."""
    max_moves: int = 0
    """That cap in resources for this group now (``control.pacing.cap``)."""


def group_conditions(facts: GroupFacts) -> list[Condition]:
    """Ready / Rebalancing / Degraded for one round."""
    plan = facts.plan
    unassigned = plan.stranded()  # work being handed over is Rebalancing, not a problem
    members = len(facts.snapshot.members)
    delay = plan.state.delay
    paced = (f"; {facts.paced} more move(s) wait for later rounds (at most "
             f"{facts.max_moves} per round)" if facts.paced else "")
    if plan.revoking:
        rebalancing = Condition("Rebalancing", True, "RevokingForBalance",
                                "members are stopping work that moves elsewhere" + paced)
    elif delay is not None:
        rebalancing = Condition(
            "Rebalancing", True, "DelayScheduled",
            f"{describe(plan.state.lost_resources())} lost; waiting "
            f"{max(0, delay.deadline_ms - facts.now_ms) // 1000}s for the member to come back",
        )
    elif backoff.remaining_ms(plan.state.backoff, facts.now_ms) and imbalance(plan):
        rebalancing = Condition(
            "Rebalancing", True, "RevocationsBackingOff",
            f"consecutive revoking rounds: balancing revocations wait "
            f"{(backoff.remaining_ms(plan.state.backoff, facts.now_ms) + 999) // 1000}s"
            + paced,
        )
    elif facts.pending:
        rebalancing = Condition(
            "Rebalancing", True, "AwaitingMembers",
            f"{len(facts.pending)} member(s) have not applied their assignment yet: "
            + ", ".join(sorted(facts.pending)[:5]),
        )
    else:
        rebalancing = Condition("Rebalancing", False, "Converged", "no rebalance in progress")
    overlap = next((p for p in facts.problems if p[0] == "SelectorOverlap"), None)
    if overlap is not None and facts.pods_matched == 0:
        degraded = Condition("Degraded", True, *overlap)  # its pods are another group's
    elif facts.pods_matched == 0:
        degraded = Condition("Degraded", True, "SelectorMatchesNoPods",
                             "spec.selector matches no pod in this namespace")
    elif unassigned and members == 0:
        degraded = Condition("Degraded", True, "WorkUnassigned",
                             f"{describe(unassigned)} unassigned: the group has no live member")
    elif unassigned and delay is None:
        degraded = Condition("Degraded", True, "WorkUnassigned",
                             f"{describe(unassigned)} unassigned")
    elif facts.problems:
        reason, message = facts.problems[0]
        degraded = Condition("Degraded", True, reason, message)
    else:
        degraded = Condition("Degraded", False, "AsExpected", "no problem detected")
    if facts.pods_matched == 0:
        ready = Condition("Ready", False, degraded.reason, degraded.message)
    elif not unassigned and not rebalancing.status:
        ready = Condition("Ready", True, "Balanced",
                          f"{members} member(s) run every configured resource")
    elif unassigned:
        ready = Condition("Ready", False, "WorkUnassigned", f"{describe(unassigned)} unassigned")
    else:
        ready = Condition("Ready", False, rebalancing.reason, rebalancing.message)
    return [ready, rebalancing, degraded]


INVALID_SPEC = "InvalidSpec"
"""The reason (condition, Event, ``kooper_bad_inputs_total``) of a WorkerGroup spec that
admission let through but the operator cannot act on (``GroupView.invalid``)."""


def refused_conditions(why: str) -> tuple[Condition, ...]:
    """Ready / Degraded of a WorkerGroup whose spec cannot be acted on (nothing is planned);
    ``why`` names the field and its value (``views.parse_group``)."""
    message = f"{why}; nothing is planned for this group until the spec is fixed"
    return (Condition("Ready", False, INVALID_SPEC, message),
            Condition("Degraded", True, INVALID_SPEC, message))


def _delay(state: model.PlanState, delay: model.Delay, *, now_ms: int) -> dict[str, Any]:
    """``status.delay``: the scheduled rebalance's deadline, and each departure's."""
    found: dict[str, Any] = {
        "deadline": views.format_time(delay.deadline_ms),
        "remainingSeconds": max(0, (delay.deadline_ms - now_ms + 999) // 1000),
        "lost": len(state.lost_resources()),
        "candidates": list(delay.candidates),
    }
    if delay.departures:
        found["departures"] = [{
            "member": member,
            "deadline": views.format_time(at),
            "remainingSeconds": max(0, (at - now_ms + 999) // 1000),
            "lost": len(state.lost.get(member, model.EMPTY)),
        } for member, at in sorted(delay.departures.items(), key=lambda e: (e[1], e[0]))]
    return found


def group_status(
    facts: GroupFacts, *, state: Mapping[str, Any], generation: int,
    previous: Mapping[str, Any],
) -> dict[str, Any]:
    """The WorkerGroup ``status`` after a round."""
    plan = facts.plan
    snapshot = facts.snapshot
    by_protocol = {"eager": 0, "compatible": 0}
    for member in snapshot.members.values():
        by_protocol["compatible" if member.cooperative else "eager"] += 1
    configured_tasks = sum(snapshot.connectors.values())
    assigned = sum(len(m.assigned) for m in plan.members.values())
    delay = plan.state.delay
    status: dict[str, Any] = {
        "observedGeneration": generation,
        "rebalanceGeneration": plan.state.generation,
        "protocol": str(plan.protocol),
        "members": {
            "count": len(snapshot.members),
            "byProtocol": by_protocol,
            "names": sorted(snapshot.members),
        },
        "connectors": len(snapshot.connectors),
        "tasks": configured_tasks,
        "assigned": assigned,
        "unassigned": len(plan.unassigned),
        "lost": len(plan.state.lost_resources()),
        "imbalance": imbalance(plan),
        "state": state,
        "conditions": conditions(
            group_conditions(facts),
            previous=previous.get("conditions") or (),
            generation=generation,
            now=views.format_time(facts.now_ms),
        ),
    }
    if delay is not None:
        status["delay"] = _delay(plan.state, delay, now_ms=facts.now_ms)
    if facts.paced:
        status["balancing"] = {"pendingMoves": facts.paced, "maxMovesPerRound": facts.max_moves}
    held_back = plan.state.backoff
    if backoff.remaining_ms(held_back, facts.now_ms) and held_back.held_until_ms is not None:
        status["revocationBackoff"] = {
            "until": views.format_time(held_back.held_until_ms),
            "remainingSeconds": (backoff.remaining_ms(held_back, facts.now_ms) + 999) // 1000,
            "consecutiveRevokingRounds": held_back.streak,
        }
    return status


def same_status(old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    """Whether two statuses differ only in condition timestamps (no patch needed)."""

    def strip(status: Mapping[str, Any]) -> dict[str, Any]:
        result = dict(status)
        result["conditions"] = [
            {k: v for k, v in c.items() if k != "lastTransitionTime"}
            for c in status.get("conditions") or ()
            if isinstance(c, Mapping)
        ]
        return result

    return strip(old) == strip(new)


def merge_patch(old: Mapping[str, Any], new: Mapping[str, Any]) -> dict[str, Any]:
    """A JSON merge patch turning ``old`` into ``new`` (``None`` deletes a key)."""
    patch: dict[str, Any] = {}
    for key in old:
        if key not in new:
            patch[key] = None
    for key, value in new.items():
        before = old.get(key)
        if isinstance(value, Mapping) and isinstance(before, Mapping):
            sub = merge_patch(before, value)
            if sub:
                patch[key] = sub
        elif value != before or key not in old:
            patch[key] = value
    return patch
