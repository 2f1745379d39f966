"""The operator's configuration (command line and environment) and kopf tuning."""

from __future__ import annotations

import dataclasses
import itertools
import os
import secrets
import socket
from collections.abc import Iterable, Iterator
from typing import Any

KUBE_API_ENV = "KOOPER_KUBE_API"
"""An API URL without authentication (the embedded cluster); overrides kubeconfig."""


def retry_delay_s(first_s: float, max_s: float, failures: int) -> float:
    """How long to wait after ``failures`` failures in a row: ``first_s``, doubled per
    failure, at most ``max_s`` (every retry the operator schedules backs off so)."""
    return min(max_s, first_s * float(2 ** min(max(failures, 1) - 1, 20)))


def default_identity() -> str:
    """``<hostname>/<pid>-<random>``: who writes the ConfigMaps (the Assignment's
    ``leader``) and holds the leader Lease. Unique per process: in a container the pid
    is 1 every time, so a restarted container of the leader's pod would otherwise find
    its predecessor's Lease naming itself and lead at once, without the Lease running
    out (found on kind: the standby never took over from a killed leader)."""
    return f"{socket.gethostname()}/{os.getpid()}-{secrets.token_hex(3)}"


LEADER_LEASE = "kooper-operator-leader"
"""The leader Lease's name without ``--leader-lease`` (the chart's for release ``kooper``)."""

@dataclasses.dataclass(frozen=True, slots=True)
class Config:
    """Everything ``kooper run`` can be told."""

    kube_api: str | None = None
    """Talk to this URL without credentials (``KOOPER_KUBE_API``); else kubeconfig/in-cluster."""
    kubeconfig: str | None = None
    """Read credentials from this kubeconfig (``--kubeconfig``); else the usual search."""
    context: str | None = None
    """Use this kubeconfig context (``--context``); else the current one."""
    namespaces: tuple[str, ...] = ()
    """Namespaces to serve (kopf patterns); empty: cluster-wide."""
    metrics_port: int = 0
    """Serve Prometheus ``/metrics`` on this port (0: off)."""
    health_port: int = 0
    """Serve ``/healthz`` (liveness) and ``/readyz`` (readiness) on this port (0: off)."""
    audit_log: str | None = None
    """Append the audit log (JSON lines) to this file; it always goes to the log too."""
    identity: str = dataclasses.field(default_factory=default_identity)
    """Written as ``leader`` into every Assignment and as the Events' reporting instance."""
    debounce_s: float = 0.05
    """How long a round waits after the first event of a burst, to take in the rest."""
    retry_s: float = 1.0
    """Back-off after a failed round."""
    peering: str | None = None
    """kopf peering name (one active operator among replicas); None: standalone."""
    priority: int = 0
    """kopf peering priority of this replica."""
    run_id: str = "operator"
    """The ``run`` column of audit rows."""
    connector_status: bool = True
    """Patch ``Connector.status`` with per-task placement (off in benchmarks of the core path).
    The handled ``kooper.dev/restart`` value is kept there too: with this off, a restarted
    operator acts on the last restart value once more."""
    write_concurrency: int = 64
    """API calls in flight at once."""
    gc_freeze: bool = False
    leader_election: bool = False
    """Run rounds only while holding the leader Lease (``leader_lease``, ``shell.leader``);
    other replicas are hot standbys. Off: this process always leads (one replica)."""
    leader_namespace: str = "default"
    """Where the leader Lease lives (the chart passes the release namespace)."""
    leader_lease: str = LEADER_LEASE
    """The leader Lease's name (the chart passes ``<fullname>-operator-leader``: one per
    release, so two releases in one namespace never share it)."""
    owner: str = ""
    """The operator's Deployment (in ``leader_namespace``): it owns the leader Lease and a
    KopfPeering object in its namespace, so deleting it deletes them (the chart passes its
    own; ``shell.ownership``); empty: they have no owner."""
    leader_lease_s: int = 15
    """A standby takes over once the leader's Lease stood still this long."""
    leader_renew_s: float = 5.0
    """How often the leader renews (and a standby reads) the Lease."""
    """``gc.freeze()`` once, after every group's first rounds (``shell.gcfreeze``); on in
    ``kooper run``, off where the operator shares its process (tests, benchmarks)."""


def from_env(**overrides: Any) -> Config:
    """A ``Config`` with ``KOOPER_KUBE_API`` from the environment, then ``overrides``."""
    values: dict[str, Any] = {"kube_api": os.environ.get(KUBE_API_ENV) or None}
    values.update({k: v for k, v in overrides.items() if v is not None})
    return Config(**values)


class RetryForever:
    """kopf's ``networking.error_backoffs`` that never run out: ``first``, then ``every_s``
    seconds for ever.

    kopf retries an API error (a 5xx, a refused or dropped connection, 403, 429) along its
    backoffs and escalates it once they run out; an escalated error of a watch stops the
    whole operator, and its process stays up doing nothing: no round, no Lease renewal,
    nothing that restarts it. A restarted kube-apiserver answers 503 for a moment while
    it installs its paths, so a finite list lost the race to an outage of a few seconds
    (``tests/chaos_real/test_restart_chaos.py``). Re-iterable: kopf iterates it anew for
    every request. A 403 is retried like the rest (a missing permission is logged every
    few seconds instead of stopping the operator), so kopf's namespace scan, whose
    fallback waits for a 403 to escalate, is off where it has nothing to find (``tune``).
    """

    def __init__(self, first: Iterable[float], *, every_s: float) -> None:
        self.first = tuple(first)
        self.every_s = every_s

    def __iter__(self) -> Iterator[float]:
        return itertools.chain(self.first, itertools.repeat(self.every_s))


NAMESPACE_PATTERN = frozenset("*?[]!,")
"""Characters that make a ``--namespace`` a kopf pattern rather than one namespace's name."""


def exact_namespaces(namespaces: tuple[str, ...]) -> bool:
    """Whether ``namespaces`` names namespaces one by one (no pattern, not cluster-wide)."""
    return bool(namespaces) and not any(NAMESPACE_PATTERN & set(ns) for ns in namespaces)


def tune(settings: Any, config: Config) -> None:
    """Adjust ``kopf.OperatorSettings``: quiet k8s-event posting, peering, fast watch recovery."""
    settings.posting.level = 100  # kopf's own per-handler Events: off; we post our own.
    settings.watching.reconnect_backoff = 0.2
    settings.networking.error_backoffs = RetryForever((0.1, 0.5, 1, 2), every_s=5)
    settings.watching.server_timeout = settings.watching.server_timeout or 300
    settings.queueing.idle_timeout = 30
    if exact_namespaces(config.namespaces):
        # Nothing to discover: kopf serves these namespaces as given. Its scan would list
        # namespaces, which a namespaced install may not (the chart grants it no such
        # RBAC), and kopf's fallback waits for that 403 to escalate, which RetryForever's
        # backoffs never let it do: the operator would never start watching.
        settings.scanning.disabled = True
    if config.peering:
        settings.peering.name = config.peering
        settings.peering.priority = config.priority
        settings.peering.mandatory = True
