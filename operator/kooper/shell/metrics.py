"""Every Prometheus metric the operator exports (one place, so dashboards can be checked).

Labels are the group (``namespace/name``) and small enums only: never a task,
connector or member name, so cardinality stays flat at 100,000 tasks.
"""

from __future__ import annotations

import contextlib

from prometheus_client import Counter, Gauge, Histogram, start_http_server

from kooper.core import model

_LATENCY_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)

ROUNDS = Counter("kooper_rounds", "Rebalance rounds computed", ["group"])
REBALANCES = Counter(
    "kooper_rebalances", "Rounds that changed at least one member's assignment", ["group"]
)
REVOCATIONS = Counter("kooper_revocations", "Resources revoked from a member", ["group"])
MOVES = Counter("kooper_moves", "Resources newly assigned to a member", ["group"])
LOST = Counter("kooper_lost_resources", "Resources lost with a departed member", ["group"])
MEMBERS = Gauge("kooper_members", "Live members by protocol they speak", ["group", "protocol"])
ASSIGNED = Gauge("kooper_assigned", "Resources assigned to a live member", ["group"])
UNASSIGNED = Gauge(
    "kooper_unassigned", "Configured resources no live member may run", ["group"]
)
LOST_NOW = Gauge("kooper_lost", "Lost resources waiting for the scheduled rebalance", ["group"])
IMBALANCE = Gauge("kooper_imbalance", "Max minus min resources per member", ["group"])
DELAY_REMAINING = Gauge(
    "kooper_delay_remaining_seconds", "Seconds until the scheduled rebalance (0: none)", ["group"]
)
GENERATION = Gauge("kooper_generation", "The group's rebalance generation", ["group"])
COMPUTE = Histogram(
    "kooper_round_compute_seconds", "Time spent in the assignor per round", ["group"],
    buckets=(0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0),
)
LATENCY = Histogram(
    "kooper_rebalance_latency_seconds",
    "From the first event of a burst (report, departure, spec change) to ConfigMaps written",
    ["group"],
    buckets=_LATENCY_BUCKETS,
)
WRITES = Counter("kooper_api_writes", "Mutating API calls by kind", ["kind"])
CONFLICTS = Counter("kooper_api_conflicts", "409 Conflict answers (retried)", ["kind"])
BAD_INPUT = Counter("kooper_bad_input", "Bad input noticed, by reason", ["reason"])
ROUND_ERRORS = Counter("kooper_round_errors", "Rounds that failed and were retried", ["group"])
CONNECTOR_RESTARTS = Counter(
    "kooper_connector_restarts",
    "Connectors restarted in place (a new kooper.dev/restart value, acted on once)", ["group"],
)


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
) -> None:
    """Update every per-group metric after a round."""
    ROUNDS.labels(group).inc()
    COMPUTE.labels(group).observe(compute_s)
    if plan.changed:
        REBALANCES.labels(group).inc()
    REVOCATIONS.labels(group).inc(revoked)
    MOVES.labels(group).inc(sum(len(r) for r in plan.newly_assigned.values()))
    LOST.labels(group).inc(len(plan.newly_lost))
    cooperative = sum(1 for m in snapshot.members.values() if m.cooperative)
    MEMBERS.labels(group, "compatible").set(cooperative)
    MEMBERS.labels(group, "eager").set(len(snapshot.members) - cooperative)
    ASSIGNED.labels(group).set(sum(len(m.assigned) for m in plan.members.values()))
    UNASSIGNED.labels(group).set(len(plan.unassigned))
    LOST_NOW.labels(group).set(len(plan.state.lost_resources()))
    IMBALANCE.labels(group).set(imbalance)
    GENERATION.labels(group).set(plan.state.generation)
    delay = plan.state.delay
    DELAY_REMAINING.labels(group).set(
        max(0.0, (delay.deadline_ms - now_ms) / 1000) if delay else 0.0
    )


def forget_group(group: str) -> None:
    """Drop a deleted group's series."""
    for metric in (ROUNDS, REBALANCES, REVOCATIONS, MOVES, LOST, ASSIGNED, UNASSIGNED,
                   LOST_NOW, IMBALANCE, DELAY_REMAINING, GENERATION, COMPUTE, LATENCY,
                   ROUND_ERRORS, CONNECTOR_RESTARTS):
        with contextlib.suppress(KeyError):
            metric.remove(group)
    for protocol in ("compatible", "eager"):
        with contextlib.suppress(KeyError):
            MEMBERS.remove(group, protocol)
