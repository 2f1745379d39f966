"""The worker's timing and protocol settings (one frozen value, passed to ``Worker``)."""

from __future__ import annotations

import dataclasses

from kooper.core import model
from kooper.protocol import timing

BOTH_PROTOCOLS = frozenset({model.Protocol.EAGER, model.Protocol.COMPATIBLE})
"""What a current worker speaks."""


@dataclasses.dataclass(frozen=True, slots=True)
class Settings:
    """Timing and protocol settings of one worker.

    The lease duration, renew interval, stop timeout and fence margin form the
    timing budget (``protocol.timing``, docs/protocol.md): a combination in which
    the member could not renew before it fences itself, or could not finish its
    stops before the operator may expire its Lease, raises ``TimingBudgetError``
    (a ``ValueError``) here.
    """

    lease_duration_s: int = 30
    """``leaseDurationSeconds``: how long the operator waits for a renewal."""
    renew_interval_s: float = 10.0
    """How often the Lease is renewed (and the report rewritten)."""
    tick_interval_s: float = 0.5
    """The longest the main loop sleeps when nothing happens. Assignments, renewals,
    finished callbacks and the fencing deadline wake it at once."""
    resync_interval_s: float = 30.0
    """Safety net under the watch: the ConfigMap is also re-read this often."""
    watch_timeout_s: float = 300.0
    """``timeoutSeconds`` of one watch request; the watch then resumes where it was."""
    callback_timeout_s: float = 30.0
    """Longest a start, pause or resume callback may take before it is reported failed."""
    protocols: frozenset[model.Protocol] = BOTH_PROTOCOLS
    """The protocols this worker advertises (``{EAGER}`` models an old worker)."""
    max_parallel_callbacks: int = 16
    """Callbacks of one batch that run at the same time (stops have a pool of their own)."""
    stop_timeout_s: float | None = None
    """Longest a stop callback may take; a stop still running past it ends the process.
    ``None``: a third of the lease (10 s of the default 30 s)."""
    fence_margin_s: float | None = None
    """How long before the Lease could expire everything must have stopped.
    ``None``: a fifteenth of the lease (2 s of the default 30 s)."""

    def __post_init__(self) -> None:
        self.budget.check()

    @property
    def budget(self) -> timing.Budget:
        """The timing budget, unset parts scaled from the lease."""
        return timing.Budget.of(
            self.lease_duration_s,
            renew_interval_s=self.renew_interval_s,
            stop_timeout_s=self.stop_timeout_s,
            fence_margin_s=self.fence_margin_s,
        )
