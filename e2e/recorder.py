"""The kind drills' recorder: cluster observations in, event rows out.

``Observer`` is pure: it is handed what one poll saw (the namespace's Leases, member
Pods and the WorkerGroup, as the JSON ``kubectl get -o json`` prints) and returns the
rows that describe the change since the previous poll. What a member runs is what its
Lease report (``kooper.dev/report``) says it owns, which is exactly what the operator
plans against. ``Recorder`` is the thin loop around it that runs ``kubectl`` and appends
JSON lines to a file.

Row order within one poll: ``round``, ``leave``, ``stop``, ``join``, ``start``
(``invariants.ordered`` applies ``events.SAME_INSTANT_ORDER``, stops before leaves and
rounds, which ends every interval at the same instant). Leases are read before pods in
each poll, so a stop a terminating pod reported is never seen before its pod's deletion.
"""

from __future__ import annotations

import dataclasses
import json
import pathlib
import subprocess
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from kooper.core import errors as kooper_errors
from kooper.core import events, ids
from kooper.protocol import codec, messages

K = events.Kind


class Observer:
    """Turns successive observations of one group into event rows."""

    def __init__(
        self,
        *,
        run: str,
        group: str,
        is_member_pod: Callable[[Mapping[str, Any]], bool],
        protocol: str = "",
        policy: str = "",
    ) -> None:
        self.run = run
        self.group = group
        self.is_member_pod = is_member_pod
        self.protocol = protocol
        self.policy = policy
        self.owned: dict[str, frozenset[str]] = {}
        self.incarnation: dict[str, str] = {}
        self.pod_uid: dict[str, str | None] = {}
        self.left: set[str] = set()
        self.generation: int | None = None

    def _row(
        self,
        ts_ms: int,
        kind: events.Kind,
        member: str = "",
        resource: str = "",
        generation: int = -1,
    ) -> events.Event:
        return events.Event(
            ts_ms=ts_ms,
            run=self.run,
            group=self.group,
            member=member,
            resource=resource,
            event=kind,
            generation=generation,
            protocol=self.protocol,
            policy=self.policy,
        )

    def observe(
        self,
        ts_ms: int,
        *,
        leases: Iterable[Mapping[str, Any]],
        pods: Iterable[Mapping[str, Any]],
        group: Mapping[str, Any] | None,
    ) -> list[events.Event]:
        """The rows for what changed since the previous call."""
        rows: list[events.Event] = []
        generation = ((group or {}).get("status") or {}).get("rebalanceGeneration")
        if isinstance(generation, int) and generation != self.generation:
            if self.generation is not None:
                rows.append(self._row(ts_ms, K.ROUND, generation=generation))
            self.generation = generation
        reports = lease_reports(leases)
        live = live_member_pods(pods, self.is_member_pod)

        def replaced(member: str) -> bool:
            """The Lease now speaks for another incarnation (or another pod of that name)."""
            lease = reports.get(member)
            return lease is not None and (
                lease.report.incarnation != self.incarnation[member]
                or _other_pod(lease.pod_uid, self.pod_uid[member])
            )

        # leave: the pod is terminating or gone (a new pod of that name is another
        # member), the Lease is gone, or a new incarnation took it over
        for member in sorted(self.owned):
            gone = member not in live or _other_pod(live[member], self.pod_uid[member])
            if member not in self.left and (gone or member not in reports or replaced(member)):
                rows.append(self._row(ts_ms, K.LEAVE, member))
                self.left.add(member)
        # stop: what the member's own report no longer lists (all of it once replaced)
        for member in sorted(self.owned):
            ended = member not in reports or replaced(member)
            now = frozenset() if ended else frozenset(reports[member].report.owned.sorted())
            for resource in sorted(self.owned[member] - now, key=_key):
                rows.append(self._row(ts_ms, K.STOP, member, resource))
            self.owned[member] = self.owned[member] & now
            if ended:
                del self.owned[member], self.incarnation[member], self.pod_uid[member]
        # join and start
        for member, lease in sorted(reports.items()):
            if member not in self.owned:
                if member not in live or _other_pod(lease.pod_uid, live[member]):
                    continue  # a stale report: its pod is going away or already replaced
                rows.append(self._row(ts_ms, K.JOIN, member))
                self.owned[member] = frozenset()
                self.incarnation[member] = lease.report.incarnation
                self.pod_uid[member] = lease.pod_uid or live[member]
                self.left.discard(member)
            elif member in self.left:
                continue  # terminating: its remaining stops come, its starts would not be real
            now = frozenset(lease.report.owned.sorted())
            for resource in sorted(now - self.owned[member], key=_key):
                rows.append(
                    self._row(ts_ms, K.START, member, resource, generation=lease.report.generation)
                )
            self.owned[member] = now
        return rows


