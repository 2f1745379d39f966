"""A rail for mass departures: hold reassignment while most members are gone (pure).

If more than ``spec.rails.maxDepartedFraction`` of the members that held work are
gone at once (an API partition expires most Leases together), handing all their
work to the few survivors when the delay ends would overload them and move
everything twice when the others come back. While that is so the step *holds*:
the lost work stays unassigned (the scheduled rebalance is pushed back one delay
at a time, and known-permanent departures wait too), the WorkerGroup is
``Degraded=True`` (``ReassignmentHeld``) and a ``ReassignmentHeld`` Warning Event
says why. It ends by itself when members return (returning identities get their
work back at once, as always) or when someone sets the WorkerGroup annotation
``kooper.dev/release-hold`` to a new value: the lost work is then reassigned at
once (``ReassignmentReleased``). A fraction of 1 (the default) never holds.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection

from kooper.control import events
from kooper.core import defaults, model

RELEASE_ANNOTATION = "kooper.dev/release-hold"
MIN_MEMBERS = 2
"""Below this many members that held work, a departure is never "mass"."""


@dataclasses.dataclass(frozen=True, slots=True)
class Hold:
    """What the rail decided this round."""

    held: bool
    departed: int
    known: int
    released: bool = False
    """An override was acted on this round (the lost work is reassigned now)."""

    def message(self, fraction: float) -> str:
        """The condition's and the Event's text."""
        return (f"{self.departed} of {self.known} members departed at once (more than "
                f"{fraction:g} of them): their work is held unassigned until members return "
                f"or the annotation {RELEASE_ANNOTATION} is set to a new value")


def judge(previous: model.PlanState, live: Collection[str], *, fraction: float,
          override: str, acted_on: str) -> Hold:
    """Whether to hold reassignment this round."""
    if fraction >= defaults.RAILS_MAX_DEPARTED_FRACTION:
        return Hold(held=False, departed=0, known=0)
    known = {*previous.assignments, *previous.lost}
    departed = sum(1 for m in known if m not in live)
    mass = len(known) >= MIN_MEMBERS and departed > fraction * len(known)
    if mass and override and override != acted_on:
        return Hold(held=False, departed=departed, known=len(known), released=True)
    return Hold(held=mass, departed=departed, known=len(known))


def planning_state(previous: model.PlanState, hold: Hold, *, now_ms: int,
                   delay_ms: int) -> model.PlanState:
    """The state the assignor plans from: while held, a delay that has not ended yet;
    on a release, a delay that ends now."""
    delay = previous.delay
    if hold.held:
        if delay is None or delay.deadline_ms <= now_ms:
            pushed = now_ms + max(delay_ms, 1000)
            return dataclasses.replace(previous, delay=model.Delay(
                pushed, delay.candidates if delay is not None else ()))
        return previous
    if hold.released and delay is not None and delay.deadline_ms > now_ms:
        return dataclasses.replace(previous, delay=dataclasses.replace(delay,
                                                                       deadline_ms=now_ms))
    return previous


def hold_events(hold: Hold, was_held: bool, fraction: float) -> tuple[events.Event, ...]:
    """``ReassignmentHeld`` when a hold starts, ``ReassignmentReleased`` when it ends."""
    if hold.held and not was_held:
        return (events.Event("ReassignmentHeld", hold.message(fraction), warning=True),)
    if (was_held and not hold.held) or hold.released:
        why = ("released by the kooper.dev/release-hold annotation" if hold.released
               else "members returned")
        return (events.Event("ReassignmentReleased",
                             f"{why}: {hold.departed} of {hold.known} members gone now"),)
    return ()
