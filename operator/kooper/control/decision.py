"""The values of a round, stage by stage (shapes only, no logic).

``control.step`` runs the stages in order, each a pure function in its own module:

=============  =====================  ======================================================
stage          module                 value
=============  =====================  ======================================================
observe        ``control.observe``    ``Observation``: the members, as Leases and pods show
situation      ``control.situation``  ``Situation``: wants, failures, hold, the snapshot
plan           ``control.planning``   ``Planned``: the assignor's plan, paced and re-issued
documents      ``control.documents``  ``Documents``: each written member's document, epochs
learn          ``control.learning``   failure records and ``control.adaptive`` samples
report         ``control.reporting``  the status's facts, Events, metrics, Connector work
=============  =====================  ======================================================

``Decision`` holds the first three and is finished into a ``Step`` (``step._finish``)
with the rest; ``Step.failed`` finishes it again once some ConfigMap writes failed.
Stages import these shapes and the rules they apply, never each other (an
import-linter contract).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

from kooper.control import (
    claims,
    departures,
    elsewhere,
    epochs,
    events,
    failures,
    liveness,
    pacing,
    rails,
    settings,
    snapshot,
    views,
)
from kooper.control.inputs import Inputs, Memory, Owner, Wanted
from kooper.core import ids, model
from kooper.protocol import messages


@dataclasses.dataclass(frozen=True, slots=True)
class Observation:
    """The members as this round sees them."""

    observed: liveness.Observed
    found: snapshot.Members
    vanished: Mapping[ids.WorkerId, liveness.Vanished]
    """Members kept while their gone pod's process may run (``liveness.vanished``)."""
    good: Mapping[ids.WorkerId, messages.Report]
    """The last good report of every leased member."""
    owners: Mapping[str, Owner]
    seen: departures.Seen
    """Pods seen stopping (``departures.terminating``)."""
    permanent: Mapping[str, bool]
    outside: elsewhere.Outside = elsewhere.NOTHING
    """Connectors left out of the round: their work still runs outside the group."""
    left: Mapping[ids.WorkerId, str] = dataclasses.field(default_factory=dict)
    """member → the incarnation whose deleted Lease's last report says it left
    (``liveness.left``)."""


@dataclasses.dataclass(frozen=True, slots=True)
class Situation:
    """What a round decides from, besides its members."""

    wanted: Wanted
    restarts: Mapping[str, tuple[str, frozenset[str]]]
    """connector → (the restart value asked for, the resources to restart)."""
    judged: failures.Judgement
    hold: rails.Hold
    snap: model.Snapshot
    configured: model.ConnectorsAndTasks
    unknown: claims.Claims
    """What members report holding that no document gave them."""
    foreign: claims.Claims
    """Claims on other members' work, left out of ``snap``."""


@dataclasses.dataclass(frozen=True, slots=True)
class Planned:
    """The round's plan, and what shaped it."""

    plan: model.Plan
    snap: model.Snapshot
    """The snapshot planned from (with the chosen grace)."""
    paced: pacing.Pacing
    carried: settings.Settings
    """Each connector's (config, state) as this round's documents carry them."""
    memberships: epochs.Memberships
    """Each member's membership after this round (``control.epochs.member_epochs``)."""


@dataclasses.dataclass(frozen=True, slots=True)
class Documents:
    """The round's documents and the largest resource epoch they issue (the membership
    epochs they name are the round's ``Planned.memberships``)."""

    writes: tuple[messages.Assignment, ...]
    floor: int
    """The largest resource epoch issued."""


@dataclasses.dataclass(frozen=True, slots=True)
class Decision:
    """A planned round before the writes' outcome is known: its stages' values."""

    inputs: Inputs
    memory: Memory
    now_ms: int
    key: object
    seen: Observation
    now: Situation
    planned: Planned
    recorder_entries: events.Reported
    problems: tuple[tuple[str, str], ...]
    bad_input: tuple[str, ...]
    early_events: tuple[events.Event, ...]
    every: Sequence[views.ConnectorView]
    """Every Connector of the group, rejected ones included (``inputs`` lacks those)."""
    rejected: Mapping[str, tuple[object, str]]
