"""The Kubernetes Events a round emits, and which bad input it has already reported.

An ``Event`` is a value; the shell posts it (on the WorkerGroup, or on the named
Connector). Bad-input Events are posted once per subject (``Reported``), while the
``kooper_bad_inputs_total`` counter counts every round that saw the problem.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Iterable

from kooper.control import status, views
from kooper.core import ids, model


@dataclasses.dataclass(frozen=True, slots=True)
class Event:
    """A Kubernetes Event about the WorkerGroup (or ``connector``, when set)."""

    reason: str
    message: str
    warning: bool = False
    connector: str = ""


@dataclasses.dataclass(frozen=True, slots=True)
class Reported:
    """(reason, subject, member) of bad-input Events already posted, so they are not spammed.

    ``member`` ties an entry to a member so that it is dropped once the member is gone.
    """

    entries: frozenset[tuple[str, str, str]] = frozenset()


class Recorder:
    """Collects one round's Events and bad-input counts (a builder, local to a step)."""

    def __init__(self, reported: Reported) -> None:
        self.entries = set(reported.entries)
        self.events: list[Event] = []
        self.bad_input: list[str] = []

    def event(self, reason: str, message: str, *, warning: bool = False,
              connector: str = "") -> None:
        """An Event, posted every time."""
        self.events.append(Event(reason, message, warning, connector))

    def once(self, reason: str, subject: str, message: str, *, member: str = "") -> None:
        """A bad-input Warning: counted every time, posted once per (reason, subject)."""
        self.bad_input.append(reason)
        if any(e[0] == reason and e[1] == subject for e in self.entries):
            return
        self.entries.add((reason, subject, member))
        self.event(reason, message, warning=True)

    def forget(self, reason: str, subject: str | None = None) -> None:
        """Allow ``reason`` (for ``subject``, or every subject) to be posted again."""
        self.entries = {e for e in self.entries
                        if not (e[0] == reason and (subject is None or e[1] == subject))}

    def reported(self, members: Collection[str]) -> Reported:
        """What was posted, without entries of members no longer in ``members``."""
        return Reported(frozenset(e for e in self.entries if not e[2] or e[2] in members))


def departed(previous: model.PlanState, plan: model.Plan) -> list[ids.WorkerId]:
    """Members that held an assignment last round and are gone (or restarted) now."""
    candidates = previous.assignments.keys() - plan.members.keys()
    candidates |= {m for m, incarnation in
                   previous.incarnations.items() - plan.state.incarnations.items()
                   if incarnation and m in previous.assignments}
    return sorted(candidates)


def _names(members: Iterable[str]) -> str:
    listed = list(members)
    return ", ".join(listed[:10]) + ("..." if len(listed) > 10 else "")


def round_events(out: Recorder, *, previous: model.PlanState, plan: model.Plan,
                 snap: model.Snapshot) -> None:
    """MemberJoined/Departed, RevokingForBalance/RebalanceCompleted, DelayScheduled,
    WorkUnassigned for one planned round."""
    gone = departed(previous, plan)
    joined = [m for m in sorted(plan.members) if m not in previous.assignments or m in gone]
    if joined:
        out.event("MemberJoined", f"{len(joined)} member(s) joined: {_names(joined)}")
    if gone:
        why = ("scale-down or planned leave, reassigned now"
               if set(gone) <= snap.departed_permanently else "pod gone or Lease expired")
        out.event("MemberDeparted", f"{len(gone)} member(s) departed ({why}): {_names(gone)}")
    if plan.changed:
        moved = sum(len(r) for r in plan.newly_assigned.values())
        revoked = sum(len(m.revoked) for m in plan.members.values())
        if plan.revoking:
            out.event("RevokingForBalance",
                      f"generation {plan.state.generation}: {revoked} resource(s) revoked "
                      f"from {sum(1 for m in plan.members.values() if m.revoked)} member(s) "
                      "to move them next round")
        else:
            out.event("RebalanceCompleted",
                      f"generation {plan.state.generation}: {moved} resource(s) assigned, "
                      f"{len(plan.changed)} ConfigMap(s) written, "
                      f"{len(plan.members)} member(s), protocol {plan.protocol}")
    delay = plan.state.delay
    if delay is not None and (previous.delay is None
                              or previous.delay.deadline_ms != delay.deadline_ms):
        out.event("DelayScheduled",
                  f"{status.describe(plan.state.lost_resources())} lost; rebalance scheduled "
                  f"in {plan.delay_ms // 1000}s at {views.format_time(delay.deadline_ms)}")
    stranded = plan.stranded()  # work being handed over is no problem to warn of
    unassigned = len(stranded)
    if unassigned and delay is None:
        if not any(e[0] == "WorkUnassigned" and e[1] == str(unassigned) for e in out.entries):
            out.forget("WorkUnassigned")
            out.once("WorkUnassigned", str(unassigned),
                     f"{status.describe(stranded)} unassigned: "
                     f"{'no live member' if not plan.members else 'waiting for members'}")
    else:
        out.forget("WorkUnassigned")
