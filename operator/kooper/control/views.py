"""Small frozen views of the Kubernetes objects the operator watches.

kopf indexes hold these instead of whole bodies: a 1,000-pod group keeps only
what a round needs (labels, owner, lease times, the decoded report). Parsing is
pure and never raises on user input: a bad field becomes ``None`` or an error
string that the round turns into an Event.
"""

from __future__ import annotations

import dataclasses
import datetime
import hashlib
from collections.abc import Mapping
from typing import Any

from kooper.control import selectors
from kooper.core import defaults, durations, errors, model
from kooper.protocol import codec, messages

GROUP = "kooper.dev"
VERSION = "v1alpha1"
MEMBER_LABEL = "kooper.dev/member"
GROUP_LABEL = "kooper.dev/group"
RESTART_ANNOTATION = "kooper.dev/restart"
RESTART_TASK_ANNOTATION = "kooper.dev/restart-task"
LEADER_EPOCH_ANNOTATION = "kooper.dev/leader-epoch"
"""On every ConfigMap a leader writes: its term (``shell.leader``), the fence of stale leaders."""
CONFIGMAP_PREFIX = "kooper-"
NO_REPORT = "the Lease has no kooper.dev/report annotation yet"
CONNECTOR_STATES: Mapping[str, str] = {"Running": "running", "Paused": "paused",
                                       "Stopped": "stopped"}
"""``Connector.spec.state`` as the CRD admits it (Kubernetes' CamelCase) -> the state the
operator decides with and the Assignment's ``states`` carries (``protocol.codec``). The CRD
also admits the lowercase values of earlier kooper versions, for objects stored then:
they read the same."""


def configmap_name(member: str) -> str:
    """The name of a member's ConfigMap (and of its Lease): ``kooper-<pod>``."""
    return f"{CONFIGMAP_PREFIX}{member}"


def parse_max_delay(spec: Mapping[str, Any]) -> tuple[int, str]:
    """``spec.scheduledRebalanceMaxDelay`` in ms, and why it is unusable (``""`` when fine).

    Absent means the CRD's default. A value outside ``core.durations``' language (a CRD
    from an older kooper admitted ``100ns``) is never replaced by the default: the
    reason fails that WorkerGroup alone (``control.step``).
    """
    text = spec.get("scheduledRebalanceMaxDelay")
    if text is None:
        return defaults.SCHEDULED_REBALANCE_MAX_DELAY_MS, ""
    try:
        return durations.parse_ms(str(text)), ""
    except errors.InvalidDurationError as exc:
        return defaults.SCHEDULED_REBALANCE_MAX_DELAY_MS, f"spec.scheduledRebalanceMaxDelay: {exc}"


def parse_time_ms(text: object) -> int | None:
    """An RFC 3339 timestamp (``MicroTime`` or ``Time``) in epoch milliseconds."""
    if not isinstance(text, str) or not text:
        return None
    try:
        moment = datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.UTC)
    return int(moment.timestamp() * 1000)


def format_time(ms: int) -> str:
    """Epoch milliseconds as the API's ``Time`` format (``2024-01-01T00:00:00Z``)."""
    moment = datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclasses.dataclass(frozen=True, slots=True)
class GroupView:
    """A WorkerGroup: identity, selector, settings and the status we last saw."""

    namespace: str
    name: str
    uid: str
    generation: int
    resource_version: str
    selector: selectors.Selector
    settings: model.Settings
    lease_duration_s: int
    clock_skew_s: int
    status: Mapping[str, Any]
    max_departed_fraction: float = defaults.RAILS_MAX_DEPARTED_FRACTION
    """``spec.rails.maxDepartedFraction`` (``control.rails``)."""
    release_hold: str = ""
    """The ``kooper.dev/release-hold`` annotation (``control.rails``)."""
    max_moves_per_round: int | str | None = None
    """``spec.balancing.maxMovesPerRound`` as written (``control.pacing``): a count or
    ``"25%"``; ``None`` when unset (or not valid): ``balancing_limit`` is then the
    policy's default."""
    invalid: str = ""
    """Why the spec cannot be acted on (``""``: it can); the group then fails alone."""
    created: str = ""
    """``metadata.creationTimestamp`` (RFC 3339, UTC): the older of two groups whose
    selectors match one pod keeps it (``control.elsewhere.taken``)."""

    @property
    def balancing_limit(self) -> int | str | None:
        """The pacing limit in force (``None``: no pacing): the spec's, else the policy's
        (``defaults.BALANCING_MAX_MOVES_BY_POLICY``: ``25%`` under ``kooper``, none under
        ``kip415``, as Kafka Connect)."""
        if self.max_moves_per_round is not None:
            return self.max_moves_per_round
        return defaults.BALANCING_MAX_MOVES_BY_POLICY[str(self.settings.policy)]


