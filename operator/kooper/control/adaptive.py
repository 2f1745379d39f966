"""Wait or move at once: the grace of an unplanned departure, learned per group (pure).

When a member departs unplanned (a kill, a lost node, an expired Lease), the
``kooper`` policy can leave its work stopped and wait for the pod to come back
under its name (returning identity gives it all back at once), or hand the work
to the other members now. Which is cheaper depends on the group:

* waiting pauses each of its resources for the time the identity takes to return,
  ``R`` (or the whole grace, and then a handoff, if it does not return);
* moving pauses each for one handoff ``H`` (write, start elsewhere, report), and
  when the identity does return, balancing moves about as much work back to it:
  a second handoff. Moving costs about ``2H``.

So the group learns two numbers from what it observes (``Learned``), each an
exponentially weighted mean (weight ``ALPHA`` for the newest sample):

* ``return_ms``: how long its departed identities take to come back, from the
  round that saw a member depart (planned or not; known-permanent ones excepted)
  to the round that sees a member of that name again. An identity still away
  after the configured delay counts as a return of the whole delay (it would have
  lost its work anyway) and is forgotten;
* ``handoff_ms``: what starting work costs, from the round that writes a member
  newly assigned work to the round that sees the member report that generation
  (the start latency as the operator observes it).

The rule (``choose``), with ``d`` the configured delay:

* ``d = 0``: no delay, move at once (``off``);
* fewer than ``MIN_RETURNS`` returns or ``MIN_HANDOFFS`` handoffs seen: wait ``d``,
  as before anything was learned (``learning``);
* ``return_ms > FACTOR * handoff_ms`` (``FACTOR = 2``: the move now plus the move
  back): move at once, a grace of 0 (``move``);
* otherwise wait (``wait``), but no longer than usual returns take:
  ``min(d, max(RETURN_MARGIN * return_ms, FACTOR * handoff_ms))``. An identity
  that has not returned by then is probably not coming back soon, and giving its
  work away then costs at most one more handoff than waiting would have.

The grace is never longer than ``d``; each departure keeps the grace it got when it
departed (``core.delays``). ``kip415`` never asks: it keeps the KIP's delay. The
learned numbers and the identities still away are persisted in
``WorkerGroup.status.state.adaptive``, so an operator restart keeps them; a sample in
flight when the operator stops (a handoff not yet reported) is lost, nothing else.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Container, Iterable, Mapping
from typing import Any

from kooper.core import ids

ALPHA = 0.25
"""Weight of the newest sample in the moving means."""
FACTOR = 2.0
"""Moving costs about this many handoffs (the move now and the move back)."""
RETURN_MARGIN = 2.0
"""While waiting, wait up to this many times the usual return time."""
MIN_RETURNS = 2
MIN_HANDOFFS = 3
"""Samples needed before the learned numbers decide anything."""
MAX_AWAY = 1_000
"""At most this many identities are watched for their return (the oldest go first)."""

LEARNING = "learning"
WAIT = "wait"
MOVE = "move"
OFF = "off"


@dataclasses.dataclass(frozen=True, slots=True)
class Learned:
    """What a group has observed of its departures and handoffs."""

    return_ms: int | None = None
    """Moving mean of the time a departed identity takes to return (None: none seen)."""
    returns: int = 0
    handoff_ms: int | None = None
    """Moving mean of a handoff's cost, write to report (None: none seen)."""
    handoffs: int = 0
    away: Mapping[ids.WorkerId, int] = dataclasses.field(default_factory=dict)
    """Departed identities not back yet: member → when the operator saw it depart."""


@dataclasses.dataclass(frozen=True, slots=True)
class Choice:
    """The grace an unplanned departure gets now, and why."""

    grace_ms: int
    mode: str
    """``learning``, ``wait``, ``move`` or ``off`` (the module docstring)."""


def _mean(old: int | None, sample: int) -> int:
    return sample if old is None else round(old + ALPHA * (sample - old))


