"""Backing off consecutive revoking rounds (Kafka's KAFKA-12495 rule).

A balancing revocation is cheap once; a group whose members keep arriving one by
one (a StatefulSet scaling out with ``OrderedReady``) would otherwise revoke in
every round and keep tasks bouncing. Kafka Connect answers with an exponential
backoff, and so do we, with its numbers:

* a round that wants to revoke right after a round that revoked backs off: it
  revokes nothing, still hands out free work, and schedules the next round
  ``1 ms × 40^n`` later (``n`` counts the consecutive revoking rounds), capped at
  ``scheduled.rebalance.max.delay.ms``; with the delay disabled (0) it revokes at once;
* while the backoff runs no round revokes; the first round after it may;
* a round that changes the group and wants no revocation resets the count.

Balancing revocations only: deleted connectors and resources held twice are always
revoked at once (they are never a matter of taste).
"""

from __future__ import annotations

from kooper.core import model

INITIAL_MS = 1
MULTIPLIER = 40


def interval_ms(streak: int, max_delay_ms: int) -> int:
    """How long the ``streak``-th consecutive revoking round waits (0: revoke now)."""
    if max_delay_ms <= 0 or streak <= 0:
        return 0
    # Stop multiplying once past the cap: 40**n grows without bound.
    interval = INITIAL_MS
    for _ in range(streak):
        interval *= MULTIPLIER
        if interval >= max_delay_ms:
            return max_delay_ms
    return interval


def decide(
    previous: model.RevocationBackoff,
    *,
    wants_revocation: bool,
    now_ms: int,
    max_delay_ms: int,
) -> tuple[bool, model.RevocationBackoff]:
    """Whether this round may revoke for balance, and the backoff state after it."""
    held = previous.held_until_ms
    if held is not None and now_ms >= held:
        previous = model.RevocationBackoff(previous.revoked_last, previous.streak, None)
        held = None
    if held is not None:
        # Backing off: no revocation until the window ends; the next one may revoke at once.
        return not wants_revocation, model.RevocationBackoff(False, previous.streak, held)
    if not wants_revocation:
        return True, previous
    if not previous.revoked_last:
        return True, model.RevocationBackoff(True, previous.streak, None)
    streak = previous.streak + 1
    wait = interval_ms(streak, max_delay_ms)
    if wait == 0:
        return True, model.RevocationBackoff(True, streak, None)
    return False, model.RevocationBackoff(False, streak, now_ms + wait)


def settled(previous: model.RevocationBackoff) -> model.RevocationBackoff:
    """After a round that changed the group and wanted no revocation.

    Right after a revoking round it means the group converged: the count starts over.
    """
    return model.RevocationBackoff() if previous.revoked_last else previous


def deferred(previous: model.RevocationBackoff) -> model.RevocationBackoff:
    """A lost-work delay is pending: nobody revokes for balance, so no streak continues."""
    return model.RevocationBackoff(False, previous.streak, previous.held_until_ms)


def remaining_ms(state: model.RevocationBackoff, now_ms: int) -> int:
    """How long revocations are still held back (0: not at all)."""
    held = state.held_until_ms
    return max(0, held - now_ms) if held is not None else 0
