"""What a ``Session`` asks its transport to do: the actions, as frozen values.

The transport runs each batch that ``Session.next_actions`` returns and
acknowledges every action with ``Session.done``. ``Start``/``Stop``/``Pause``/
``Resume`` are user callbacks; ``WriteReport`` and ``ReleaseLease`` are API calls.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from kooper.core import model
from kooper.protocol import messages


@dataclasses.dataclass(frozen=True, slots=True)
class Start:
    """Run ``resource`` (call ``on_assigned``): hand task code its epoch and config."""

    resource: str
    epoch: int
    config: Mapping[str, str]
    generation: int
    protocol: model.Protocol
    connector: bool = False
    """Whether ``resource`` is a connector instance (else a task)."""


@dataclasses.dataclass(frozen=True, slots=True)
class Stop:
    """Stop ``resource``: ``on_lost`` when ``lost`` (do not commit), else ``on_revoked``."""

    resource: str
    lost: bool
    generation: int
    protocol: model.Protocol
    cleanup: bool = False
    """A start that timed out returned late: stop what it started (never owned, never
    reported as running, so no event-log row either)."""


@dataclasses.dataclass(frozen=True, slots=True)
class Pause:
    """Hold ``resource`` paused (call ``on_paused``): its connector's state is ``paused``."""

    resource: str
    generation: int


@dataclasses.dataclass(frozen=True, slots=True)
class Resume:
    """Let ``resource`` process again (call ``on_resumed``): its connector runs again."""

    resource: str
    generation: int


@dataclasses.dataclass(frozen=True, slots=True)
class WriteReport:
    """Publish ``report`` in the Lease annotation."""

    report: messages.Report


@dataclasses.dataclass(frozen=True, slots=True)
class ReleaseLease:
    """Delete the Lease: the member is leaving for good."""


@dataclasses.dataclass(frozen=True, slots=True)
class Exit:
    """End the worker process now, non-zero, so the pod restarts: something may still
    run that this member can no longer vouch for (a stop that outlived its timeout, or
    work still running when the Lease may be about to expire). Never acknowledged."""

    reason: str


Action = Start | Stop | Pause | Resume | WriteReport | ReleaseLease | Exit