def choose(learned: Learned, *, max_delay_ms: int) -> Choice:
    """The grace a member departing now gets (the rule in the module docstring)."""
    if max_delay_ms <= 0:
        return Choice(0, OFF)
    if (learned.returns < MIN_RETURNS or learned.handoffs < MIN_HANDOFFS
            or learned.return_ms is None or learned.handoff_ms is None):
        return Choice(max_delay_ms, LEARNING)
    if learned.return_ms > FACTOR * learned.handoff_ms:
        return Choice(0, MOVE)
    wait = max(RETURN_MARGIN * learned.return_ms, FACTOR * learned.handoff_ms)
    return Choice(min(max_delay_ms, round(wait)), WAIT)


def departed(learned: Learned, members: Iterable[ids.WorkerId], *, now_ms: int) -> Learned:
    """``members`` departed now: watch for their return (an earlier record is kept)."""
    new = [m for m in members if m not in learned.away]
    if not new:
        return learned
    away = {**learned.away, **dict.fromkeys(new, now_ms)}
    if len(away) > MAX_AWAY:
        away = dict(sorted(away.items(), key=lambda item: (item[1], item[0]))[-MAX_AWAY:])
    return dataclasses.replace(learned, away=away)


def returned(learned: Learned, live: Container[ids.WorkerId], *, now_ms: int,
             max_delay_ms: int) -> Learned:
    """Samples for identities back among ``live``, and for those away longer than the
    configured delay (counted as away for the whole delay, then forgotten)."""
    if not learned.away:
        return learned
    back = [m for m in learned.away if m in live]
    late = [m for m, at in learned.away.items() if now_ms - at >= max_delay_ms]
    if not back and not late:
        return learned
    mean, count = learned.return_ms, learned.returns
    for member in sorted({*back, *late}):
        mean = _mean(mean, max(0, min(now_ms - learned.away[member], max(max_delay_ms, 0))))
        count += 1
    gone = {*back, *late}
    return dataclasses.replace(learned, return_ms=mean, returns=count,
                               away={m: at for m, at in learned.away.items() if m not in gone})


def handed_off(learned: Learned, samples: Iterable[int]) -> Learned:
    """Handoff costs observed this round (milliseconds)."""
    mean, count = learned.handoff_ms, learned.handoffs
    for sample in samples:
        mean = _mean(mean, max(0, sample))
        count += 1
    if count == learned.handoffs:
        return learned
    return dataclasses.replace(learned, handoff_ms=mean, handoffs=count)


def encode(learned: Learned) -> dict[str, Any]:
    """``status.state.adaptive``."""
    document: dict[str, Any] = {"returns": learned.returns, "handoffs": learned.handoffs}
    if learned.return_ms is not None:
        document["returnMs"] = learned.return_ms
    if learned.handoff_ms is not None:
        document["handoffMs"] = learned.handoff_ms
    if learned.away:
        document["away"] = dict(sorted(learned.away.items()))
    return document


def decode(raw: object) -> Learned:
    """The inverse of ``encode``; anything unreadable is not known (learned again)."""
    if not isinstance(raw, Mapping):
        return Learned()
    away = raw.get("away")
    return Learned(
        return_ms=_count(raw.get("returnMs")), returns=_count(raw.get("returns")) or 0,
        handoff_ms=_count(raw.get("handoffMs")), handoffs=_count(raw.get("handoffs")) or 0,
        away={ids.WorkerId(str(m)): at for m, at in away.items() if _count(at) is not None}
        if isinstance(away, Mapping) else {},
    )


def summary(learned: Learned, choice: Choice) -> dict[str, Any]:
    """``status.adaptive``: the knob as a person reads it (seconds)."""
    document: dict[str, Any] = {
        "mode": choice.mode,
        "graceSeconds": choice.grace_ms / 1000,
        "returnsObserved": learned.returns,
        "handoffsObserved": learned.handoffs,
    }
    if learned.return_ms is not None:
        document["expectedReturnSeconds"] = learned.return_ms / 1000
    if learned.handoff_ms is not None:
        document["expectedHandoffSeconds"] = learned.handoff_ms / 1000
    return document


def _count(value: object) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    return None
