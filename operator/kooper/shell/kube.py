"""The one module that writes to the Kubernetes API.

A small typed client on aiohttp: ConfigMaps (create/replace/delete with
``resourceVersion`` preconditions), status patches of WorkerGroups and
Connectors, reads of pod owners, and Events. kopf does the watching; both take
their credentials from one ``login.Login``, which renews them.

What goes over the wire is ``sdk.wire``'s and failures are ``sdk.apierrors``'
(the worker's standard-library client shares both): transport errors never leak,
every failure is an ``ApiError`` subclass with the HTTP status (0: unreachable),
the original exception chained as the cause. ``Conflict`` (409) means a
precondition failed: re-read, recompute, retry. A 401 logs in again once and
resends; a 429 waits the server's ``Retry-After`` (else jittered backoff) and resends.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import ssl
import time
from collections.abc import Iterable, Mapping
from typing import Any

import aiohttp

from kooper.control import rollout, views
from kooper.control.inputs import RolloutFacts
from kooper.sdk import apierrors, connection, wire
from kooper.sdk.connection import Connection
from kooper.shell.login import Login

ROLE = "operator"
FIELD_MANAGER = f"kooper-{ROLE}"
MAX_EVENT_MESSAGE = 1024
THROTTLED_ATTEMPTS = 5
"""Sends of one request that 429s before its error reaches the caller."""


@dataclasses.dataclass(slots=True)
class Stats:
    """Writes made, for metrics and the benchmark (``writes`` counts every mutating call)."""

    writes: int = 0
    conflicts: int = 0
    by_kind: dict[str, int] = dataclasses.field(default_factory=dict)
    bytes_by_kind: dict[str, int] = dataclasses.field(default_factory=dict)
    """Request body bytes sent, by kind (how big status patches are)."""
    throttled: int = 0
    """429 answers waited out and resent."""

    def count(self, kind: str, size: int = 0) -> None:
        """Count one mutating call of ``kind`` whose body has ``size`` bytes."""
        self.writes += 1
        self.by_kind[kind] = self.by_kind.get(kind, 0) + 1
        self.bytes_by_kind[kind] = self.bytes_by_kind.get(kind, 0) + size


def _tls(conn: Connection) -> tuple[object, ...]:
    return (conn.server, conn.ca_path, conn.ca_data, conn.insecure, conn.certificate_path,
            conn.private_key_path)


class Client:
    """An asyncio API client; one per operator, shared by all groups."""

    def __init__(self, login: Login | Connection, *, concurrency: int = 64) -> None:
        self.login = login if isinstance(login, Login) else Login.static(login)
        self._session: aiohttp.ClientSession | None = None
        self._session_tls: tuple[object, ...] = ()
        self._limit = asyncio.Semaphore(concurrency)
        self.stats = Stats()

    async def _ensure(self, conn: Connection) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed or self._session_tls != _tls(conn):
            if self._session is not None:
                await self._session.close()
            context: ssl.SSLContext | bool = connection.ssl_context(conn) or False
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(ssl=context, limit=100),
                timeout=aiohttp.ClientTimeout(total=30),
            )
            self._session_tls = _tls(conn)
        return self._session

    async def close(self) -> None:
        """Close the HTTP session."""
        if self._session is not None:
            await self._session.close()

    async def request(
        self,
        method: str,
        path: str,
        *,
        body: Mapping[str, Any] | None = None,
        content_type: str = "application/json",
        params: Mapping[str, str] | None = None,
        kind: str = "",
    ) -> dict[str, Any]:
        """One API call; the decoded answer, or an ``apierrors.ApiError``."""
        reauthenticated = False
        attempt = 0
        while True:
            conn, authorization = self.login.current()
            try:
                return await self._send(conn, authorization, method, path, body=body,
                                        content_type=content_type, params=params, kind=kind)
            except apierrors.Unauthorized:
                if reauthenticated or not self.login.rejected(conn):
                    raise
                reauthenticated = True
            except apierrors.TooManyRequests as exc:
                delay = wire.throttled_delay_s(exc, attempt)
                attempt += 1
                if delay is None or attempt >= THROTTLED_ATTEMPTS:
                    raise
                self.stats.throttled += 1
                await asyncio.sleep(delay)

    async def _send(self, conn: Connection, authorization: str | None, method: str,
                    path: str, *, body: Mapping[str, Any] | None, content_type: str,
                    params: Mapping[str, str] | None, kind: str) -> dict[str, Any]:
        session = await self._ensure(conn)
        built = wire.build_request(method, path, role=ROLE, body=body,
                                   content_type=content_type, query=params,
                                   authorization=authorization)
        url = conn.server.rstrip("/") + built.target
        data = built.body
        if method != "GET":
            self.stats.count(kind or method, len(data) if data is not None else 0)
        async with self._limit:
            try:
                async with session.request(
                    method, url, data=data, headers=dict(built.headers),
                    proxy=connection.proxy_of(conn, url),
                ) as response:
                    payload = await response.read()
                    status = response.status
                    retry_after = response.headers.get("Retry-After")
                    reason = response.reason or ""
            except (aiohttp.ClientError, TimeoutError, OSError) as exc:
                raise apierrors.Unreachable(f"{method} {path}: {exc!r}", status=0) from exc
        if status >= 400:
            if status == 409:
                self.stats.conflicts += 1
            raise wire.failure(method, path, status, payload, reason=reason,
                               retry_after=retry_after)
        decoded = wire.decode_answer(payload)
        if decoded is None:
            raise apierrors.Unreachable(f"{method} {path}: response is not JSON", status=0)
        return decoded

    async def list(self, path: str, *, label_selector: str | None = None
                   ) -> list[dict[str, Any]]:
        """The ``items`` of a list call (read-only; used by ``kooper status``)."""
        params = {"labelSelector": label_selector} if label_selector else None
        body = await self.request("GET", path, params=params)
        items = body.get("items") or []
        return [item for item in items if isinstance(item, dict)]

    # --- ConfigMaps -----------------------------------------------------------

    async def write_configmap(
        self, body: Mapping[str, Any], *, resource_version: str | None
    ) -> str:
        """Create (no version known) or replace (with the precondition); the new version."""
        meta = body["metadata"]
        base = wire.configmap_path(meta["namespace"])
        if resource_version is None:
            result = await self.request("POST", base, body=body, kind="configmap")
        else:
            replacing = {**body, "metadata": {**meta, "resourceVersion": resource_version}}
            result = await self.request(
                "PUT", f"{base}/{meta['name']}", body=replacing, kind="configmap"
            )
        return str(result.get("metadata", {}).get("resourceVersion", ""))

    async def read_lease(self, namespace: str, name: str) -> dict[str, Any]:
        """The Lease as it is now (``apierrors.NotFound`` when absent)."""
        return await self.request("GET", wire.lease_path(namespace, name))

    async def read_configmap(self, namespace: str, name: str) -> dict[str, Any]:
        """The ConfigMap (``apierrors.NotFound`` when absent)."""
        return await self.request("GET", wire.configmap_path(namespace, name))

    async def delete_configmap(self, namespace: str, name: str, *,
                               resource_version: str | None = None) -> None:
        """Delete (only that version, when given: else 409); absent already is fine."""
        body = None if resource_version is None else {
            "apiVersion": "v1", "kind": "DeleteOptions",
            "preconditions": {"resourceVersion": resource_version}}
        with contextlib.suppress(apierrors.NotFound):
            await self.request("DELETE", wire.configmap_path(namespace, name), body=body,
                               kind="configmap")

    # --- custom resources -----------------------------------------------------

    def _cr_path(self, plural: str, namespace: str, name: str) -> str:
        return wire.custom_resource_path(plural, namespace, name, group=views.GROUP,
                                             version=views.VERSION)

    async def read_group(self, namespace: str, name: str) -> dict[str, Any]:
        """The WorkerGroup as it is now."""
        return await self.request("GET", self._cr_path("workergroups", namespace, name))

    async def read_connector(self, namespace: str, name: str) -> dict[str, Any]:
        """The Connector as it is now (``apierrors.NotFound`` when absent)."""
        return await self.request("GET", self._cr_path("connectors", namespace, name))

    async def patch_status(
        self,
        plural: str,
        namespace: str,
        name: str,
        status_patch: Mapping[str, Any],
        *,
        resource_version: str | None = None,
    ) -> dict[str, Any]:
        """Merge-patch ``.status`` (with a ``resourceVersion`` precondition when given)."""
        body: dict[str, Any] = {"status": status_patch}
        if resource_version:
            body["metadata"] = {"resourceVersion": resource_version}
        return await self.request(
            "PATCH",
            self._cr_path(plural, namespace, name) + "/status",
            body=body,
            content_type="application/merge-patch+json",
            kind=f"{plural}/status",
        )

    # --- owners ---------------------------------------------------------------

    async def read_owner(self, namespace: str, kind: str, name: str) -> tuple[bool, int | None]:
        """Whether a pod's owner exists, and its ``spec.replicas`` (StatefulSet/ReplicaSet)."""
        plural = {"StatefulSet": "statefulsets", "ReplicaSet": "replicasets"}[kind]
        try:
            body = await self.request("GET", wire.apps_path(plural, namespace, name))
        except apierrors.NotFound:
            return False, None
        if body.get("metadata", {}).get("deletionTimestamp"):
            return False, None
        replicas = (body.get("spec") or {}).get("replicas", 1)
        return True, replicas if isinstance(replicas, int) else None

    async def read_rollouts(self, namespace: str, owners: Iterable[tuple[str, str]]
                            ) -> dict[tuple[str, str], RolloutFacts]:
        """The update revision of each owner (``control.rollout``); unreadable ones left out.

        A StatefulSet is read on its own; ReplicaSets with one list of the namespace's
        (a Deployment's newest ReplicaSet is found among its siblings).
        """
        found: dict[tuple[str, str], RolloutFacts] = {}
        replicasets = sorted(name for kind, name in owners if kind == "ReplicaSet")
        for kind, name in sorted(owners):
            if kind != "StatefulSet":
                continue
            try:
                body = await self.request("GET", wire.apps_path("statefulsets", namespace,
                                                                    name))
            except apierrors.NotFound:
                continue
            facts = rollout.statefulset_facts(body)
            if facts is not None:
                found[(kind, name)] = facts
        if replicasets:
            items = await self.list(f"/apis/apps/v1/namespaces/{namespace}/replicasets")
            found.update(rollout.replicaset_facts(items, replicasets))
        return found

    # --- events ---------------------------------------------------------------

    async def post_event(
        self,
        *,
        involved: Mapping[str, str],
        reason: str,
        message: str,
        warning: bool = False,
        reporter: str = "kooper",
    ) -> None:
        """Post a core/v1 Event about ``involved`` (apiVersion, kind, namespace, name, uid)."""
        now = views.format_time(int(time.time() * 1000))
        if len(message) > MAX_EVENT_MESSAGE:
            message = message[: MAX_EVENT_MESSAGE - 3] + "..."
        namespace = involved["namespace"]
        body = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"generateName": f"{involved['name']}.", "namespace": namespace},
            "involvedObject": dict(involved),
            "reason": reason,
            "message": message,
            "type": "Warning" if warning else "Normal",
            "source": {"component": "kooper"},
            "reportingComponent": "kooper",
            "reportingInstance": reporter,
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
        }
        await self.request("POST", wire.event_path(namespace), body=body, kind="event")
