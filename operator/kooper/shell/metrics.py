"""Every Prometheus metric the operator exports (one place, so dashboards can be checked).

Names follow Prometheus conventions: base units in the name (``_seconds``,
``_timestamp_seconds``), counters end in ``_total``, a count says what it counts
(``_resources``, ``_members``), an info metric ends in ``_info`` and is always 1.
``UNITLESS`` lists the few gauges with no unit and why; a test holds every name
to these rules, and ``docs/operator.md`` has the table.

Labels are the WorkerGroup's ``namespace`` and ``workergroup`` and small enums only:
never a task, connector or member name, so cardinality stays flat at 100,000 tasks.
Callers pass a runner's key (``namespace/name``): ``labels("ns/name")`` splits it.
"""

from __future__ import annotations

import contextlib
import platform
import time
from typing import Generic, TypeVar

from prometheus_client import Counter, Gauge, Histogram, start_http_server
from prometheus_client.metrics import MetricWrapperBase

import kooper
from kooper.core import delays, model

GROUP_LABELS = ("namespace", "workergroup")
"""The labels of every per-group metric, in this order."""

UNITLESS = {
    "kooper_assignment_generation": "a generation number, not a quantity",
    "kooper_build_info": "an info metric (always 1, the facts are labels)",
    "kooper_leader": "a state (1: this replica runs the rounds, 0: a standby)",
}
"""Gauges without a unit in their name, and why."""

_LATENCY_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)

_M = TypeVar("_M", bound=MetricWrapperBase)


class PerGroup(Generic[_M]):
    """A metric labelled by WorkerGroup, addressed by the runner's ``namespace/name`` key."""

    def __init__(self, metric: _M) -> None:
        self.metric = metric

    def labels(self, group: str, *more: str) -> _M:
        """The child for ``group`` (``namespace/name``) and the metric's other labels."""
        namespace, _, name = group.partition("/")
        return self.metric.labels(namespace, name, *more)

    def remove(self, group: str, *more: str) -> None:
        """Drop ``group``'s series (``KeyError`` if it has none)."""
        namespace, _, name = group.partition("/")
        self.metric.remove(namespace, name, *more)


def _counter(name: str, documentation: str) -> PerGroup[Counter]:
    return PerGroup(Counter(name, documentation, GROUP_LABELS))


def _gauge(name: str, documentation: str, *more: str) -> PerGroup[Gauge]:
    return PerGroup(Gauge(name, documentation, (*GROUP_LABELS, *more)))


BUILD_INFO = Gauge("kooper_build_info", "The running operator's version (always 1)",
                   ["version", "python"])
BUILD_INFO.labels(kooper.__version__, platform.python_version()).set(1)
LEADER = Gauge(
    "kooper_leader",
    "1 while this replica runs the rounds (it holds the leader Lease, or runs without "
    "leader election), 0 on a standby")

ROUNDS = _counter("kooper_rounds_total", "Rebalance rounds computed")
REBALANCES = _counter(
    "kooper_rebalances_total", "Rounds that changed at least one member's assignment")
REVOCATIONS = _counter("kooper_resource_revocations_total", "Resources revoked from a member")
MOVES = _counter("kooper_resource_moves_total", "Resources newly assigned to a member")
LOST = _counter("kooper_resource_losses_total", "Resources lost with a departed member")
ROUND_ERRORS = _counter("kooper_round_failures_total", "Rounds that failed and were retried")
CONNECTOR_RESTARTS = _counter(
    "kooper_connector_restarts_total",
    "Connectors restarted in place (a new kooper.dev/restart value, acted on once)",
)
MEMBERS = _gauge("kooper_members", "Live members by protocol they speak", "protocol")
FENCED = _gauge("kooper_fenced_members", "Live members that report having fenced themselves")
PENDING = _gauge(
    "kooper_pending_members", "Members that have not applied their latest assignment yet")
ASSIGNED = _gauge("kooper_assigned_resources", "Resources assigned to a live member")
UNASSIGNED = _gauge("kooper_unassigned_resources", "Configured resources no live member may run")
LOST_NOW = _gauge(
    "kooper_lost_resources", "Lost resources waiting for the scheduled rebalance")