def parse_group(body: Mapping[str, Any]) -> GroupView:
    """A WorkerGroup body as a view (spec defaults as in the CRD)."""
    meta = body.get("metadata", {})
    spec = body.get("spec") or {}
    protocol = spec.get("protocol", defaults.PROTOCOL)
    policy = spec.get("policy", defaults.POLICY)
    max_delay_ms, invalid = parse_max_delay(spec)
    settings = model.Settings(
        protocol=model.Protocol(protocol if protocol in ("eager", "compatible")
                                else defaults.PROTOCOL),
        policy=model.Policy(policy if policy in ("kooper", "kip415") else defaults.POLICY),
        max_delay_ms=max_delay_ms,
    )
    return GroupView(
        namespace=str(meta.get("namespace", "")),
        name=str(meta.get("name", "")),
        uid=str(meta.get("uid", "")),
        created=str(meta.get("creationTimestamp") or ""),
        generation=int(meta.get("generation") or 0),
        resource_version=str(meta.get("resourceVersion", "")),
        selector=selectors.parse_selector(spec.get("selector")),
        settings=settings,
        lease_duration_s=_int(spec.get("leaseDurationSeconds"), defaults.LEASE_DURATION_S),
        clock_skew_s=_int(spec.get("clockSkewSeconds"), defaults.CLOCK_SKEW_S),
        max_departed_fraction=_fraction((spec.get("rails") or {}).get("maxDepartedFraction")
                                        if isinstance(spec.get("rails"), Mapping) else None),
        release_hold=str((meta.get("annotations") or {}).get("kooper.dev/release-hold", "")),
        max_moves_per_round=parse_max_moves((spec.get("balancing") or {}).get("maxMovesPerRound")
                                            if isinstance(spec.get("balancing"), Mapping)
                                            else None),
        status=dict(body.get("status") or {}),
        invalid=invalid,
    )


@dataclasses.dataclass(frozen=True, slots=True)
class ConnectorView:
    """A Connector: its group, tasks, config and desired state."""

    namespace: str
    name: str
    uid: str
    generation: int
    group: str
    tasks_max: int
    config: Mapping[str, str]
    state: str
    restart: str
    status: Mapping[str, Any]
    auto_restart: bool = defaults.AUTO_RESTART_ENABLED
    """``spec.autoRestart.enabled``."""
    max_restarts: int = defaults.AUTO_RESTART_MAX_RESTARTS
    initial_backoff_s: int = defaults.AUTO_RESTART_INITIAL_BACKOFF_S
    restart_task: str = ""
    """The ``kooper.dev/restart-task`` annotation (task numbers to restart)."""
    resource_version: str = ""


def parse_connector(body: Mapping[str, Any]) -> ConnectorView:
    """A Connector body as a view (spec defaults as in the CRD)."""
    meta = body.get("metadata", {})
    spec = body.get("spec") or {}
    config = spec.get("config") or {}
    auto = spec.get("autoRestart")
    auto = auto if isinstance(auto, Mapping) else {}
    enabled = auto.get("enabled", defaults.AUTO_RESTART_ENABLED)
    annotations = meta.get("annotations") or {}
    return ConnectorView(
        namespace=str(meta.get("namespace", "")),
        name=str(meta.get("name", "")),
        uid=str(meta.get("uid", "")),
        generation=int(meta.get("generation") or 0),
        group=str(spec.get("workerGroup", "")),
        tasks_max=max(0, _int(spec.get("tasksMax"), defaults.TASKS_MAX)),
        config={str(k): str(v) for k, v in config.items()} if isinstance(config, Mapping) else {},
        state=connector_state(spec.get("state", defaults.CONNECTOR_STATE)),
        restart=str(annotations.get(RESTART_ANNOTATION, "")),
        status=dict(body.get("status") or {}),
        auto_restart=enabled if isinstance(enabled, bool) else defaults.AUTO_RESTART_ENABLED,
        max_restarts=max(0, _int(auto.get("maxRestarts"), defaults.AUTO_RESTART_MAX_RESTARTS)),
        initial_backoff_s=max(0, _int(auto.get("initialBackoffSeconds"),
                                      defaults.AUTO_RESTART_INITIAL_BACKOFF_S)),
        restart_task=str(annotations.get(RESTART_TASK_ANNOTATION, "")),
        resource_version=str(meta.get("resourceVersion", "")),
    )


def connector_state(value: object) -> str:
    """``spec.state`` (``Running``, or an older ``running``) as ``running``; else the default."""
    if isinstance(value, str):
        if value in CONNECTOR_STATES:
            return CONNECTOR_STATES[value]
        if value in CONNECTOR_STATES.values():
            return value
    return CONNECTOR_STATES[defaults.CONNECTOR_STATE]


@dataclasses.dataclass(frozen=True, slots=True)
class PodView:
    """A pod: labels (for selectors), uid (to match its Lease) and controller owner."""

    namespace: str
    name: str
    uid: str
    labels: Mapping[str, str]
    deleting: bool
    owner_kind: str
    owner_name: str


