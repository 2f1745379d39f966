"""The worker's timing and protocol settings (one frozen value, passed to ``Worker``)."""

from __future__ import annotations

import dataclasses

from kooper.core import model

BOTH_PROTOCOLS = frozenset({model.Protocol.EAGER, model.Protocol.COMPATIBLE})
"""What a current worker speaks."""


@dataclasses.dataclass(frozen=True, slots=True)
class Settings:
    """Timing and protocol settings of one worker."""

    lease_duration_s: int = 30
    """``leaseDurationSeconds``: unrenewed this long, the member fences itself."""
    renew_interval_s: float = 10.0
    """How often the Lease is renewed (and the report rewritten)."""
    tick_interval_s: float = 0.5
    """How often the main loop wakes when nothing happens (the self-fencing check).
    Assignments, renewals and late callbacks wake it at once."""
    resync_interval_s: float = 30.0
    """Safety net under the watch: the ConfigMap is also re-read this often."""
    watch_timeout_s: float = 300.0
    """``timeoutSeconds`` of one watch request; the watch then resumes where it was."""
    callback_timeout_s: float = 30.0
    """Longest a single callback may take before it is reported failed."""
    protocols: frozenset[model.Protocol] = BOTH_PROTOCOLS
    """The protocols this worker advertises (``{EAGER}`` models an old worker)."""
    max_parallel_callbacks: int = 16
    """Callbacks of one batch that run at the same time."""