IMBALANCE = _gauge("kooper_imbalance_resources", "Max minus min resources per member")
DELAY_REMAINING = _gauge(
    "kooper_delay_remaining_seconds",
    "Seconds until the scheduled rebalance, as of the last round (0: none)")
GRACE = _gauge(
    "kooper_unplanned_departure_grace_seconds",
    "How long the work of a member departing unplanned now waits for it (control.adaptive: "
    "the configured delay while learning, 0 when moving at once is cheaper)")
DELAY_DEADLINE = _gauge(
    "kooper_delay_deadline_timestamp_seconds",
    "Unix time the scheduled rebalance is due (0: none); in the past means overdue")
LAST_ROUND = _gauge(
    "kooper_last_round_timestamp_seconds", "Unix time of the group's last completed round")
GENERATION = _gauge("kooper_assignment_generation", "The group's rebalance generation")
IGNORED_LEASES = _gauge(
    "kooper_ignored_lease_members",
    "Member Leases ignored because their label or holder names another member than their "
    "name (kooper-<pod>) does: forged or broken copies, as of the last round")
COMPUTE = PerGroup(Histogram(
    "kooper_round_compute_seconds", "Time spent in the assignor per round", GROUP_LABELS,
    buckets=(0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0),
))
LATENCY = PerGroup(Histogram(
    "kooper_rebalance_latency_seconds",
    "From the first event of a burst (report, departure, spec change) to ConfigMaps written",
    GROUP_LABELS,
    buckets=_LATENCY_BUCKETS,
))
CONFLICTS = Counter("kooper_api_conflicts_total", "409 Conflict answers (retried), by kind",
                    ["kind"])
LOGINS = Counter("kooper_logins_total",
                 "Logins to the API server: start, 401 (a rejected token), expiring, kopf",
                 ["reason"])
BAD_INPUT = Counter("kooper_bad_inputs_total", "Bad input noticed, by reason", ["reason"])
EVENTS_DROPPED = Counter(
    "kooper_events_dropped_total",
    "Events the API server refused or never answered, after their retries")

_PER_GROUP: tuple[PerGroup[Counter] | PerGroup[Gauge] | PerGroup[Histogram], ...] = (
    ROUNDS, REBALANCES, REVOCATIONS, MOVES, LOST, ROUND_ERRORS, CONNECTOR_RESTARTS, FENCED,
    PENDING, ASSIGNED, UNASSIGNED, LOST_NOW, IMBALANCE, DELAY_REMAINING, DELAY_DEADLINE,
    LAST_ROUND, GENERATION, COMPUTE, LATENCY, IGNORED_LEASES, GRACE,
)
_PROTOCOLS = ("compatible", "eager")


def serve(port: int) -> None:
    """Expose ``/metrics`` on ``port`` (0: do not serve)."""
    if port:
        start_http_server(port)


def observe_round(
    group: str,
    *,
    plan: model.Plan,
    snapshot: model.Snapshot,
    compute_s: float,
    now_ms: int,
    revoked: int,
    imbalance: int,
    grace_ms: int | None = None,
) -> None:
    """Update every per-group metric after a round (``group``: ``namespace/name``).

    ``grace_ms`` is the step's ``Metrics.grace_ms`` (else the snapshot's grace).
    """
    ROUNDS.labels(group).inc()
    # Counters bumped elsewhere are born at 0 here: a series first seen at 1 hides its
    # first step from increase() and rate() (and so from KooperRoundFailures).
    for counter in (ROUND_ERRORS, CONNECTOR_RESTARTS, BALANCING_DEFERRED):
        counter.labels(group)
    for trigger in _TRIGGERS:
        RESOURCE_RESTARTS.labels(group, trigger)
    COMPUTE.labels(group).observe(compute_s)
    if plan.changed:
        REBALANCES.labels(group).inc()
    REVOCATIONS.labels(group).inc(revoked)
    MOVES.labels(group).inc(sum(len(r) for r in plan.newly_assigned.values()))
    LOST.labels(group).inc(len(plan.newly_lost))
    live = snapshot.members.values()
    cooperative = sum(1 for m in live if m.cooperative)
    MEMBERS.labels(group, "compatible").set(cooperative)
    MEMBERS.labels(group, "eager").set(len(snapshot.members) - cooperative)
    FENCED.labels(group).set(sum(1 for m in live if m.fenced))
    PENDING.labels(group).set(sum(
        1 for name, member_plan in plan.members.items()
        if name in snapshot.members and snapshot.members[name].generation < member_plan.generation
    ))
    ASSIGNED.labels(group).set(sum(len(m.assigned) for m in plan.members.values()))
    UNASSIGNED.labels(group).set(len(plan.unassigned))
    LOST_NOW.labels(group).set(len(plan.state.lost_resources()))
    IMBALANCE.labels(group).set(imbalance)
    GENERATION.labels(group).set(plan.state.generation)
    # The deadline is on the runner's clock (``now_ms``); it is exported as Unix time so
    # an alert can compare it with ``time()`` between rounds, when nothing updates it.
    wall = time.time()
    delay = plan.state.delay
    remaining = max(0.0, (delay.deadline_ms - now_ms) / 1000) if delay else 0.0
    DELAY_REMAINING.labels(group).set(remaining)
    DELAY_DEADLINE.labels(group).set(wall + (delay.deadline_ms - now_ms) / 1000 if delay else 0)
    LAST_ROUND.labels(group).set(wall)
    if grace_ms is None:
        grace_ms = delays.effective_grace_ms(snapshot.settings.policy,
                                             snapshot.settings.max_delay_ms, snapshot.grace_ms)
    GRACE.labels(group).set(grace_ms / 1000)