def parse_pod(body: Mapping[str, Any]) -> PodView:
    """A Pod body as a view."""
    meta = body.get("metadata", {})
    owner_kind = owner_name = ""
    for ref in meta.get("ownerReferences") or ():
        if ref.get("controller") or not owner_kind:
            owner_kind, owner_name = str(ref.get("kind", "")), str(ref.get("name", ""))
    return PodView(
        namespace=str(meta.get("namespace", "")),
        name=str(meta.get("name", "")),
        uid=str(meta.get("uid", "")),
        labels=dict(meta.get("labels") or {}),
        deleting=bool(meta.get("deletionTimestamp")),
        owner_kind=owner_kind,
        owner_name=owner_name,
    )


@dataclasses.dataclass(frozen=True, slots=True)
class LeaseView:
    """A member Lease: heartbeat times and the decoded report (or why it is unusable)."""

    namespace: str
    name: str
    member: str
    pod_uid: str
    incarnation: str
    renew_ms: int | None
    duration_s: int | None
    report: messages.Report | None
    error: str
    """Why the report cannot be used (empty when it can)."""
    report_text: str
    holder: str = ""
    """``spec.holderIdentity`` (``<pod>/<incarnation>``, as the SDK writes it)."""


def parse_lease(body: Mapping[str, Any]) -> LeaseView:
    """A member Lease body as a view; the report is decoded once here, never raises."""
    meta = body.get("metadata", {})
    spec = body.get("spec") or {}
    member = str((meta.get("labels") or {}).get(MEMBER_LABEL, ""))
    pod_uid = ""
    for ref in meta.get("ownerReferences") or ():
        if ref.get("kind") == "Pod":
            pod_uid = str(ref.get("uid", ""))
    holder = str(spec.get("holderIdentity") or "")
    incarnation = holder.partition("/")[2]
    text = (meta.get("annotations") or {}).get(messages.REPORT_ANNOTATION)
    report: messages.Report | None = None
    error = ""
    if not isinstance(text, str):
        error = NO_REPORT
        text = ""
    else:
        try:
            report = codec.decode_report(text)
        except errors.RemoteProtocolError as exc:
            error = f"malformed report: {exc}"
        else:
            if report.member != member:
                error = f"report names member {report.member!r}, the Lease belongs to {member!r}"
                report = None
            elif incarnation and report.incarnation != incarnation:
                error = (
                    f"report incarnation {report.incarnation!r} differs from the Lease "
                    f"holder {holder!r}"
                )
                report = None
    duration = spec.get("leaseDurationSeconds")
    return LeaseView(
        namespace=str(meta.get("namespace", "")),
        name=str(meta.get("name", "")),
        member=member,
        pod_uid=pod_uid,
        incarnation=incarnation or (report.incarnation if report else ""),
        renew_ms=parse_time_ms(spec.get("renewTime") or spec.get("acquireTime")),
        duration_s=duration if isinstance(duration, int) and duration > 0 else None,
        report=report,
        error=error,
        # An oversized report is kept as a digest: enough to notice it changed.
        report_text=text if len(text) <= messages.MAX_REPORT_BYTES
        else f"oversized:{len(text)}:{hashlib.sha256(text.encode()).hexdigest()}",
        holder=holder,
    )


@dataclasses.dataclass(frozen=True, slots=True)
class ConfigMapView:
    """A member ConfigMap written by the operator (or edited by someone else)."""

    namespace: str
    name: str
    group: str
    member: str
    resource_version: str
    text: str
    leader_epoch: int = 0
    """The ``kooper.dev/leader-epoch`` annotation: the term of the leader that wrote it."""


def parse_configmap(body: Mapping[str, Any]) -> ConfigMapView:
    """A kooper ConfigMap body as a view."""
    meta = body.get("metadata", {})
    labels = meta.get("labels") or {}
    return ConfigMapView(
        namespace=str(meta.get("namespace", "")),
        name=str(meta.get("name", "")),
        group=str(labels.get(GROUP_LABEL, "")),
        member=str(labels.get(MEMBER_LABEL, "")),
        resource_version=str(meta.get("resourceVersion", "")),
        text=str((body.get("data") or {}).get(messages.CONFIGMAP_KEY, "")),
        leader_epoch=leader_epoch_of(meta),
    )


def leader_epoch_of(meta: Mapping[str, Any]) -> int:
    """The leader epoch annotated on an object's metadata (0: none, or unreadable)."""
    text = (meta.get("annotations") or {}).get(LEADER_EPOCH_ANNOTATION, "")
    return int(text) if isinstance(text, str) and text.isdigit() else 0


def _fraction(value: object) -> float:
    if isinstance(value, int | float) and not isinstance(value, bool) and 0 <= value <= 1:
        return float(value)
    return defaults.RAILS_MAX_DEPARTED_FRACTION


def parse_max_moves(value: object) -> int | str | None:
    """A valid ``maxMovesPerRound`` (a count >= 1, or "1%".."100%"), as the CRD admits it;
    ``None`` for anything else (unset: the policy's default applies)."""
    if isinstance(value, str) and value.endswith("%") and value[:-1].isdigit() \
            and 1 <= int(value[:-1]) <= 100:
        return value
    count = _int(value, 0)
    return count if count >= 1 else None


def _int(value: object, default: int) -> int:
    if isinstance(value, bool):
        return default
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.isdigit():
        return int(value)
    return default