@dataclasses.dataclass(frozen=True, slots=True)
class LeaseReport:
    """A member's Lease report and the uid of the pod the Lease belongs to (None: not said)."""

    report: messages.Report
    pod_uid: str | None


def lease_reports(leases: Iterable[Mapping[str, Any]]) -> dict[str, LeaseReport]:
    """member -> its Lease's decoded report (malformed ones are the operator's problem)."""
    out = {}
    for lease in leases:
        meta = lease.get("metadata") or {}
        text = (meta.get("annotations") or {}).get(messages.REPORT_ANNOTATION)
        if not text:
            continue
        try:
            report = codec.decode_report(text)
        except kooper_errors.KooperError:
            continue
        owners = [o for o in meta.get("ownerReferences") or [] if o.get("kind") == "Pod"]
        out[report.member] = LeaseReport(report, str(owners[0]["uid"]) if owners else None)
    return out


def live_member_pods(
    pods: Iterable[Mapping[str, Any]], is_member_pod: Callable[[Mapping[str, Any]], bool]
) -> dict[str, str | None]:
    """name -> uid of the member pods that are not terminating."""
    return {
        p["metadata"]["name"]: p["metadata"].get("uid")
        for p in pods
        if is_member_pod(p) and not p["metadata"].get("deletionTimestamp")
    }


def current_reports(
    leases: Iterable[Mapping[str, Any]],
    pods: Iterable[Mapping[str, Any]],
    is_member_pod: Callable[[Mapping[str, Any]], bool],
) -> dict[str, messages.Report]:
    """The reports of live member pods, written by the pod that lives now.

    A force-deleted pod comes back under the same name at once; until its new worker
    writes, the Lease still shows what the killed one ran, and must not count.
    """
    live = live_member_pods(pods, is_member_pod)
    return {
        member: lease.report
        for member, lease in lease_reports(leases).items()
        if member in live and not _other_pod(lease.pod_uid, live[member])
    }


def _other_pod(uid: str | None, other: str | None) -> bool:
    """Two pod uids that are both known and differ (unknown ones: names decide alone)."""
    return uid is not None and other is not None and uid != other


def _key(resource: str) -> tuple[str, int]:
    """Instances first, then tasks by number (core.ids parses task ids)."""
    task = ids.split_task(resource)
    return (resource, 0) if task is None else (task[0], task[1] + 1)


Kubectl = Callable[..., str]


class Recorder:
    """Polls the namespace with ``kubectl`` in a thread and appends rows to ``path``."""

    def __init__(
        self,
        observer: Observer,
        *,
        kubectl: Kubectl,
        namespace: str,
        path: pathlib.Path,
        interval_s: float = 0.5,
    ) -> None:
        self.observer = observer
        self.kubectl = kubectl
        self.namespace = namespace
        self.path = path
        self.interval_s = interval_s
        self.rows: list[events.Event] = []
        self.errors = 0
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._loop, name="kooper-e2e-recorder", daemon=True)

    def __enter__(self) -> Recorder:
        """Start recording: the first observation is made before the drill may act."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.write_text("")
        # Without this, a drill's first action races the thread's first poll and the
        # log can start after the change it provoked (a scale-down whose pod is gone).
        deadline = time.monotonic() + 60
        while not self.poll():
            if time.monotonic() > deadline:
                raise RuntimeError(f"recorder: no observation in 60 s ({self.errors} errors)")
            time.sleep(self.interval_s)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        """Stop polling after one last observation."""
        if not self._stop.is_set():
            self._stop.set()
            self._thread.join(timeout=30)
            self.poll()

    def poll(self) -> bool:
        """One observation: Leases, then pods, then the group (see the module docstring)."""
        try:
            leases = json.loads(self.kubectl("get", "leases", "-n", self.namespace, "-o", "json"))
            pods = json.loads(self.kubectl("get", "pods", "-n", self.namespace, "-o", "json"))
            group = json.loads(
                self.kubectl(
                    "get", "workergroup", self.observer.group, "-n", self.namespace, "-o", "json"
                )
            )
        except (subprocess.CalledProcessError, subprocess.TimeoutExpired, ValueError):
            self.errors += 1
            return False
        rows = self.observer.observe(
            int(time.time() * 1000), leases=leases["items"], pods=pods["items"], group=group
        )
        with self._lock:
            self.rows.extend(rows)
        if rows:
            with self.path.open("a") as out:
                out.writelines(events.dump_lines(rows))
        return True

    def saw(self, match: Callable[[events.Event], bool]) -> events.Event | None:
        """The first row recorded so far that `match` accepts (drills wait on their events)."""
        with self._lock:
            return next((row for row in self.rows if match(row)), None)

    def _loop(self) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            self.poll()
            self._stop.wait(max(0.0, self.interval_s - (time.monotonic() - started)))
