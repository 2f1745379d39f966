"""What a controller step decides to do: the writes, in order, and what follows them.

``Step.writes`` (in ``control.step``) orders these: deletions of departed members'
ConfigMaps, then the members' new Assignments, then the WorkerGroup status;
``Connectors`` and ``Metrics`` are what the caller does after the writes.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from kooper.control import adaptive, failures, restarts, status, views
from kooper.control.inputs import Owner
from kooper.core import ids, model
from kooper.protocol import messages


@dataclasses.dataclass(frozen=True, slots=True)
class GroupStatus:
    """The WorkerGroup status write (after the ConfigMaps)."""

    facts: status.GroupFacts
    state: model.PlanState
    """The planner state to persist (``state.encode``)."""
    owners: Mapping[str, Owner]
    generation: int
    """The WorkerGroup's ``metadata.generation`` this status observed."""
    member_epoch: int = 0
    """The largest membership epoch issued (``state.encode(member_epoch=)``)."""
    epoch_floor: int = 0
    """The largest per-resource epoch issued (``state.encode(epoch_floor=)``)."""
    learned: adaptive.Learned = dataclasses.field(default_factory=adaptive.Learned)
    """What the group learned (``state.encode(learned=)``)."""
    terminating: frozenset[tuple[str, str]] = frozenset()
    """Members whose pod was seen terminating (``state.encode(terminating=)``)."""
    adaptive_status: Mapping[str, Any] | None = None
    """``status.adaptive`` (``control.adaptive.summary``; ``kooper`` policy only)."""

    def document(self, *, encoded: Mapping[str, Any], previous: Mapping[str, Any]
                 ) -> dict[str, Any]:
        """The whole status; conditions keep their times from ``previous``."""
        document = status.group_status(self.facts, state=encoded, generation=self.generation,
                                       previous=previous)
        if self.adaptive_status is not None:
            document["adaptive"] = dict(self.adaptive_status)
        return document


@dataclasses.dataclass(frozen=True, slots=True)
class Connectors:
    """The Connector statuses to refresh after the round (the shell trails them)."""

    plan: model.Plan
    snapshot: model.Snapshot
    connectors: Sequence[views.ConnectorView]
    restarts: restarts.Done
    failures: failures.Book
    """Failed resources, for their ``Failed`` entries."""
    task_restarts: Mapping[str, str]
    """connector → the ``kooper.dev/restart-task`` value acted on."""
    rejected: Mapping[str, str]
    """connector → why it is left out (``control.containment``)."""
    dirty: frozenset[str]
    """Connectors whose restart record changed this round."""
    settled: bool
    """Whether every member has applied its latest document."""


@dataclasses.dataclass(frozen=True, slots=True)
class Metrics:
    """Counter updates beyond ``shell.metrics.observe_round``."""

    bad_input: tuple[str, ...] = ()
    ignored_leases: int = 0
    """Member Leases ignored this round because their label or holder names another
    member than their name does (a gauge)."""
    connector_restarts: int = 0
    failed_resources: int = 0
    """Resources (instances and tasks) failed now (a gauge)."""
    resource_restarts: tuple[tuple[str, int], ...] = ()
    """(``automatic`` | ``manual``, count) of failed-resource restarts written this round."""
    grace_ms: int | None = None
    """How long the work of a member departing unplanned now waits for it (a gauge;
    ``control.adaptive``, the ``status.adaptive`` knob; the whole delay under ``kip415``)."""
    rejected_resources: int = 0
    """Instances and tasks of connectors left unassigned because no document with them
    fits (``control.containment``; a gauge)."""
    balancing_deferred: int = 0
    """Balancing revocations held back this round (``control.pacing``; a counter)."""
    balancing_pending: int = 0
    """Balancing moves left for later rounds (``control.pacing``; a gauge)."""


@dataclasses.dataclass(frozen=True, slots=True)
class DeleteConfigMap:
    """Delete a departed member's ConfigMap (absent already is fine)."""

    member: ids.WorkerId


@dataclasses.dataclass(frozen=True, slots=True)
class WriteConfigMap:
    """Write a member's Assignment."""

    assignment: messages.Assignment


@dataclasses.dataclass(frozen=True, slots=True)
class WriteStatus:
    """Write the WorkerGroup status (the persisted planner state)."""

    status: GroupStatus


Write = DeleteConfigMap | WriteConfigMap | WriteStatus
