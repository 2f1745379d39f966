"""Worker metrics in the Prometheus text format, on the standard library.

The SDK may not import ``prometheus_client`` (a worker image installs ``kooper``
and nothing else), so this module writes the text exposition format (version
0.0.4) itself: ``# HELP`` and ``# TYPE`` lines, then one sample per line, label
values escaped. It is small on purpose: counters, gauges and histograms, no
registry magic. ``sdk.health`` serves ``WorkerMetrics.render()`` on ``/metrics``.

Threads: the main loop owns the session, so it takes a snapshot of it once per
turn (``observe``); callbacks time themselves on the pool's threads (``timed``);
the health server's thread only reads, under one lock. A scrape never touches
the session itself.

Names follow Prometheus conventions (``docs/sdk.md`` lists them): base units
(seconds), ``_total`` on counters, the unit noun (``resources``) on counts, and a
few documented unitless values (a generation, 0/1 states).
"""

from __future__ import annotations

import bisect
import dataclasses
import functools
import math
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import ParamSpec, Protocol

import kooper
from kooper.protocol import member
from kooper.sdk import session as sdk_session

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
"""The ``Content-Type`` of the text exposition format."""

DURATION_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
"""Histogram bounds (seconds) for callback durations."""

RESOURCE_STATES = ("running", "paused", "failed", "left_running")
"""``kooper_worker_resources`` states: running, held paused, its last callback failed
(not running), or a start that timed out and whose callback still runs."""
RESOURCE_KINDS = ("connector", "task")
"""``kooper_worker_resources`` kinds. With the states, a fixed set of series: a member's
metrics never grow with the number of tasks it runs (no per-resource label: at 100,000
tasks that would be 100,000 series). Which resource is where is in the Lease report and
the Connector status."""

Labels = tuple[tuple[str, str], ...]
_P = ParamSpec("_P")


@dataclasses.dataclass(frozen=True, slots=True)
class Family:
    """One metric family: its name, type, help text and samples."""

    name: str
    kind: str
    """``counter``, ``gauge`` or ``histogram``."""
    help: str
    samples: tuple[tuple[str, Labels, float], ...]
    """``(sample name, labels, value)``; a histogram's have the ``_bucket``,
    ``_sum`` and ``_count`` suffixes."""


