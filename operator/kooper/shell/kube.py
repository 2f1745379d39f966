"""The one module that writes to the Kubernetes API.

A small typed client on aiohttp: ConfigMaps (create/replace/delete with
``resourceVersion`` preconditions), status patches of WorkerGroups and
Connectors, reads of pod owners, and Events. kopf does the watching; this module
shares its credentials (``Connection`` is built from kopf's ``ConnectionInfo``).

Requests are built by ``sdk.kube.build_request`` (and its path helpers), the
builder the worker's standard-library client uses too. Transport errors never
leak: every failure is a ``KubeError`` with the HTTP status and the API's message,
the original exception chained as the cause.
``ConflictError`` (409) means a precondition failed: re-read, recompute, retry.
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
from kooper.core import errors
from kooper.sdk import kube as requests

FIELD_MANAGER = "kooper"
MAX_EVENT_MESSAGE = 1024


class KubeError(errors.KooperError):
    """A call to the Kubernetes API failed."""

    def __init__(self, message: str, *, status: int = 0) -> None:
        super().__init__(message)
        self.status = status


class ConflictError(KubeError):
    """409: the object changed since we read it (or already exists)."""


class NotFoundError(KubeError):
    """404: the object (or its namespace, or its kind) does not exist."""


@dataclasses.dataclass(frozen=True, slots=True)
class Connection:
    """Where the API is and how to authenticate (from kopf's ``ConnectionInfo``)."""

    server: str
    token: str | None = None
    scheme: str | None = None
    ca_path: str | None = None
    ca_data: bytes | None = None
    insecure: bool = False
    certificate_path: str | None = None
    private_key_path: str | None = None


@dataclasses.dataclass(slots=True)
class Stats:
    """Writes made, for metrics and the benchmark (``writes`` counts every mutating call)."""

    writes: int = 0
    conflicts: int = 0
    by_kind: dict[str, int] = dataclasses.field(default_factory=dict)
    bytes_by_kind: dict[str, int] = dataclasses.field(default_factory=dict)
    """Request body bytes sent, by kind (how big status patches are)."""

    def count(self, kind: str, size: int = 0) -> None:
        """Count one mutating call of ``kind`` whose body has ``size`` bytes."""
        self.writes += 1
        self.by_kind[kind] = self.by_kind.get(kind, 0) + 1
        self.bytes_by_kind[kind] = self.bytes_by_kind.get(kind, 0) + size


class Client:
    """An asyncio API client; one per operator, shared by all groups."""

    def __init__(self, connection: Connection, *, concurrency: int = 64) -> None:
        self._connection = connection
        self._session: aiohttp.ClientSession | None = None
        self._limit = asyncio.Semaphore(concurrency)
        self.stats = Stats()

    def _ssl(self) -> ssl.SSLContext | bool:
        conn = self._connection
        if not conn.server.startswith("https"):
            return False
        if conn.insecure:
            return False
        context = ssl.create_default_context(
            cafile=conn.ca_path,
            cadata=conn.ca_data.decode() if conn.ca_data else None,
        )
        if conn.certificate_path and conn.private_key_path:
            context.load_cert_chain(conn.certificate_path, conn.private_key_path)
        return context

    async def _ensure(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            headers = {"User-Agent": "kooper-operator"}
            self._session = aiohttp.ClientSession(
                base_url=None,
                headers=headers,
                connector=aiohttp.TCPConnector(ssl=self._ssl(), limit=100),
                timeout=aiohttp.ClientTimeout(total=30),
            )
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
        """One API call; returns the decoded response body, raises ``KubeError``."""
        session = await self._ensure()
        built = requests.build_request(method, path, body=body, content_type=content_type,
                                       query=params, token=self._connection.token,
                                       token_scheme=self._connection.scheme or "Bearer")
        url = self._connection.server.rstrip("/") + built.target
        data = built.body
        if method != "GET":
            self.stats.count(kind or method, len(data) if data is not None else 0)
        async with self._limit:
            try:
                async with session.request(
                    method, url, data=data, headers=dict(built.headers),
                ) as response:
                    text = await response.text()
                    status = response.status
            except (aiohttp.ClientError, TimeoutError, OSError) as exc:
                raise KubeError(f"{method} {path}: {exc!r}") from exc
        if status >= 400:
            message = requests.error_message(text, text)
            cls = {409: ConflictError, 404: NotFoundError}.get(status, KubeError)
            if status == 409:
                self.stats.conflicts += 1
            raise cls(f"{method} {path}: {status} {message}", status=status)
        decoded = requests.decode_answer(text)
        if decoded is None:
            raise KubeError(f"{method} {path}: response is not JSON")
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
        base = requests.configmap_path(meta["namespace"])
        if resource_version is None:
            result = await self.request("POST", base, body=body, kind="configmap")
        else:
            replacing = {**body, "metadata": {**meta, "resourceVersion": resource_version}}
            result = await self.request(
                "PUT", f"{base}/{meta['name']}", body=replacing, kind="configmap"
            )
        return str(result.get("metadata", {}).get("resourceVersion", ""))

    async def read_configmap(self, namespace: str, name: str) -> dict[str, Any]:
        """The ConfigMap (``NotFoundError`` when absent)."""
        return await self.request("GET", requests.configmap_path(namespace, name))

    async def delete_configmap(self, namespace: str, name: str) -> None:
        """Delete; absent already is fine."""
        with contextlib.suppress(NotFoundError):
            await self.request("DELETE", requests.configmap_path(namespace, name),
                               kind="configmap")

    # --- custom resources -----------------------------------------------------

    def _cr_path(self, plural: str, namespace: str, name: str) -> str:
        return requests.custom_resource_path(plural, namespace, name, group=views.GROUP,
                                             version=views.VERSION)

    async def read_group(self, namespace: str, name: str) -> dict[str, Any]:
        """The WorkerGroup as it is now."""
        return await self.request("GET", self._cr_path("workergroups", namespace, name))

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
            body = await self.request("GET", requests.apps_path(plural, namespace, name))
        except NotFoundError:
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
                body = await self.request("GET", requests.apps_path("statefulsets", namespace,
                                                                    name))
            except NotFoundError:
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
        await self.request("POST", requests.event_path(namespace), body=body, kind="event")
