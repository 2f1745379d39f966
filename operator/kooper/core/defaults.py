"""Every default of the WorkerGroup and Connector specs, in one place.

The CRDs (``crds/*.yaml``, copied into the chart) write the same values as their
``default:``s; ``tests/control/test_defaults.py`` fails when the two drift.
"""

from collections.abc import Mapping

SCHEDULED_REBALANCE_MAX_DELAY = "300s"
"""``spec.scheduledRebalanceMaxDelay`` as the CRD writes it (KIP-415's default)."""
SCHEDULED_REBALANCE_MAX_DELAY_MS = 300_000
"""The same delay in milliseconds, as ``model.Settings`` and ``kooper replay`` use it."""
PROTOCOL = "compatible"
"""``spec.protocol``."""
POLICY = "kooper"
"""``spec.policy``."""
LEASE_DURATION_S = 30
"""``spec.leaseDurationSeconds``."""
CLOCK_SKEW_S = 5
"""``spec.clockSkewSeconds``."""
TASKS_MAX = 1
"""``Connector.spec.tasksMax``."""
TASKS_MAX_LIMIT = 10_000
"""The CRD's ``maximum`` of ``Connector.spec.tasksMax`` (a bound, not a default: one member's
assignment and report must carry every task of a connector; tests/protocol/test_bounds.py)."""
CONNECTOR_STATE = "Running"
"""``Connector.spec.state`` as the CRD writes it (``control.views.connector_state`` reads it
as the operator's ``running``)."""
AUTO_RESTART_ENABLED = True
"""``Connector.spec.autoRestart.enabled``: restart failed instances and tasks by themselves."""
AUTO_RESTART_MAX_RESTARTS = 10
"""``Connector.spec.autoRestart.maxRestarts``: automatic restarts before a resource stays
Failed."""
AUTO_RESTART_INITIAL_BACKOFF_S = 10
"""``Connector.spec.autoRestart.initialBackoffSeconds``: the wait before the first
automatic restart; it doubles with every restart made."""
AUTO_RESTART_MAX_BACKOFF_S = 600
"""The longest wait between automatic restarts (not configurable)."""
RAILS_MAX_DEPARTED_FRACTION = 1.0
"""``WorkerGroup.spec.rails.maxDepartedFraction``: hold reassignment while more than this
fraction of the members that held work are gone at once (1: never hold)."""
BALANCING_MAX_MOVES_PER_ROUND = "25%"
"""``WorkerGroup.spec.balancing.maxMovesPerRound`` under policy ``kooper``: at most this many
resources revoked for balance in one round, a count or a percentage of the group's
resources (``control.pacing``)."""
BALANCING_MAX_MOVES_BY_POLICY: Mapping[str, int | str | None] = {
    "kooper": BALANCING_MAX_MOVES_PER_ROUND,
    "kip415": None,
}
"""``spec.balancing.maxMovesPerRound`` when the spec leaves it unset, by policy; the only
place that says so (``control.views.GroupView.balancing_limit`` reads it). ``None``: no
pacing. ``kip415`` does not pace, as Kafka Connect's ``IncrementalCooperativeAssignor``
does not: its rounds then revoke and delay as Connect's do, round for round
(``tests/core/test_kafka_step.py``). The CRD stores no default, since it depends on the
policy."""