def _escape_label(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _escape_help(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def _number(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if value == int(value) and abs(value) < 2**53:
        return str(int(value))
    return repr(value)


def exposition(families: Iterable[Family]) -> str:
    """The text exposition of ``families`` (one ``# HELP``/``# TYPE`` pair each)."""
    lines: list[str] = []
    for family in families:
        lines.append(f"# HELP {family.name} {_escape_help(family.help)}")
        lines.append(f"# TYPE {family.name} {family.kind}")
        for name, labels, value in family.samples:
            if labels:
                text = ",".join(f'{key}="{_escape_label(val)}"' for key, val in labels)
                lines.append(f"{name}{{{text}}} {_number(value)}")
            else:
                lines.append(f"{name} {_number(value)}")
    return "\n".join(lines) + "\n"


class Histogram:
    """A thread-safe histogram with one label (its value chosen per observation)."""

    def __init__(self, name: str, help_text: str, *, label: str,
                 buckets: tuple[float, ...] = DURATION_BUCKETS) -> None:
        self.name = name
        self.help = help_text
        self.label = label
        self.buckets = tuple(sorted(buckets))
        self._lock = threading.Lock()
        self._counts: dict[str, list[int]] = {}
        self._sums: dict[str, float] = {}

    def observe(self, label_value: str, value: float) -> None:
        """Count one observation of ``value`` under ``label_value``."""
        with self._lock:
            counts = self._counts.setdefault(label_value, [0] * (len(self.buckets) + 1))
            counts[bisect.bisect_left(self.buckets, value)] += 1
            self._sums[label_value] = self._sums.get(label_value, 0.0) + value

    def family(self) -> Family:
        """The cumulative ``_bucket`` series, ``_sum`` and ``_count`` per label value."""
        samples: list[tuple[str, Labels, float]] = []
        with self._lock:
            for value in sorted(self._counts):
                running = 0
                for bound, count in zip((*self.buckets, math.inf), self._counts[value],
                                        strict=True):
                    running += count
                    # ``repr``: "1.0", as prometheus_client writes bucket bounds.
                    le = "+Inf" if math.isinf(bound) else repr(float(bound))
                    labels = ((self.label, value), ("le", le))
                    samples.append((f"{self.name}_bucket", labels, running))
                samples.append((f"{self.name}_sum", ((self.label, value),), self._sums[value]))
                samples.append((f"{self.name}_count", ((self.label, value),), running))
        return Family(self.name, "histogram", self.help, tuple(samples))


class LeaseView(Protocol):
    """What ``observe`` reads from a ``sdk.lease.LeaseKeeper``."""

    renewals: int
    renewal_failures: int


class WatchView(Protocol):
    """What ``observe`` reads from a ``sdk.watch.AssignmentWatch``."""

    failures: int


@dataclasses.dataclass(frozen=True, slots=True)
class _Snapshot:
    member_state: str = member.MemberState.UNJOINED.value
    resources: Mapping[tuple[str, str], int] = dataclasses.field(
        default_factory=lambda: dict.fromkeys(
            ((k, s) for k in RESOURCE_KINDS for s in RESOURCE_STATES), 0))
    """(kind, state) -> how many resources."""
    generation: int = -1
    fenced: bool = False
    fencings: int = 0
    renewals: int = 0
    renewal_failures: int = 0
    watch_failures: int = 0


def resource_states(session: sdk_session.Session) -> dict[str, str]:
    """Each resource the member runs or tried to run, with its ``RESOURCE_STATES`` value."""
    states = dict.fromkeys(session.report().failed, "failed")
    states.update(dict.fromkeys(session.owned, "running"))
    states.update(dict.fromkeys(session.paused, "paused"))
    states.update(dict.fromkeys(session.left_running, "left_running"))
    return states


def resource_counts(session: sdk_session.Session) -> dict[tuple[str, str], int]:
    """``(kind, state)`` -> how many resources, every pair present (0 when none)."""
    counts = {(kind, state): 0 for kind in RESOURCE_KINDS for state in RESOURCE_STATES}
    instances = session.connector_instances
    for resource, state in resource_states(session).items():
        counts["connector" if resource in instances else "task", state] += 1
    return counts


class WorkerMetrics:
    """Everything a worker exports; ``render()`` is the ``/metrics`` body."""

    def __init__(self, *, clock: Callable[[], float] = time.perf_counter) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._snapshot = _Snapshot()
        self._exceptions: dict[str, int] = {}
        self.start_seconds = Histogram(
            "kooper_worker_start_duration_seconds",
            "Time on_assigned took to start a resource (raised or not)",
            label="callback",
        )
        self.stop_seconds = Histogram(
            "kooper_worker_stop_duration_seconds",
            "Time on_revoked / on_lost took to stop a resource (raised or not)",
            label="callback",
        )

    def timed(self, callback: str, function: Callable[_P, None]) -> Callable[_P, None]:
        """``function`` timed into the start (``on_assigned``) or stop histogram."""
        histogram = self.start_seconds if callback == "on_assigned" else self.stop_seconds
        counted = self.counted(callback, function)

        @functools.wraps(function)
        def run(*args: _P.args, **kwargs: _P.kwargs) -> None:
            began = self._clock()
            try:
                counted(*args, **kwargs)
            finally:
                histogram.observe(callback, self._clock() - began)

        return run

    def counted(self, callback: str, function: Callable[_P, None]) -> Callable[_P, None]:
        """``function`` whose exceptions count in ``kooper_worker_callback_exceptions_total``
        (``on_paused`` / ``on_resumed``: no histogram of their own). Its series starts at
        0 here: one born at 1 would hide the first exception from ``increase()``."""
        with self._lock:
            self._exceptions.setdefault(callback, 0)

        @functools.wraps(function)
        def run(*args: _P.args, **kwargs: _P.kwargs) -> None:
            try:
                function(*args, **kwargs)
            except BaseException:
                with self._lock:
                    self._exceptions[callback] = self._exceptions.get(callback, 0) + 1
                raise

        return run

    def observe(self, session: sdk_session.Session, lease: LeaseView | None = None,
                watch: WatchView | None = None) -> None:
        """Take the session's (and the Lease keeper's and assignment watch's) state: call it
        from the session's thread."""
        snapshot = _Snapshot(
            member_state=session.state.value,
            resources=resource_counts(session),
            generation=session.applied_generation,
            fenced=session.report().fenced,
            fencings=session.fencings,
            renewals=lease.renewals if lease is not None else 0,
            renewal_failures=lease.renewal_failures if lease is not None else 0,
            watch_failures=watch.failures if watch is not None else 0,
        )
        with self._lock:
            self._snapshot = snapshot

    def families(self) -> list[Family]:
        """Every family, in a stable order."""
        with self._lock:
            snap = self._snapshot
            exceptions = dict(self._exceptions)
        return [
            Family("kooper_worker_build_info", "gauge", "The kooper version (always 1)",
                   (("kooper_worker_build_info", (("version", kooper.__version__),), 1),)),
            Family(
                "kooper_worker_member_state", "gauge",
                "The member's lifecycle state (1 for the current one, 0 for the others)",
                tuple(("kooper_worker_member_state", (("state", s.value),),
                       float(s.value == snap.member_state)) for s in member.MemberState),
            ),
            Family(
                "kooper_worker_resources", "gauge",
                "Connector instances and tasks of this member by state (a fixed set of series)",
                tuple(("kooper_worker_resources", (("kind", k), ("state", s)), n)
                      for (k, s), n in sorted(snap.resources.items())),
            ),
            Family("kooper_worker_assignment_generation", "gauge",
                   "Generation of the last assignment fully applied (-1: none yet)",
                   (("kooper_worker_assignment_generation", (), snap.generation),)),
            Family("kooper_worker_fenced", "gauge",
                   "1 while the member has fenced itself (its Lease went unrenewed)",
                   (("kooper_worker_fenced", (), float(snap.fenced)),)),
            Family("kooper_worker_fencings_total", "counter",
                   "Times the member fenced itself and stopped everything as lost",
                   (("kooper_worker_fencings_total", (), snap.fencings),)),
            Family("kooper_worker_lease_renewals_total", "counter",
                   "Successful renewals of the member Lease",
                   (("kooper_worker_lease_renewals_total", (), snap.renewals),)),
            Family("kooper_worker_lease_renewal_failures_total", "counter",
                   "Renewals of the member Lease that failed",
                   (("kooper_worker_lease_renewal_failures_total", (), snap.renewal_failures),)),
            Family("kooper_worker_assignment_watch_failures_total", "counter",
                   "Watches of the member's ConfigMap that failed (each followed by a "
                   "backoff and a relist; the periodic re-read still delivers meanwhile)",
                   (("kooper_worker_assignment_watch_failures_total", (),
                     snap.watch_failures),)),
            Family("kooper_worker_callback_exceptions_total", "counter",
                   "Callbacks that raised, by callback",
                   tuple(("kooper_worker_callback_exceptions_total", (("callback", c),), n)
                         for c, n in sorted(exceptions.items()))),
            self.start_seconds.family(),
            self.stop_seconds.family(),
        ]

    def render(self) -> str:
        """The ``/metrics`` body."""
        return exposition(self.families())
