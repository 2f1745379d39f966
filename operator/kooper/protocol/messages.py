"""The two documents of the operator/worker protocol, as frozen values.

``Assignment`` is what the operator writes into a member's ConfigMap
(``kooper-<pod>``, data key ``assignment.json``): KIP-415's Assignment.
``Report`` is what a member writes into its Lease (``kooper-<pod>``, annotation
``kooper.dev/report``): KIP-415's Subscription / JoinGroup metadata.

Only ``protocol.codec`` turns these into JSON and back; the wire format is in
``docs/protocol.md``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from kooper.core import model

CONFIGMAP_KEY = "assignment.json"
"""The ConfigMap data key that holds the encoded ``Assignment``."""

REPORT_ANNOTATION = "kooper.dev/report"
"""The Lease annotation that holds the encoded ``Report``."""

MAX_REPORT_BYTES = 256 * 1024
"""Reports larger than this are rejected unread (a Lease is not a database)."""

MAX_ASSIGNMENT_BYTES = 1_000_000
"""An encoded assignment must fit a ConfigMap (1 MiB for all keys, with room for metadata)."""

MAX_ERROR_CHARS = 256
"""A failure's reason is cut to this many characters (``Report.failed``)."""

MAX_FAILURE_REASONS = 100
"""A report carries the reasons of at most this many failed resources (the first in
resource order); ``Report.failure_counts`` still names every failed resource."""


@dataclasses.dataclass(frozen=True, slots=True)
class Assignment:
    """Operator → member: the full set the member may run, and what it must stop.

    ``protocol`` is the protocol the group runs this generation; a cooperative
    member that receives ``eager`` with revocations treats them as *lost* (the
    short-circuit of KIP-415's downgrade and KAFKA-12477's upgrade proposal).
    """

    group: str
    member: str
    generation: int
    protocol: model.Protocol
    assigned: model.ConnectorsAndTasks
    revoked: model.ConnectorsAndTasks = model.EMPTY
    delay_ms: int = 0
    leader: str = ""
    epochs: Mapping[str, int] = dataclasses.field(default_factory=dict)
    """Per assigned resource, its epoch: only grows; hand it to task code to fence zombies."""
    configs: Mapping[str, Mapping[str, str]] = dataclasses.field(default_factory=dict)
    """Per assigned connector (of the instance or of any of its tasks), its ``config``."""
    states: Mapping[str, str] = dataclasses.field(default_factory=dict)
    """Per connector, its desired state when not ``running`` (``paused``)."""
    policy: str = ""
    """The group's assignment policy (``kooper`` | ``kip415``), for the workers' event log."""
    incarnation: str = ""
    """The member incarnation this document was planned for ("" = any). A restarted
    process must not apply a document meant for its previous life: the resources in
    it may be about to go elsewhere. It waits for one planned for itself."""
    member_epoch: int = 0
    """The membership epoch this document belongs to (0: the operator issues none).
    The operator gives each membership of a member a new, greater epoch, and retires
    it when it declares the member departed; a worker acts only on documents of its
    current epoch, and after fencing itself only on a newer one (docs/protocol.md)."""
    rejoins: int = 0
    """How many times the member had fenced itself and rejoined (``Report.rejoins``)
    when the operator issued ``member_epoch``: a worker that fenced itself since acts on
    none of this membership's documents, even one whose epoch it never saw (issued while
    it was cut off, and maybe retired since)."""
    leader_epoch: int = 0
    """The fencing token of the operator leader that wrote this document (its leader
    Lease's term; 0: no leader election). A worker never applies a document from a
    lower leader epoch than one it has seen: a stalled leader's late writes lose."""


@dataclasses.dataclass(frozen=True, slots=True)
class Report:
    """Member → operator: who it is, what it speaks, what it applied and runs now."""

    member: str
    incarnation: str
    protocols: frozenset[model.Protocol]
    generation: int
    """The generation of the last assignment this member applied (-1: none yet)."""
    owned: model.ConnectorsAndTasks = model.EMPTY
    failed: Mapping[str, str] = dataclasses.field(default_factory=dict)
    """Resources whose start/stop callback failed or timed out, or that crashed, with the
    reason (at most ``MAX_FAILURE_REASONS`` of them, each at most ``MAX_ERROR_CHARS``)."""
    fenced: bool = False
    """True after the member stopped everything because it could not renew its Lease."""
    member_epoch: int = 0
    """The membership epoch of the documents the member acts on (0: none seen yet)."""
    rejoins: int = 0
    """How many times this incarnation fenced itself (and rejoined): each is a new
    membership, which the operator answers with a new epoch naming this count."""
    failure_counts: Mapping[str, int] = dataclasses.field(default_factory=dict)
    """Every resource failing now, with how many times it failed in this incarnation
    (>= 1). Empty from a writer that predates it (then ``failed`` is all there is)."""
    left: bool = False
    """True in the last report of an incarnation that is leaving (SIGTERM): it stopped
    everything, owns nothing and will start nothing again. The operator may read it in
    the Lease's last version after the Lease is gone (``control.liveness.left``)."""
