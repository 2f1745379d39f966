"""The timing budget of a member Lease: when a worker fences itself, and why that is safe.

Four numbers (``docs/protocol.md``, "The timing budget"):

* ``L``, the lease duration (``leaseDurationSeconds``);
* ``R``, how often the worker renews its Lease;
* ``S``, the stop timeout: how long one stop callback may take;
* ``M``, the fence margin.

The operator declares a member departed no sooner than ``L`` after it *observed*
the member's last renewal, and it cannot observe a renewal before the worker sent
it. So the worker counts from when it sent its last successful renewal:

* at ``L - S - M`` it fences itself: everything it runs stops as lost;
* each of those stops has ``S`` to finish;
* at ``L - M`` anything that may still run (a stop or a start that has not
  returned) ends the worker process, so nothing runs unowned past it.

Everything is stopped ``M`` before the earliest moment the operator may hand the
work to someone else: ``M`` covers the two clocks' rates, the time the process
takes to die and the worker's reaction time. The budget is sound when
``R + S + M < L``: a member then renews at least once before it would fence, and
``L - S - M - R`` is how long its renewals may keep failing before it fences.

Unset parts scale with the lease (``R`` and ``S`` a third of it, ``M`` a
fifteenth: 10 s, 10 s and 2 s of the default 30 s), so setting only the lease
always gives a sound budget. The WorkerGroup CRD checks the same rule at
admission (``crds/workergroups.yaml``); the worker SDK checks it in
``sdk.Settings``.
"""

from __future__ import annotations

import dataclasses

from kooper.core import errors


class TimingBudgetError(errors.KooperError, ValueError):
    """A lease duration, renew interval, stop timeout and margin that do not fit together."""


def default_renew_interval_s(lease_duration_s: float) -> float:
    """``R`` when unset: a third of the lease."""
    return lease_duration_s / 3


def default_stop_timeout_s(lease_duration_s: float) -> float:
    """``S`` when unset: a third of the lease."""
    return lease_duration_s / 3


def default_fence_margin_s(lease_duration_s: float) -> float:
    """``M`` when unset: a fifteenth of the lease."""
    return lease_duration_s / 15


@dataclasses.dataclass(frozen=True, slots=True)
class Budget:
    """One member's timing budget, in seconds."""

    lease_duration_s: float
    renew_interval_s: float
    stop_timeout_s: float
    fence_margin_s: float

    @classmethod
    def of(
        cls,
        lease_duration_s: float,
        *,
        renew_interval_s: float | None = None,
        stop_timeout_s: float | None = None,
        fence_margin_s: float | None = None,
    ) -> Budget:
        """The budget with unset parts scaled from the lease (not yet checked)."""
        lease = lease_duration_s
        return cls(
            lease_duration_s=lease,
            renew_interval_s=default_renew_interval_s(lease)
            if renew_interval_s is None
            else renew_interval_s,
            stop_timeout_s=default_stop_timeout_s(lease)
            if stop_timeout_s is None
            else stop_timeout_s,
            fence_margin_s=default_fence_margin_s(lease)
            if fence_margin_s is None
            else fence_margin_s,
        )

    @property
    def fence_after_s(self) -> float:
        """Since the last renewal was sent: when the member fences itself (``L - S - M``)."""
        return self.lease_duration_s - self.stop_timeout_s - self.fence_margin_s

    @property
    def deadline_s(self) -> float:
        """Since the last renewal was sent: when nothing may run any more (``L - M``)."""
        return self.lease_duration_s - self.fence_margin_s

    @property
    def retry_window_s(self) -> float:
        """How long renewals may keep failing after a missed one before the member fences."""
        return self.fence_after_s - self.renew_interval_s

    def problems(self) -> list[str]:
        """What is wrong with this budget (empty: it is sound)."""
        found = [
            f"{name} must be positive, got {value:g}"
            for name, value in (
                ("lease duration", self.lease_duration_s),
                ("renew interval", self.renew_interval_s),
                ("stop timeout", self.stop_timeout_s),
                ("fence margin", self.fence_margin_s),
            )
            if not value > 0
        ]
        total = self.renew_interval_s + self.stop_timeout_s + self.fence_margin_s
        if not found and total >= self.lease_duration_s:  # the CRD's rule, term for term
            found.append(
                f"renew interval {self.renew_interval_s:g}s + stop timeout "
                f"{self.stop_timeout_s:g}s + fence margin {self.fence_margin_s:g}s must be "
                f"shorter than the lease duration {self.lease_duration_s:g}s: the member "
                f"fences itself {self.fence_after_s:g}s after its last renewal so its stops "
                "finish before the operator may expire its Lease, and it must renew before that"
            )
        return found

    def check(self) -> Budget:
        """``self`` if sound; else ``TimingBudgetError`` saying what breaks it."""
        if found := self.problems():
            raise TimingBudgetError("; ".join(found))
        return self
