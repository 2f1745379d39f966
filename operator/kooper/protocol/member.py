"""The member lifecycle, as a transition table.

Theory of operation (the worker side of KIP-415, with Kubernetes as coordinator)::

    UNJOINED --JOIN--> JOINING --ASSIGN--> STABLE <--STOPPED-- REVOKING
                          |                  |  \\--REVOKE-->/    ^
                          |                  |                    |
                          +-----REVOKE-------+--------------------+
    JOINING | STABLE | REVOKING --LEASE_LOST--> FENCED --LEASE_RENEWED--> JOINING
    any live state --LEAVE--> LEAVING --RELEASED--> LEFT

* ``JOIN``: the worker created its Lease and wrote its first report (KIP-415's
  JoinGroup). It owns nothing yet: a new incarnation never inherits work.
* ``ASSIGN``: an assignment with a newer generation arrived that stops nothing.
* ``REVOKE``: an assignment arrived that makes the member stop something (revoked
  resources, or anything owned that is no longer assigned). Stops always run
  before any start of the same assignment: that is what lets the leader move a
  resource in two rounds without ever running it twice.
* ``STOPPED``: every stop of the assignment finished; starts may begin.
* ``LEASE_LOST``: the Lease could not be renewed for its whole duration. The
  member stops everything itself (*lost*, not revoked) before the leader can
  reassign it, and waits for the Lease to come back.
* ``LEASE_RENEWED``: the Lease is renewed. From FENCED the member rejoins empty and
  reports ``fenced: true``; it resumes only on an assignment of a newer generation.
* ``LEAVE`` / ``RELEASED``: SIGTERM: stop everything, report nothing owned, delete
  the Lease, exit.

The table is the single place that says what may happen when: the SDK session
feeds every input through ``transition`` and anything else raises
``LocalProtocolError`` (a bug in the session, never the peer's fault).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping

from kooper.core import errors


class MemberState(enum.Enum):
    """Where a member is in its lifecycle."""

    UNJOINED = "unjoined"
    JOINING = "joining"
    STABLE = "stable"
    REVOKING = "revoking"
    FENCED = "fenced"
    LEAVING = "leaving"
    LEFT = "left"


class MemberInput(enum.Enum):
    """What can happen to a member."""

    JOIN = "join"
    ASSIGN = "assign"
    REVOKE = "revoke"
    STOPPED = "stopped"
    LEASE_LOST = "lease-lost"
    LEASE_RENEWED = "lease-renewed"
    LEAVE = "leave"
    RELEASED = "released"


_S = MemberState
_I = MemberInput

TRANSITIONS: Mapping[tuple[MemberState, MemberInput], MemberState] = {
    (_S.UNJOINED, _I.JOIN): _S.JOINING,
    (_S.UNJOINED, _I.LEAVE): _S.LEAVING,
    # Joining: waiting for the first assignment (or the first after fencing).
    (_S.JOINING, _I.ASSIGN): _S.STABLE,
    (_S.JOINING, _I.REVOKE): _S.REVOKING,
    (_S.JOINING, _I.LEASE_RENEWED): _S.JOINING,
    (_S.JOINING, _I.LEASE_LOST): _S.FENCED,
    (_S.JOINING, _I.LEAVE): _S.LEAVING,
    # Stable: running what it was assigned (starts of the current assignment included).
    (_S.STABLE, _I.ASSIGN): _S.STABLE,
    (_S.STABLE, _I.REVOKE): _S.REVOKING,
    (_S.STABLE, _I.LEASE_RENEWED): _S.STABLE,
    (_S.STABLE, _I.LEASE_LOST): _S.FENCED,
    (_S.STABLE, _I.LEAVE): _S.LEAVING,
    # Revoking: stops in flight; a newer assignment may arrive meanwhile.
    (_S.REVOKING, _I.ASSIGN): _S.REVOKING,
    (_S.REVOKING, _I.REVOKE): _S.REVOKING,
    (_S.REVOKING, _I.STOPPED): _S.STABLE,
    (_S.REVOKING, _I.LEASE_RENEWED): _S.REVOKING,
    (_S.REVOKING, _I.LEASE_LOST): _S.FENCED,
    (_S.REVOKING, _I.LEAVE): _S.LEAVING,
    # Fenced: everything stopped as lost; assignments are ignored until the Lease is back.
    (_S.FENCED, _I.LEASE_LOST): _S.FENCED,
    (_S.FENCED, _I.LEASE_RENEWED): _S.JOINING,
    (_S.FENCED, _I.LEAVE): _S.LEAVING,
    # Leaving: stopping everything, then deleting the Lease.
    (_S.LEAVING, _I.LEAVE): _S.LEAVING,
    (_S.LEAVING, _I.RELEASED): _S.LEFT,
}
"""Every legal (state, input) pair and the state it leads to."""

LIVE_STATES = frozenset({_S.JOINING, _S.STABLE, _S.REVOKING})
"""States in which the member holds its Lease and may run resources."""


def transition(state: MemberState, event: MemberInput) -> MemberState:
    """The state after ``event``; ``LocalProtocolError`` if the table does not allow it."""
    try:
        return TRANSITIONS[state, event]
    except KeyError:
        raise errors.LocalProtocolError(
            f"member cannot {event.value} while {state.value}"
        ) from None


def accepts_assignments(state: MemberState) -> bool:
    """Whether an assignment may be applied in ``state`` (fenced or leaving members ignore it)."""
    return (state, _I.ASSIGN) in TRANSITIONS
