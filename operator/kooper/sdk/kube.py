"""A tiny Kubernetes REST client on the standard library (workers install nothing else).

Credentials, in order: ``KOOPER_KUBE_API=http://127.0.0.1:PORT`` (an unauthenticated
URL: the in-process emulator), else the in-cluster service account (token and CA
under ``/var/run/secrets/kubernetes.io/serviceaccount``, address from
``KUBERNETES_SERVICE_HOST``/``KUBERNETES_SERVICE_PORT``). The token is re-read on
every request because the kubelet rotates it.

Errors: every failure is an ``ApiError`` with the HTTP status (0 when the API
could not be reached), the transport's exception chained as its cause, so callers
never catch urllib's exceptions.

``build_request`` and the ``*_path`` functions are the one request builder: the
operator's asyncio client (``shell.kube``) sends what they build too, like
lightkube's sync and async clients share theirs.
"""

from __future__ import annotations

import contextlib
import dataclasses
import http.client
import json
import os
import pathlib
import socket
import ssl
import threading
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator, Mapping
from typing import Any

from kooper.core import errors

API_ENV = "KOOPER_KUBE_API"
SERVICE_ACCOUNT = pathlib.Path("/var/run/secrets/kubernetes.io/serviceaccount")
MERGE_PATCH = "application/merge-patch+json"


class ApiError(errors.KooperError):
    """A Kubernetes API request failed (``status`` 0: the API was unreachable)."""

    def __init__(self, message: str, *, status: int, reason: str = "") -> None:
        super().__init__(message)
        self.status = status
        self.reason = reason


class NoCredentialsError(errors.KooperError):
    """Neither ``KOOPER_KUBE_API`` nor an in-cluster service account is available."""


@dataclasses.dataclass(frozen=True, slots=True)
class Request:
    """One API request as built, before a transport sends it."""

    method: str
    target: str
    """The path and query string (``/api/v1/namespaces/ns/configmaps?labelSelector=a%3Db``)."""
    body: bytes | None
    headers: Mapping[str, str]


def build_request(
    method: str,
    path: str,
    *,
    body: Mapping[str, Any] | None = None,
    content_type: str = "application/json",
    query: Mapping[str, str] | None = None,
    token: str | None = None,
    token_scheme: str = "Bearer",
) -> Request:
    """A JSON request to ``path`` (compact JSON body; ``Content-Type`` only with a body)."""
    target = path + ("?" + urllib.parse.urlencode(query) if query else "")
    data = None if body is None else json.dumps(body, separators=(",", ":")).encode()
    headers = {"Accept": "application/json"}
    if data is not None:
        headers["Content-Type"] = content_type
    if token:
        headers["Authorization"] = f"{token_scheme} {token}"
    return Request(method, target, data, headers)


def decode_answer(payload: bytes | str) -> dict[str, Any] | None:
    """A successful answer's JSON object (``{}`` when empty); None when it is not JSON."""
    if not payload:
        return {}
    try:
        answer = json.loads(payload)
    except ValueError:
        return None
    return answer if isinstance(answer, dict) else {}


def error_message(payload: bytes | str, fallback: str) -> str:
    """The ``message`` of a failed call's ``Status`` answer, else ``fallback``."""
    return _message_of(payload.encode() if isinstance(payload, str) else payload, fallback)


