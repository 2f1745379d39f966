"""The kind drills' recorder: cluster observations in, event rows out.

``Observer`` is pure: it is handed what one poll saw (the namespace's Leases, member
Pods and the WorkerGroup, as the JSON ``kubectl get -o json`` prints) and returns the
rows that describe the change since the previous poll. What a member runs is what its
Lease report (``kooper.dev/report``) says it owns, which is exactly what the operator
plans against. ``Recorder`` is the thin loop around it that runs ``kubectl`` and appends
JSON lines to a file.

Row order within one poll: ``round``, ``leave``, ``stop``, ``join``, ``start`` (the
order ``invariants.ordered`` applies too). Leases are read before pods in each poll, so
a stop a terminating pod reported is never seen before its pod's deletion.
"""

from __future__ import annotations

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

    @staticmethod
    def _reports(leases: Iterable[Mapping[str, Any]]) -> dict[str, messages.Report]:
        out = {}
        for lease in leases:
            text = (lease.get("metadata", {}).get("annotations") or {}).get(
                messages.REPORT_ANNOTATION
            )
            if not text:
                continue
            try:
                report = codec.decode_report(text)
            except kooper_errors.KooperError:
                continue  # a malformed report is the operator's problem, not a row
            out[report.member] = report
        return out

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
        reports = self._reports(leases)
        live_pods = {
            p["metadata"]["name"]
            for p in pods
            if self.is_member_pod(p) and not p["metadata"].get("deletionTimestamp")
        }
        # leave: the pod is terminating or gone, the Lease is gone, or a new incarnation took over
        for member in sorted(self.owned):
            report = reports.get(member)
            replaced = report is not None and report.incarnation != self.incarnation[member]
            if member not in self.left and (member not in live_pods or report is None or replaced):
                rows.append(self._row(ts_ms, K.LEAVE, member))
                self.left.add(member)
        # stop
        for member in sorted(self.owned):
            report = reports.get(member)
            replaced = report is not None and report.incarnation != self.incarnation[member]
            now = frozenset() if report is None or replaced else frozenset(report.owned.sorted())
            for resource in sorted(self.owned[member] - now, key=_key):
                rows.append(self._row(ts_ms, K.STOP, member, resource))
            self.owned[member] = self.owned[member] & now
            if report is None or replaced:
                del self.owned[member], self.incarnation[member]
        # join and start
        for member, report in sorted(reports.items()):
            if member not in self.owned:
                if member not in live_pods:
                    continue  # a stale report of a pod that is already going away
                rows.append(self._row(ts_ms, K.JOIN, member))
                self.owned[member] = frozenset()
                self.incarnation[member] = report.incarnation
                self.left.discard(member)
            elif member in self.left:
                continue  # terminating: its remaining stops come, its starts would not be real
            now = frozenset(report.owned.sorted())
            for resource in sorted(now - self.owned[member], key=_key):
                rows.append(
                    self._row(ts_ms, K.START, member, resource, generation=report.generation)
                )
            self.owned[member] = now
        return rows


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
        self._thread = threading.Thread(target=self._loop, name="kooper-e2e-recorder", daemon=True)

    def __enter__(self) -> Recorder:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.write_text("")
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

    def poll(self) -> None:
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
            return
        rows = self.observer.observe(
            int(time.time() * 1000), leases=leases["items"], pods=pods["items"], group=group
        )
        if rows:
            self.rows.extend(rows)
            with self.path.open("a") as out:
                out.writelines(events.dump_lines(rows))

    def _loop(self) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            self.poll()
            self._stop.wait(max(0.0, self.interval_s - (time.monotonic() - started)))