def forget_group(group: str) -> None:
    """Drop a deleted group's series (``group``: ``namespace/name``)."""
    for metric in _PER_GROUP:
        with contextlib.suppress(KeyError):
            metric.remove(group)
    for protocol in _PROTOCOLS:
        with contextlib.suppress(KeyError):
            MEMBERS.remove(group, protocol)
    forget_failures(group)
    forget_pacing(group)



# --- failed instances and tasks (control.failures) ---------------------------------

FAILED_RESOURCES = _gauge(
    "kooper_failed_resources",
    "Connector instances and tasks failed on the member that holds them")
RESOURCE_RESTARTS = PerGroup(Counter(
    "kooper_failed_resource_restarts_total",
    "Restarts in place of failed instances and tasks, by trigger (automatic: autoRestart; "
    "manual: kooper.dev/restart-task)", (*GROUP_LABELS, "trigger")))
_TRIGGERS = ("automatic", "manual")
REJECTED = _gauge(
    "kooper_rejected_resources",
    "Instances and tasks of connectors left unassigned because a member's assignment with "
    "them would not fit a ConfigMap")


def observe_failures(group: str, *, failed: int, restarts: tuple[tuple[str, int], ...],
                     rejected: int = 0) -> None:
    """The failed-resource and rejected-connector gauges and the restart counters."""
    FAILED_RESOURCES.labels(group).set(failed)
    REJECTED.labels(group).set(rejected)
    for trigger, count in restarts:
        RESOURCE_RESTARTS.labels(group, trigger).inc(count)


def forget_failures(group: str) -> None:
    """Drop a deleted group's failure series."""
    for gauge in (FAILED_RESOURCES, REJECTED):
        with contextlib.suppress(KeyError):
            gauge.remove(group)
    for trigger in _TRIGGERS:
        with contextlib.suppress(KeyError):
            RESOURCE_RESTARTS.remove(group, trigger)


# --- pacing balancing moves (control.pacing) ----------------------------------------

BALANCING_DEFERRED = _counter(
    "kooper_balancing_deferred_resources_total",
    "Balancing revocations held back by spec.balancing.maxMovesPerRound (they move in a "
    "later round)")
BALANCING_PENDING = _gauge(
    "kooper_balancing_pending_resources",
    "Balancing moves left for later rounds by spec.balancing.maxMovesPerRound")


def observe_pacing(group: str, *, deferred: int, pending: int) -> None:
    """The pacing counter and gauge after a round."""
    if deferred:
        BALANCING_DEFERRED.labels(group).inc(deferred)
    BALANCING_PENDING.labels(group).set(pending)


def forget_pacing(group: str) -> None:
    """Drop a deleted group's pacing series."""
    for metric in (BALANCING_DEFERRED, BALANCING_PENDING):
        with contextlib.suppress(KeyError):
            metric.remove(group)


def count_login(reason: str) -> None:
    """One more login (``login.Login``'s hook)."""
    LOGINS.labels(reason).inc()