class Api:
    """Blocking JSON requests to one API server."""

    def __init__(
        self,
        base_url: str,
        *,
        token_file: pathlib.Path | None = None,
        ca_file: pathlib.Path | None = None,
        timeout_s: float = 10.0,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.token_file = token_file
        self.timeout_s = timeout_s
        self._context: ssl.SSLContext | None = None
        if self.base_url.startswith("https://"):
            self._context = ssl.create_default_context(
                cafile=str(ca_file) if ca_file is not None else None
            )

    @classmethod
    def from_env(
        cls, environ: Mapping[str, str] | None = None, *, timeout_s: float = 10.0
    ) -> Api:
        """The emulator URL from ``KOOPER_KUBE_API``, else the in-cluster configuration."""
        env = os.environ if environ is None else environ
        if env.get(API_ENV):
            return cls(env[API_ENV], timeout_s=timeout_s)
        host, port = env.get("KUBERNETES_SERVICE_HOST"), env.get("KUBERNETES_SERVICE_PORT")
        token = SERVICE_ACCOUNT / "token"
        if not host or not port or not token.exists():
            raise NoCredentialsError(
                f"not in a cluster (KUBERNETES_SERVICE_HOST/PORT or {token} missing) "
                f"and {API_ENV} is not set"
            )
        if ":" in host:  # an IPv6 address
            host = f"[{host}]"
        return cls(
            f"https://{host}:{port}",
            token_file=token,
            ca_file=SERVICE_ACCOUNT / "ca.crt",
            timeout_s=timeout_s,
        )

    def request(
        self,
        method: str,
        path: str,
        *,
        body: Mapping[str, Any] | None = None,
        content_type: str = "application/json",
        query: Mapping[str, str] | None = None,
    ) -> dict[str, Any]:
        """Send one request; the decoded JSON answer, or ``ApiError``."""
        built = build_request(method, path, body=body, content_type=content_type, query=query,
                              token=self._token())
        request = urllib.request.Request(self.base_url + built.target, data=built.body,
                                         headers=dict(built.headers), method=method)
        try:
            with urllib.request.urlopen(
                request, timeout=self.timeout_s, context=self._context
            ) as response:
                payload = response.read()
        except urllib.error.HTTPError as exc:
            detail = _status_message(exc)
            raise ApiError(
                f"{method} {path}: {exc.code} {detail}", status=exc.code, reason=exc.reason
            ) from exc
        except (urllib.error.URLError, OSError, ValueError) as exc:
            raise ApiError(f"{method} {path}: {exc}", status=0) from exc
        answer = decode_answer(payload)
        if answer is None:
            raise ApiError(f"{method} {path}: answer is not JSON", status=0)
        return answer

    def get(self, path: str, *, query: Mapping[str, str] | None = None) -> dict[str, Any]:
        """GET ``path`` (a list when ``query`` holds selectors)."""
        return self.request("GET", path, query=query)

    def watch(
        self, path: str, *, query: Mapping[str, str], read_timeout_s: float
    ) -> WatchStream:
        """Open a watch on the collection ``path`` (``watch=1`` is added to ``query``).

        ``read_timeout_s`` bounds every read: make it longer than the server-side
        ``timeoutSeconds``. ``ApiError`` if the server answers anything but 200.
        """
        url = urllib.parse.urlsplit(self.base_url)
        built = build_request("GET", path, query={**query, "watch": "1"}, token=self._token())
        target = url.path + built.target
        connection: http.client.HTTPConnection
        if url.scheme == "https":
            connection = http.client.HTTPSConnection(
                url.hostname or "", url.port, timeout=read_timeout_s, context=self._context
            )
        else:
            connection = http.client.HTTPConnection(
                url.hostname or "", url.port, timeout=read_timeout_s
            )
        try:
            connection.request("GET", target, headers=dict(built.headers))
            response = connection.getresponse()
            if response.status != 200:
                detail = _message_of(response.read(), response.reason)
                raise ApiError(
                    f"WATCH {path}: {response.status} {detail}",
                    status=response.status,
                    reason=response.reason,
                )
        except ApiError:
            connection.close()
            raise
        except (OSError, http.client.HTTPException) as exc:
            connection.close()
            raise ApiError(f"WATCH {path}: {exc}", status=0) from exc
        return WatchStream(path, connection, response)

    def _token(self) -> str | None:
        if self.token_file is None:
            return None
        try:
            return self.token_file.read_text().strip()
        except OSError as exc:
            raise ApiError(f"cannot read the token: {exc}", status=0) from exc

    def create(self, path: str, body: Mapping[str, Any]) -> dict[str, Any]:
        """POST ``body`` to the collection ``path``."""
        return self.request("POST", path, body=body)

    def merge_patch(self, path: str, patch: Mapping[str, Any]) -> dict[str, Any]:
        """PATCH ``path`` with a JSON merge patch."""
        return self.request("PATCH", path, body=patch, content_type=MERGE_PATCH)

    def delete(self, path: str) -> dict[str, Any]:
        """DELETE ``path``."""
        return self.request("DELETE", path)


class WatchStream:
    """One open watch response: iterate its events (dicts with ``type`` and ``object``).

    Iteration ends when the server ends the stream (its ``timeoutSeconds``, a
    restart) or after ``close``; a broken connection or a garbled line raises
    ``ApiError`` (status 0).
    """

    def __init__(
        self, path: str, connection: http.client.HTTPConnection, response: http.client.HTTPResponse
    ) -> None:
        self._path = path
        self._connection = connection
        self._response = response
        self._lock = threading.Lock()
        self._closed = False

    def __iter__(self) -> Iterator[dict[str, Any]]:
        try:
            while True:
                try:
                    line = self._response.readline()
                except Exception as exc:
                    # OSError, IncompleteRead, or (after a close() racing this read) whatever
                    # http.client trips over: the stream is over either way.
                    if self._closed:
                        return
                    raise ApiError(f"WATCH {self._path}: {exc!r}", status=0) from exc
                if not line:
                    return
                if not line.strip():
                    continue
                try:
                    event = json.loads(line)
                except ValueError as exc:
                    raise ApiError(f"WATCH {self._path}: an event is not JSON", status=0) from exc
                if isinstance(event, dict):
                    yield event
        finally:
            self.close()

    def close(self) -> None:
        """End the stream; safe from any thread (a blocked read returns at once)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        sock = self._connection.sock
        if sock is not None:
            # Shutting the socket down wakes a reader blocked in recv on another thread;
            # close() alone would not.
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        self._connection.close()


def _message_of(payload: bytes, reason: str) -> str:
    try:
        status = json.loads(payload or b"{}")
    except ValueError:
        return reason
    if isinstance(status, dict) and status.get("message"):
        return str(status["message"])
    return reason


def _status_message(exc: urllib.error.HTTPError) -> str:
    try:
        payload = exc.read()
    except OSError:
        return str(exc.reason)
    return _message_of(payload, str(exc.reason))


def lease_path(namespace: str, name: str | None = None) -> str:
    """The URL path of a Lease (or of the namespace's Leases)."""
    base = f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases"
    return base if name is None else f"{base}/{name}"


def configmap_path(namespace: str, name: str | None = None) -> str:
    """The URL path of a ConfigMap (or of the namespace's ConfigMaps)."""
    base = f"/api/v1/namespaces/{namespace}/configmaps"
    return base if name is None else f"{base}/{name}"


def pod_path(namespace: str, name: str) -> str:
    """The URL path of a Pod."""
    return f"/api/v1/namespaces/{namespace}/pods/{name}"


def custom_resource_path(plural: str, namespace: str, name: str | None = None, *,
                         group: str = "kooper.dev", version: str = "v1alpha1") -> str:
    """The URL path of a custom resource (or of the namespace's collection)."""
    base = f"/apis/{group}/{version}/namespaces/{namespace}/{plural}"
    return base if name is None else f"{base}/{name}"


def apps_path(plural: str, namespace: str, name: str) -> str:
    """The URL path of an ``apps/v1`` object (a StatefulSet or a ReplicaSet)."""
    return f"/apis/apps/v1/namespaces/{namespace}/{plural}/{name}"


def event_path(namespace: str) -> str:
    """The URL path of the namespace's core/v1 Events."""
    return f"/api/v1/namespaces/{namespace}/events"
